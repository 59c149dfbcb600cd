'use strict';
// The primary's worker lifecycle (app/lifecycle.js) through a Primary whose
// workers are fakes (test/lib/fake-workers.js): no process is forked. The
// workers talk to it the way app/worker.js does (want-listen, listening, fatal);
// an exit is what cluster's 'exit' event hands to Primary#onExit.
// test/integration/runner-{strategies,signals}.test.js run the same with real workers.

const test = require('node:test');
const assert = require('node:assert/strict');
const { Primary } = require('../../app/cluster');
const { MSG } = require('../../app/ipc');
const { runnerSettings, fakeCluster, recordingLog } = require('../lib/fake-workers');
const { until } = require('../lib/util');

const SOCKET = '/run/tunekit-unit/app.sock'; // never bound: the binding below is a stand-in

/** A Primary with fake workers, each slot forked as run() does; shutdown() recorded, not run. */
function startPrimary(t, overrides = {}) {
  const log = recordingLog();
  const { forked, forkWorker } = fakeCluster();
  const s = runnerSettings({ workers: 2, listen: `unix:${SOCKET}`, socketCheckMs: 0, ...overrides });
  const p = new Primary(s, { log, exit: () => {}, forkWorker });
  p.bound = [{ kind: 'unix', path: SOCKET, handle: { stands: 'for a bound pipe' } }];
  const shutdowns = [];
  p.shutdown = (reason, code) => {
    shutdowns.push({ reason, code });
    p.state = 'stopping';
  };
  t.after(() => {
    for (const slot of p.slots) clearTimeout(slot.timer);
    clearTimeout(p.spareTimer);
  });
  for (const slot of p.slots) slot.current = p.fork(slot);
  return { p, log, forked, shutdowns };
}

const say = (worker, tunekit, fields = {}) => worker.emit('message', { tunekit, ...fields });
function listens(worker) {
  say(worker, MSG.WANT_LISTEN);
  say(worker, MSG.LISTENING, { source: 'example' });
}

test('ready once every slot\'s worker listens on the bound handle; then one spare is forked', async (t) => {
  const { p, log, forked } = startPrimary(t);
  assert.deepEqual(forked.map((w) => w.env.TUNEKIT_SLOT), ['1', '2']);
  assert.equal(forked[0].env.TUNEKIT_PRIMARY_PID, String(process.pid));

  listens(forked[0]);
  // The handle, then as many more of it as make acceptsPerTurn descriptors in the worker.
  const more = { msg: { tunekit: MSG.ACCEPT_MORE }, handle: p.bound[0].handle };
  const n = p.s.acceptsPerTurn;
  assert.equal(n, 32, 'the definition\'s tunekit_app_accepts_per_turn');
  assert.deepEqual(forked[0].sent, [{ msg: { tunekit: MSG.LISTEN, via: 'handle', address: SOCKET }, handle: p.bound[0].handle }, ...Array(n - 1).fill(more)]);
  assert.equal(log.named('ready').length, 0, 'not ready while slot 2 has no listening worker');

  listens(forked[1]);
  const [ready] = log.named('ready');
  assert.deepEqual(ready.workers, [forked[0].process.pid, forked[1].process.pid]);
  assert.equal(p.state, 'running');

  await until('the spare is forked', () => log.named('spare-start').length === 1);
  assert.equal(forked[2].env.TUNEKIT_SLOT, '0', 'the spare has no slot');
  say(forked[2], MSG.WANT_LISTEN);
  assert.equal(log.named('spare-ready').length, 1);
  assert.deepEqual(forked[2].sent, [], 'a spare gets no listener until a worker dies');
});

