'use strict';
// The rolling restart (app/rolling.js) alone, against a fake primary whose
// workers are promises the test settles: which step waits for which event.
// test/integration/runner-signals.test.js (SIGHUP under load) and
// runner-rebind.test.js run it with real workers.

const test = require('node:test');
const assert = require('node:assert/strict');
const rolling = require('../../app/rolling');
const { recordingLog } = require('../lib/fake-workers');

// Every promise callback that can run has run once setImmediate fires.
const settle = () => new Promise(setImmediate);

/** A worker's info as app/lifecycle.js keeps it: ready (true: listens; false: died first), exited. */
function workerInfo(pid, slot, listener) {
  const info = { id: pid, pid, slot, listener, state: 'starting', error: null };
  info.ready = new Promise((resolve) => { info.resolveReady = resolve; });
  info.exited = new Promise((resolve) => { info.resolveExit = resolve; });
  return info;
}

/**
 * A primary of n slots, each with a listening worker (pids 101…) on binding 'A'.
 * `steps` records what the rolling restart asked for, in order.
 */
function fakePrimary(n) {
  const steps = [];
  const forked = [];
  let nextPid = 100;
  const p = {
    state: 'running', reloading: false, moveAfterReload: false, spare: null, spareTimer: null,
    infos: new Map(), log: recordingLog(), bound: ['A'],
  };
  p.slots = Array.from({ length: n }, (_, i) => ({ n: i + 1, current: null, timer: null }));
  for (const slot of p.slots) {
    slot.current = workerInfo(++nextPid, slot, 'A');
    slot.current.state = 'ready';
    p.infos.set(slot.current.id, slot.current);
  }
  p.bindingOf = () => p.bound[0];
  p.fork = (slot, options) => {
    const info = workerInfo(++nextPid, slot, p.bindingOf(slot));
    info.replacement = options.replacement;
    p.infos.set(info.id, info);
    forked.push(info);
    steps.push(`fork ${slot.n}`);
    return info;
  };
  p.takeSpare = (slot) => {
    if (!p.spare) return null;
    const spare = p.spare;
    p.spare = null;
    spare.slot = slot;
    spare.listener = p.bindingOf(slot);
    steps.push(`spare ${slot.n}`);
    return spare;
  };
  p.retire = (info) => {
    steps.push(`retire ${info.pid}`);
    info.state = 'retiring';
    return info.exited.then(() => p.infos.delete(info.id));
  };
  p.pids = () => p.slots.map((slot) => slot.current && slot.current.pid).filter(Boolean);
  p.scheduleSpare = () => steps.push('schedule-spare');
  return { p, steps, forked, log: p.log };
}

test('SIGHUP: one slot at a time, the new worker listens before the old one drains, the next waits for that exit', async () => {
  const { p, steps, forked, log } = fakePrimary(2);
  const [old1, old2] = p.slots.map((slot) => slot.current);
  const done = rolling.reload(p, { reason: 'SIGHUP' });
  await settle();
  assert.deepEqual(steps, ['fork 1'], 'nothing retired before the new worker listens');

  forked[0].resolveReady(true);
  await settle();
  assert.deepEqual(steps, ['fork 1', `retire ${old1.pid}`]);
  assert.equal(p.slots[0].current, forked[0]);

  old1.resolveExit({ code: 0 });
  await settle();
  assert.deepEqual(steps.slice(2), ['fork 2'], 'slot 2 starts once the old worker of slot 1 is gone');

  forked[1].resolveReady(true);
  await settle();
  old2.resolveExit({ code: 0 });
  await done;
  assert.deepEqual(steps.slice(3), [`retire ${old2.pid}`, 'schedule-spare']);
  const [doneEvent] = log.named('reload-done');
  assert.deepEqual(doneEvent.workers, forked.map((i) => i.pid));
  assert.deepEqual(doneEvent.replaced, [old1.pid, old2.pid]);
  assert.equal(p.reloading, false);
});

