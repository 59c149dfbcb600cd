'use strict';
// Rounds, medians and ratios of the bench, and /proc parsing.

const test = require('node:test');
const assert = require('node:assert/strict');
const { median, spread, ratio, roundOrder } = require('../../loadtest/stats');
const cpu = require('../../loadtest/cpu');
const { split } = require('../../loadtest/autocannon');
const { countPids } = require('../../loadtest/autocannon-child');
const { mergeCounts, assess } = require('../../loadtest/workershare');

test('median and spread ignore missing values', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([]), null);
  assert.deepEqual(spread([5, null, 1, 3, NaN]), { median: 3, min: 1, max: 5, n: 3 });
  assert.equal(ratio(1, 0), null);
  assert.equal(ratio(3, 2), 1.5);
});

test('every round runs every scenario once, and the first one changes each round', () => {
  const names = ['stock', 'tcp', 'uds', 'nginx-static', 'direct'];
  const firsts = new Set();
  for (let r = 0; r < names.length; r++) {
    const order = roundOrder(names, r);
    assert.deepEqual([...order].sort(), [...names].sort());
    if (r > 0) assert.notEqual(order[0], roundOrder(names, r - 1)[0]);
    firsts.add(order[0]);
  }
  assert.equal(firsts.size, names.length, 'each scenario leads one round');
  // Two scenarios still alternate.
  assert.notDeepEqual(roundOrder(['a', 'b'], 0), roundOrder(['a', 'b'], 1));
});

test('a block rotates as one: its names stay next to each other in every round, in both directions', () => {
  const units = ['a', ['x', 'y', 'z'], 'b', 'c'];
  const firsts = new Set();
  for (let r = 0; r < 8; r++) {
    const order = roundOrder(units, r);
    assert.deepEqual([...order].sort(), ['a', 'b', 'c', 'x', 'y', 'z']);
    assert.equal(Math.abs(order.indexOf('x') - order.indexOf('y')), 1, order.join(' '));
    assert.equal(Math.abs(order.indexOf('y') - order.indexOf('z')), 1, order.join(' '));
    firsts.add(order[0]);
  }
  // Each unit leads once every four rounds, the block from its far end when reversed.
  assert.deepEqual(firsts, new Set(['a', 'b', 'c', 'z']));
});

test('connections and rates split over generator processes add up', () => {
  assert.deepEqual(split(50, 2), [25, 25]);
  assert.deepEqual(split(7, 3), [3, 2, 2]);
  assert.equal(split(5001, 4).reduce((a, b) => a + b, 0), 5001);
});

test('/proc/PID/stat parsing survives spaces and parentheses in the command name', () => {
  const line = '4242 (nginx: worker (x) ) S 4241 4241 4241 0 -1 4194624 100 0 0 0 123 45 6 7 20 0 1 0 100 0 0';
  assert.deepEqual(cpu.parseStat(line), { utime: 123, stime: 45, cutime: 6, cstime: 7 });
  const before = new Map([[1, 100], [2, 50]]);
  const after = new Map([[1, 160], [3, 20]]);
  // pid 2 vanished, pid 3 appeared during the run.
  assert.deepEqual(cpu.delta(before, after), { us: 80, vanished: 1 });
  const self = cpu.snapshot([process.pid]);
  assert.ok(self.get(process.pid) >= 0);
});

test('worker pids are counted from response bytes, several responses per chunk', () => {
  const byPid = {};
  const chunk = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 35\r\n\r\n{"ok":true,"worker":1,"pid":1234}' +
    'HTTP/1.1 200 OK\r\n\r\n{"ok":true,"worker":2,"pid":99}');
  assert.equal(countPids(chunk, byPid), 2);
  assert.deepEqual(byPid, { 1234: 1, 99: 1 });
  const w = assess(mergeCounts([{ 10: 3 }, { 10: 1, 11: 4 }], 8), [10, 11, 12]);
  assert.equal(w.served, 2);
  assert.equal(w.expected, 3);
  assert.deepEqual(w.missing, ['12']);
  assert.equal(Object.values(w.share).reduce((a, b) => a + b, 0), 1);
});

test("strace -c's table is read into per-syscall counts", () => {
  const { parseStraceC } = require('../../loadtest/syscalls');
  const text = [
    '% time     seconds  usecs/call     calls    errors syscall',
    '------ ----------- ----------- --------- --------- ----------------',
    ' 90.36    1.441429        1541       935        96 futex',
    '  2.09    0.033313           8      3868           writev',
    '------ ----------- ----------- --------- --------- ----------------',
    '100.00    1.474742                  4803        96 total',
  ].join('\n');
  assert.deepEqual(parseStraceC(text), [
    { name: 'futex', calls: 935, errors: 96, seconds: 1.441429 },
    { name: 'writev', calls: 3868, errors: 0, seconds: 0.033313 },
  ]);
});

test('the client-bound warning fires when a generator process nears a full core, not before', () => {
  const { clientWarnings } = require('../../loadtest/measure');
  const busy = clientWarnings('saturation', { processes: 2, perProcessCpuShare: [0.95, 0.7], machineShare: 0.3 }, {});
  assert.equal(busy.length, 1);
  assert.match(busy[0], /^client-bound: a generator process used 95% of a core/);
  assert.deepEqual(clientWarnings('saturation', { processes: 2, perProcessCpuShare: [0.6, 0.7], machineShare: 0.3 }, {}), []);
  const heavy = clientWarnings('saturation', { processes: 2, perProcessCpuShare: [0.8, 0.8], machineShare: 0.8 }, {});
  assert.match(heavy[0], /80% of this machine's \d+ cores/);
  // Paced: judged by the rate kept and the send lag, not by CPU.
  const late = clientWarnings('paced', { perProcessCpuShare: [1] }, { targetRate: 1000, achievedRate: 900, sendLagUs: { p99: 5000 } });
  assert.equal(late.length, 2);
  assert.deepEqual(clientWarnings('paced', { perProcessCpuShare: [1] }, { targetRate: 1000, achievedRate: 999, sendLagUs: { p99: 200 } }), []);
  // A ladder run (3x for 60 s, then 0.5x for 10 s) that sent its whole timetable is judged by its mean, not its first step's rate.
  const ladder = { targetRate: 2547, plannedRate: (2547 * 60 + 425 * 10) / 70, sendLagUs: { p99: 200 } };
  assert.deepEqual(clientWarnings('paced', {}, { ...ladder, achievedRate: 2244 }), []);
  assert.match(clientWarnings('paced', {}, { ...ladder, achievedRate: 2000 })[0], /^the pacer sent 2000 req\/s, short of the 2244 asked: the generator is short of CPU/);
  // Requests that waited for a busy connection: the target, not the generator.
  const full = clientWarnings('paced', {}, { targetRate: 1000, achievedRate: 500, sendLagUs: { p99: 200 },
    requests: { sent: 1000 }, queue: { queued: 400, max: 90, connections: 4 } });
  assert.match(full[0], /did not keep up with 1000 req\/s: 400 requests found all 4 connections busy/);
  assert.match(full[1], /requests queued for a free connection/);
});