test('a worker that closed its extra descriptors gets as many fresh ones, never more than the setting, none once it drains', async (t) => {
  const { p, forked } = startPrimary(t);
  forked.forEach(listens);
  const w = forked[0];
  const more = { msg: { tunekit: MSG.ACCEPT_MORE }, handle: p.bound[0].handle };
  w.sent.length = 0;
  say(w, MSG.ACCEPT_MORE_WANTED, { n: 5 });
  assert.deepEqual(w.sent, Array(5).fill(more));
  w.sent.length = 0;
  say(w, MSG.ACCEPT_MORE_WANTED, { n: 1000 });
  assert.equal(w.sent.length, p.s.acceptsPerTurn - 1, 'capped at tunekit_app_accepts_per_turn - 1');
  w.sent.length = 0;
  say(w, MSG.ACCEPT_MORE_WANTED, { n: 'x' });
  assert.deepEqual(w.sent, [], 'a malformed count sends nothing');
  p.slots[0].current.state = 'retiring';
  say(w, MSG.ACCEPT_MORE_WANTED, { n: 3 });
  assert.deepEqual(w.sent, [], 'a retiring worker gets none');
});

test('a dead worker\'s slot goes to the waiting spare at once; a new spare follows', async (t) => {
  const { p, log, forked } = startPrimary(t);
  forked.forEach(listens);
  await until('the spare is forked', () => forked.length === 3);
  const spare = forked[2];
  say(spare, MSG.WANT_LISTEN);

  p.onExit(forked[0], 1, null);
  assert.equal(log.named('worker-exit')[0].level, 'warn', 'an unplanned exit');
  assert.deepEqual(log.named('spare-promoted').map((e) => e.slot), [1]);
  assert.equal(log.named('respawn').length, 0, 'no fork while the spare takes over');
  assert.deepEqual(spare.sent.map((m) => m.msg.tunekit), [MSG.LISTEN, ...Array(p.s.acceptsPerTurn - 1).fill(MSG.ACCEPT_MORE)]);
  assert.equal(p.slots[0].current.worker, spare);
  await until('a new spare', () => log.named('spare-start').length === 2);
});

test('without a spare, a slot is refilled after a backoff that doubles with each death since a worker last stayed up', async (t) => {
  const { p, log, forked } = startPrimary(t, { spareWorkers: 0 });
  forked.forEach(listens);
  p.onExit(forked[0], 1, null);
  p.onExit(forked[1], null, 'SIGKILL');
  const { respawnBackoffMs: b, respawnBackoffMaxMs: max } = p.s;
  assert.deepEqual(log.named('respawn').map((e) => [e.slot, e.in_ms]), [[1, Math.min(b, max)], [2, Math.min(2 * b, max)]]);
  assert.equal(p.slots[0].current, null);
  await until('both slots forked again', () => forked.length === 4);
  assert.deepEqual(p.slots.map((slot) => slot.current.worker), [forked[2], forked[3]]);
});

test('until a worker has stayed up minUptimeMs after it listened, youngDeathLimit deaths stop the cluster with the last worker\'s error', (t) => {
  const { p, log, forked, shutdowns } = startPrimary(t, { workers: 3, youngDeathLimit: 3, spareWorkers: 0, minUptimeMs: 60_000 });
  forked.forEach(listens);
  say(forked[2], MSG.FATAL, { error: { name: 'Error', message: 'boom', at: '/srv/app.js:3:7' } });
  for (const w of forked) p.onExit(w, 1, null);
  assert.deepEqual(log.named('worker-exit').map((e) => e.stage), ['young', 'young', 'young']);
  const [loop] = log.named('crash-loop');
  assert.equal(loop.deaths, 3);
  assert.match(loop.message, /crash loop: 3 worker deaths and no worker stayed up 60000 ms after it listened \(tunekit_app_young_death_limit 3, tunekit_app_min_uptime_ms\); stopping the cluster\. Last worker error: Error: boom \(at \/srv\/app\.js:3:7\)/);
  assert.deepEqual(shutdowns, [{ reason: 'crash-loop', code: 1 }]);
});

/** The Primary once a worker has stayed up minUptimeMs (20 ms here) after it listened: `stable` logged. */
async function proven(t, overrides) {
  const started = startPrimary(t, { minUptimeMs: 20, ...overrides });
  started.forked.forEach(listens);
  await until('a worker to prove the app', () => started.log.named('stable').length === 1);
  return started;
}