test('SIGHUP retires the waiting spare (it holds the old code) before the first slot', async () => {
  const { p, steps, forked } = fakePrimary(1);
  const spare = workerInfo(900, null, undefined);
  p.spare = spare;
  const done = rolling.reload(p, { reason: 'SIGHUP' });
  assert.deepEqual(steps, ['retire 900', 'fork 1']);
  assert.equal(p.spare, null);
  forked[0].resolveReady(true);
  await settle();
  [...p.infos.values()].forEach((i) => i.resolveExit({ code: 0 }));
  await done;
});

test('a new worker that dies before it listens stops the restart; the old one keeps serving', async () => {
  const { p, steps, forked, log } = fakePrimary(2);
  const old1 = p.slots[0].current;
  const done = rolling.reload(p, { reason: 'SIGHUP' });
  forked[0].error = { name: 'Error', message: 'boom', at: '/srv/app.js:3:7' };
  forked[0].resolveReady(false);
  await done;
  assert.deepEqual(steps, ['fork 1', 'schedule-spare'], 'no retire, and slot 2 is not touched');
  assert.equal(p.slots[0].current, old1);
  const [failed] = log.named('reload-failed');
  assert.equal(failed.slot, 1);
  assert.equal(failed.error, 'Error: boom (at /srv/app.js:3:7)');
  assert.equal(log.named('reload-done').length, 0);
  assert.equal(p.reloading, false);
});

test('a second restart while one runs, or before the first ready, is ignored', async () => {
  const { p, forked, log } = fakePrimary(1);
  const done = rolling.reload(p, { reason: 'SIGHUP' });
  await rolling.reload(p, { reason: 'SIGHUP' });
  assert.deepEqual(log.named('reload-ignored').map((e) => e.reason), ['a rolling restart is already running']);
  forked[0].resolveReady(true);
  await settle();
  [...p.infos.values()].forEach((i) => i.resolveExit({ code: 0 }));
  await done;

  p.state = 'starting';
  await rolling.reload(p, { reason: 'SIGHUP' });
  assert.equal(log.named('reload-ignored').at(-1).reason, 'state is starting');
});

test('after a re-bind only the slots on the old binding restart, and the waiting spare takes the first', async () => {
  const { p, steps, forked, log } = fakePrimary(3);
  p.slots[2].current.listener = 'B'; // already on the new socket
  p.bound = ['B'];
  const spare = workerInfo(900, null, undefined);
  p.spare = spare;
  assert.deepEqual(rolling.staleSlots(p).map((slot) => slot.n), [1, 2]);

  rolling.moveWorkers(p);
  assert.deepEqual(log.named('reload').map((e) => [e.reason, e.slots]), [['socket-rebound', [1, 2]]]);
  assert.deepEqual(steps, ['spare 1'], 'the spare is not retired: it is idle, and gets the new socket');
  spare.resolveReady(true);
  await settle();
  p.infos.get(101).resolveExit({ code: 0 });
  await settle();
  assert.deepEqual(steps.slice(1), ['retire 101', 'fork 2']);
  assert.equal(forked[0].listener, 'B');
  forked[0].resolveReady(true);
  await settle();
  p.infos.get(102).resolveExit({ code: 0 });
  await settle();
  assert.deepEqual(log.named('reload-done')[0].workers, [900, forked[0].pid, 103]);
  assert.deepEqual(rolling.staleSlots(p), []);
});

test('a re-bind during a SIGHUP restart moves the workers that restart started on the old socket, after it', async () => {
  const { p, forked, log } = fakePrimary(2);
  const done = rolling.reload(p, { reason: 'SIGHUP' });
  p.bound = ['B']; // the socket is bound again while slot 1's new worker starts on 'A'
  rolling.moveWorkers(p);
  assert.equal(p.moveAfterReload, true);
  assert.equal(log.named('reload-ignored').length, 0);
  forked[0].resolveReady(true);
  await settle();
  p.infos.get(101).resolveExit({ code: 0 });
  await settle();
  forked[1].resolveReady(true);
  await settle();
  p.infos.get(102).resolveExit({ code: 0 });
  await done;
  assert.deepEqual([forked[0].listener, forked[1].listener], ['A', 'B']);
  await settle(); // the move is queued with setImmediate once the restart ends
  assert.deepEqual(log.named('reload').map((e) => [e.reason, e.slots]), [['SIGHUP', undefined], ['socket-rebound', [1]]]);
});
