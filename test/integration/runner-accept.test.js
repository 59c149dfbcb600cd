'use strict';
// A worker busy with keep-alive connections still takes new ones at once
// (tunekit_app_accepts_per_turn). Since libuv 1.45 (Node 20) a listening handle
// accepts one connection per turn of the event loop
// (https://github.com/libuv/libuv/pull/3696); the runner gives each worker more
// descriptors of the socket. Measured in turns of the worker's loop, not in time:
// each of KEPT keep-alive connections has one request served per turn (the
// fixture holds the loop BUSY_MS for each), so the answers on one of them count
// the turns a new connection waited.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { procSockets } = require('../../app/address');
const { until } = require('../lib/util');

const group = h.someGroup();
const APP = path.join(h.FIXTURES, 'busy-turns.js');
const KEPT = 8;
const FRESH = 12;
const CAP_MS = 60_000; // a bound on the whole load, never reached when the runner works

/**
 * The worker's descriptors of its listening Unix socket, and how many of them its
 * epoll instances poll (the `tfd:` lines of an eventpoll descriptor's fdinfo).
 */
function listeningDescriptors(pid) {
  const listening = new Set([...procSockets()].filter(([, s]) => s.kind === 'unix' && s.listening).map(([ino]) => `socket:[${ino}]`));
  const fds = new Map();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      fds.set(fd, fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch { /* closed meanwhile */ }
  }
  const mine = [...fds].filter(([, link]) => listening.has(link)).map(([fd]) => fd);
  let polled = 0;
  for (const [fd, link] of fds) {
    if (link !== 'anon_inode:[eventpoll]') continue;
    const info = fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    for (const m of info.matchAll(/^tfd:\s+(\d+)/gm)) if (mine.includes(m[1])) polled += 1;
  }
  return { held: mine.length, polled };
}

/** Turns (answers on one kept connection) until each of FRESH new connections was answered. */
async function turnsForNewConnections(sock, { whileBusy = () => {} } = {}) {
  let stop = false;
  const answered = Array(KEPT).fill(0);
  const loops = [];
  const deadline = Date.now() + CAP_MS;
  for (let k = 0; k < KEPT; k++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    loops.push((async () => {
      while (!stop && Date.now() < deadline) {
        const res = await h.request(sock, `/kept/${k}`, { agent });
        assert.equal(res.status, 200);
        answered[k] += 1;
      }
      agent.destroy();
    })());
  }
  try {
    // Every kept connection served twice: the worker holds them all and turns slowly.
    while (answered.some((n) => n < 2)) {
      assert.ok(Date.now() < deadline, 'the kept connections were not served');
      await new Promise((resolve) => setImmediate(resolve));
    }
    const before = answered[0];
    const turns = await Promise.all(Array.from({ length: FRESH }, async (_, i) => {
      const res = await h.request(sock, `/fresh/${i}`); // a new connection each (no agent)
      assert.equal(res.status, 200);
      return answered[0] - before;
    }));
    whileBusy();
    return Math.max(...turns);
  } finally {
    stop = true;
    await Promise.allSettled(loops);
  }
}

async function runner(t, accepts) {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  const r = h.start(t, {
    args: [APP, '--listen', `unix:${sock}`, '--workers', '1', '--strategy', 'shared', '--socket-group', group.name,
      '--set', `tunekit_app_accepts_per_turn=${accepts}`],
    env: { BUSY_MS: '20' },
  });
  const ready = await r.ready();
  return { r, sock, pid: ready.workers[0] };
}

test('with 32 descriptors a worker polls one while it keeps up, all 32 while busy with keep-alive connections (12 new ones answered within at most 6 turns of its loop), and one again once it is quiet', async (t) => {
  const { r, sock, pid } = await runner(t, 32);
  // Idle, it keeps up (a slow first turn would open them; they close again after 10 s).
  await until('the 31 extra descriptors held, one polled', () => {
    const d = listeningDescriptors(pid);
    return d.held === 32 && d.polled === 1;
  }, 60_000);
  let busy = null;
  const turns = await turnsForNewConnections(sock, { whileBusy: () => { busy = listeningDescriptors(pid); } });
  // Accepted in the next turn, read and answered in the one after; up to two more for
  // where the kept connection falls in each turn's order (2-4 seen here).
  assert.ok(turns <= 6, `the last of ${FRESH} new connections waited ${turns} turns of the worker's loop (at most 6)`);
  assert.deepEqual(busy, { held: 32, polled: 32 }, 'turns of 160 ms open every descriptor');
  // Quiet: the extra descriptors are closed and fresh ones from the primary held unpolled.
  await until('back to one polled descriptor, 32 held', () => {
    const d = listeningDescriptors(pid);
    return d.polled === 1 && d.held === 32;
  }, 60_000);
  const res = await h.request(sock, '/after-quiet');
  assert.equal(res.status, 200);
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null }, 'every descriptor closed and the worker drained');
});

test('with 1 (Node\'s own behaviour) the same worker takes one new connection per turn: the last of 12 waits about 12 turns', async (t) => {
  const { r, sock, pid } = await runner(t, 1);
  let busy = null;
  const turns = await turnsForNewConnections(sock, { whileBusy: () => { busy = listeningDescriptors(pid); } });
  assert.ok(turns >= (FRESH * 3) / 4, `the last of ${FRESH} new connections waited ${turns} turns (one accept a turn: about ${FRESH}; 14 seen here)`);
  assert.deepEqual(busy, { held: 1, polled: 1 });
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null });
});