/** The new worker slot `n` gets after a death, once it is forked; it listens. */
async function listening(p, n) {
  const info = await until(`slot ${n} to hold a new worker`, () => p.slots[n - 1].current && !p.slots[n - 1].current.listeningAt && p.slots[n - 1].current);
  listens(info.worker);
  return info;
}

test('once a worker has stayed up minUptimeMs, no number of deaths stops the cluster: each dead worker is replaced', async (t) => {
  const { p, log, forked, shutdowns } = await proven(t, { youngDeathLimit: 2, spareWorkers: 0, respawnBackoffMs: 1, respawnBackoffMaxMs: 2 });
  p.onExit(forked[0], 1, null);
  p.onExit(forked[1], 1, null);
  for (let i = 0; i < 20; i++) p.onExit((await listening(p, 1 + (i % 2))).worker, 1, null); // within its first 20 ms: young
  assert.deepEqual(shutdowns, []);
  assert.deepEqual(log.named('crash-loop'), []);
  assert.equal(log.named('respawn').length, 22, 'every dead worker was replaced');
  assert.deepEqual(log.named('worker-exit').slice(2).map((e) => e.stage), Array(20).fill('young'));
  assert.equal(p.deathsSinceStable, 22);
});

test('the respawn delay doubles with each worker that died on its own since one last stayed up minUptimeMs, up to the max; a death with a request open does not grow it; a worker that stays up resets it', async (t) => {
  const { p, log, forked } = await proven(t, { spareWorkers: 0, respawnBackoffMs: 10, respawnBackoffMaxMs: 40 });
  await until('both workers to have stayed up', () => p.slots.every((slot) => slot.current.stable));
  p.onExit(forked[0], 1, null);
  assert.equal(log.named('worker-exit').at(-1).stage, 'serving', 'it had stayed up minUptimeMs');
  for (let i = 0; i < 4; i++) p.onExit((await listening(p, 1)).worker, 1, null);
  assert.deepEqual(log.named('worker-exit').slice(1).map((e) => e.stage), ['young', 'young', 'young', 'young']);
  // Killed within its first 20 ms, with a request open (answered 500 on its way out): a request killed it.
  const killed = await listening(p, 1);
  say(killed.worker, MSG.FATAL, { error: { name: 'Error', message: 'boom' }, open: 1 });
  p.onExit(killed.worker, 1, null);
  assert.equal(log.named('worker-exit').at(-1).stage, 'serving');
  assert.deepEqual(log.named('respawn').map((e) => e.in_ms), [10, 10, 20, 40, 40, 40]);
  // A worker that stays up minUptimeMs after it listened: the next death starts again from the base.
  const survivor = await listening(p, 1);
  await until('the new worker to have stayed up', () => survivor.stable);
  assert.equal(p.unstableDeaths, 0);
  p.onExit(survivor.worker, 1, null);
  p.onExit((await listening(p, 1)).worker, 1, null);
  p.onExit((await listening(p, 1)).worker, 1, null);
  assert.deepEqual(log.named('respawn').slice(-3).map((e) => e.in_ms), [10, 10, 20]);
});

