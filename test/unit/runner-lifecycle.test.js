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
  assert.deepEqual(forked[0].sent, [{ msg: { tunekit: MSG.LISTEN, via: 'handle', address: SOCKET }, handle: p.bound[0].handle }]);
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
  assert.deepEqual(spare.sent.map((m) => m.msg.tunekit), [MSG.LISTEN]);
  assert.equal(p.slots[0].current.worker, spare);
  await until('a new spare', () => log.named('spare-start').length === 2);
});

test('without a spare, a slot is refilled after a backoff that doubles with each death in the window', async (t) => {
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

test('crashLimit deaths within the window stop the cluster with the last worker\'s error', (t) => {
  const { p, log, forked, shutdowns } = startPrimary(t, { workers: 3, crashLimit: 3, spareWorkers: 0 });
  forked.forEach(listens);
  say(forked[2], MSG.FATAL, { error: { name: 'Error', message: 'boom', at: '/srv/app.js:3:7' } });
  for (const w of forked) p.onExit(w, 1, null);
  const [loop] = log.named('crash-loop');
  assert.equal(loop.deaths, 3);
  assert.match(loop.message, /crash loop: 3 worker deaths within 10 s; stopping the cluster\. Last worker error: Error: boom \(at \/srv\/app\.js:3:7\)/);
  assert.deepEqual(shutdowns, [{ reason: 'crash-loop', code: 1 }]);
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
