'use strict';
// bench --pin (loadtest/pin.js): which CPU each worker gets, a real
// sched_setaffinity on processes of this test's own, and taskset's refusal.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { pinStack, cpuFor, allowedCpus: allowed } = require('../../loadtest/pin');

test('worker k goes to CPU k mod cores; masters and the primary stay free', async (t) => {
  assert.deepEqual([0, 1, 2, 3].map((k) => cpuFor(k, 2)), [0, 1, 0, 1]);
  const kids = [0, 1, 2, 3, 4].map(() => spawn('sleep', ['60']));
  t.after(() => kids.forEach((k) => k.kill()));
  const [master, w1, primary, a1, a2] = kids.map((k) => k.pid);
  const before = allowed(master);
  const placed = pinStack({ nginx: [master, w1], app: [primary, a1, a2] }, { cores: 2 });
  assert.deepEqual(placed, [
    { pid: w1, role: 'nginx', cpu: 0 },
    { pid: a1, role: 'app', cpu: 0 },
    { pid: a2, role: 'app', cpu: 1 },
  ]);
  assert.equal(allowed(w1), '0');
  assert.equal(allowed(a2), '1');
  assert.equal(allowed(master), before, 'the master is not pinned');
  assert.equal(allowed(primary), before, 'the primary is not pinned');
});

test('a pid taskset cannot pin is an error naming the worker and the way out', () => {
  assert.throws(() => pinStack({ nginx: [], app: [1, 2 ** 22 + 7] }, { cores: 2 }),
    /taskset could not pin app worker 4194311 to CPU 0: the process is gone.*run the bench without --pin/);
});

test('--own-core: the generator on CPU 0, the stacks on the rest; none under 2 CPUs', () => {
  const { ownCoreSplit } = require('../../loadtest/pin');
  assert.deepEqual(ownCoreSplit(2), { generator: '0', stacks: '1' });
  assert.deepEqual(ownCoreSplit(8), { generator: '0', stacks: '1-7' });
  assert.equal(ownCoreSplit(1), null);
});

test('--own-core places every process of a stack, also one forked after the first pass', async (t) => {
  const { placeStack, placeOn } = require('../../loadtest/pin');
  const kids = [0, 1, 2].map(() => spawn('sleep', ['60']));
  t.after(() => kids.forEach((k) => k.kill()));
  const [master, worker, late] = kids.map((k) => k.pid);
  let pass = 0;
  // The second read finds a process the first did not (a spare forked meanwhile).
  const stack = { pids: () => (pass++ === 0 ? { nginx: [master, worker], app: [] } : { nginx: [master, worker], app: [late] }) };
  const placed = placeStack(stack, '1');
  assert.deepEqual(placed.sort(), [master, worker, late].sort());
  for (const pid of [master, worker, late]) assert.equal(allowed(pid), '1');
  placeOn([late], '0');
  assert.equal(allowed(late), '0');
  // No such CPU: sched_setaffinity refuses a mask of none the machine has.
  assert.throws(() => placeOn([late], '4095'), new RegExp(`taskset could not place pid ${late} on CPUs 4095: .*run without --own-core`));
});