test('a first error is logged in full once, its repeats counted and summed up at the stop; a death without an error is known by its signal', async (t) => {
  const { p, log, forked } = await proven(t, { spareWorkers: 0, respawnBackoffMs: 1, respawnBackoffMaxMs: 1 });
  p.onExit(forked[0], null, 'SIGKILL'); // killed (the OOM killer, kill -9): no error reported
  const boom = (n) => ({ name: 'TypeError', message: `Cannot read properties of undefined (reading 'id') for user ${n}`, at: '/srv/app.js:9:3', frames: ['handler (/srv/app.js:9:3)', 'process.processImmediate (node:internal/timers:483:21)'] });
  for (let i = 0; i < 3; i++) {
    const info = await listening(p, 1);
    say(info.worker, MSG.FATAL, { error: boom(i) });
    p.onExit(info.worker, 1, null);
  }
  const other = await listening(p, 1);
  say(other.worker, MSG.FATAL, { error: { name: 'Error', message: 'other', frames: ['x (/srv/other.js:1:1)'] } });
  p.onExit(other.worker, 1, null);
  // Killed again, before it listened this time.
  const starting = await until('slot 1 forked again', () => p.slots[0].current && !p.slots[0].current.listeningAt && p.slots[0].current);
  p.onExit(starting.worker, null, 'SIGKILL');

  const exits = log.named('worker-exit');
  assert.deepEqual(exits.slice(1).map((e) => e.stage), ['young', 'young', 'young', 'young', 'starting']);
  assert.equal(new Set(exits.slice(1, 4).map((e) => e.crash)).size, 1, 'the same error with another number in its message is one kind');
  assert.equal(exits[5].crash, exits[0].crash, 'a kill is known by its signal');
  const first = log.named('worker-crash');
  assert.deepEqual(first.map((e) => e.crash), [exits[0].crash, exits[1].crash, exits[4].crash], 'one full line per distinct error, at its first death');
  assert.deepEqual([first[0].error, first[0].signal], [null, 'SIGKILL']);
  assert.deepEqual(first[1].error.frames, boom(0).frames);
  assert.deepEqual(log.named('crash-summary'), [], 'repeats wait for their summary');

  // The real stop: it sums up what is pending.
  Object.assign(p, { shutdown: Primary.prototype.shutdown, finish: () => {}, releaseListeners: () => {} });
  p.shutdown('SIGTERM', 0);
  const summary = log.named('crash-summary');
  assert.deepEqual(summary.map((e) => [e.crash, e.count, e.total]), [[exits[0].crash, 1, 2], [exits[1].crash, 2, 3]]);
  assert.match(summary[1].message, /^TypeError: Cannot read properties of undefined \(reading 'id'\) for user 0 \(at \/srv\/app\.js:9:3\): 2 more worker deaths in the last \d+ s, 3 since /);
});

test('a module that fails to load before the first ready stops the cluster; nothing is respawned', (t) => {
  const { p, log, forked, shutdowns } = startPrimary(t);
  say(forked[0], MSG.FATAL, { error: { name: 'SyntaxError', message: 'Unexpected token', at: '/srv/app.js:1:1', where: 'load' } });
  p.onExit(forked[0], 1, null);
  assert.match(log.named('module-load-failed')[0].message, /failed to load: SyntaxError: Unexpected token \(at \/srv\/app\.js:1:1\); fix it and start again/);
  assert.deepEqual(shutdowns, [{ reason: 'module-load-failed', code: 1 }]);
  assert.equal(log.named('respawn').length, 0);
  assert.equal(forked.length, 2);
});

test('retire: the worker is told to drain, and SIGKILLed when still there after drainTimeoutMs + killGraceMs', async (t) => {
  const { p, log, forked } = startPrimary(t, { drainTimeoutMs: 50, killGraceMs: 50, spareWorkers: 0 });
  forked.forEach(listens);
  const info = p.slots[0].current;
  const retired = p.retire(info);
  assert.equal(forked[0].sent.at(-1).msg.tunekit, MSG.DRAIN);
  await until('the SIGKILL', () => forked[0].signals.includes('SIGKILL'));
  assert.equal(log.named('worker-kill')[0].worker_pid, info.pid);
  assert.equal(p.exitCode, 1, 'a worker that had to be killed makes the exit code 1');
  p.onExit(forked[0], null, 'SIGKILL');
  await retired;
  assert.equal(log.named('worker-exit')[0].level, 'info', 'a retired worker\'s exit is planned');
  assert.equal(log.named('respawn').length, 0);

  // A worker whose IPC channel is gone gets SIGTERM instead.
  forked[1].connected = false;
  p.retire(p.slots[1].current);
  assert.deepEqual(forked[1].signals, ['SIGTERM']);
  p.onExit(forked[1], 0, null);
});
