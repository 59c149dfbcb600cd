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
const path = require('node:path');
const h = require('../fixtures/runner/harness');

const group = h.someGroup();
const APP = path.join(h.FIXTURES, 'busy-turns.js');
const KEPT = 8;
const FRESH = 12;
const CAP_MS = 60_000; // a bound on the whole load, never reached when the runner works

/** Turns (answers on one kept connection) until each of FRESH new connections was answered. */
async function turnsForNewConnections(sock) {
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
  await r.ready();
  return { r, sock };
}

test('with 32 descriptors a worker busy with keep-alive connections answers 12 new connections within a few turns of its loop (at most 6)', async (t) => {
  const { r, sock } = await runner(t, 32);
  const turns = await turnsForNewConnections(sock);
  // Accepted in the next turn, read and answered in the one after; up to two more for
  // where the kept connection falls in each turn's order (2-4 seen here).
  assert.ok(turns <= 6, `the last of ${FRESH} new connections waited ${turns} turns of the worker's loop (at most 6)`);
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null }, 'every descriptor closed and the worker drained');
});

test('with 1 (Node\'s own behaviour) the same worker takes one new connection per turn: the last of 12 waits about 12 turns', async (t) => {
  const { r, sock } = await runner(t, 1);
  const turns = await turnsForNewConnections(sock);
  assert.ok(turns >= (FRESH * 3) / 4, `the last of ${FRESH} new connections waited ${turns} turns (one accept a turn: about ${FRESH}; 14 seen here)`);
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null });
});
