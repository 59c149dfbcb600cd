'use strict';
// The bench's scenario table (loadtest/scenarios.js) as the bench reads it: the
// default list, which stacks start, the ratio rows and the targets they carry.
// No stack starts here (test/integration/loadtest-bench.test.js runs them).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { SCENARIOS, DEFAULT_SCENARIOS, RATIOS, BARE_PROGRAM, COST_TARGET, stacksFor, ratios, roundUnits } = require('../../loadtest/scenarios');
const { roundOrder } = require('../../loadtest/stats');
const { targetLines } = require('../../loadtest/table');
const { BENCH } = require('../../bin/load-options');

test('the default bench compares metrics on and off, and the runner with a bare cluster, in the same rounds', () => {
  assert.deepEqual(DEFAULT_SCENARIOS, Object.keys(SCENARIOS).filter((n) => n !== 'try' && n !== 'aa'),
    'every scenario but try (it needs --try FILE) and aa (--aa)');
  for (const name of ['uds', 'metrics-off', 'bare']) assert.ok(DEFAULT_SCENARIOS.includes(name), name);
  assert.equal(BENCH.scenarios.dflt, DEFAULT_SCENARIOS.join(','), '`npm run bench` runs the default list');
});

test('bare and metrics-off: the uds stack without the meter, bare without the runner', () => {
  const uds = SCENARIOS.uds.stack;
  for (const name of ['metrics-off', 'bare']) {
    const s = SCENARIOS[name].stack;
    assert.equal(s.upstream, uds.upstream, `${name}: the same upstream as uds`);
    assert.equal(s.profile, uds.profile, `${name}: the same tuned nginx as uds`);
    assert.deepEqual(s.set, ['tunekit_metrics=false']);
  }
  assert.equal(SCENARIOS.uds.stack.appProgram, undefined, 'uds runs the runner');
  assert.equal(SCENARIOS.bare.stack.appProgram, BARE_PROGRAM);
  assert.ok(fs.statSync(BARE_PROGRAM).isFile());
  // Each gets a stack of its own, started once, whatever the driver.
  assert.deepEqual(stacksFor(['uds', 'metrics-off', 'bare', 'direct'], 'wrk'), ['uds', 'metrics-off', 'bare', 'tcp']);
  assert.deepEqual(stacksFor(['uds', 'bare', 'direct'], 'autocannon'), ['uds', 'bare']);
});

test('try: a stack of its own whose shape the --try file gives, compared with uds', () => {
  assert.deepEqual(SCENARIOS.try.stack, { profile: 'tuned', withTry: true }, 'no upstream or workers of its own: the file\'s');
  assert.deepEqual(stacksFor(['uds', 'try'], 'wrk'), ['uds', 'try']);
  assert.deepEqual(RATIOS.filter(([a]) => a === 'try').map(([a, b]) => `${a}/${b}`), ['try/uds']);
});

test('the cost ratios read uds over the stack without: req/s >= 0.97, CPU per request <= 1.03', () => {
  const rows = RATIOS.filter(([a]) => a === 'uds').map(([a, b, t]) => [`${a}/${b}`, t]);
  assert.deepEqual(rows.map(([n]) => n), ['uds/stock', 'uds/tcp', 'uds/direct', 'uds/metrics-off', 'uds/bare']);
  assert.deepEqual(Object.fromEntries(rows.filter(([, t]) => t)), { 'uds/metrics-off': COST_TARGET, 'uds/bare': COST_TARGET });
  assert.deepEqual(COST_TARGET, { reqPerSec: { min: 0.97 }, cpuUsPerReq: { max: 1.03 } });
});

test('aa: a stack of its own with exactly the uds values, compared with uds (the A/A pair)', () => {
  assert.deepEqual(SCENARIOS.aa.stack, SCENARIOS.uds.stack);
  assert.deepEqual(stacksFor(['uds', 'aa'], 'wrk'), ['uds', 'aa'], 'two stacks, not one measured twice');
  assert.deepEqual(RATIOS.filter(([a]) => a === 'aa').map(([a, b]) => `${a}/${b}`), ['aa/uds']);
});

test('ratios(): uds/bare per round, its target carried to the report and judged on the interval', () => {
  const run = (round, scenario, reqPerSec, cpuUsPerReq) => ({
    round, scenario, mode: 'saturation', reqPerSec, server: { cpuUsPerReq }, latencyUs: { p50: 100, p99: 1000 },
  });
  const results = [
    run(1, 'uds', 9600, 41.2), run(1, 'bare', 10000, 40),
    run(2, 'bare', 10000, 40), run(2, 'uds', 9900, 40.4),
    run(3, 'uds', 10100, 40.8), run(3, 'bare', 10000, 40),
  ];
  const [x] = ratios(results, ['uds', 'bare']);
  assert.equal(x.name, 'uds/bare');
  assert.equal(x.reqPerSec.n, 3);
  assert.equal(x.reqPerSec.median, 0.99);
  assert.equal(x.reqPerSec.min, 0.96);
  assert.ok(Math.abs(x.cpuUsPerReq.median - 1.02) < 1e-9 && Math.abs(x.cpuUsPerReq.max - 1.03) < 1e-9);
  assert.deepEqual(x.target, COST_TARGET);
  // The median meets both targets, but three rounds this far apart cannot tell: the
  // intervals hold the bounds (once this read "met by the median, not every round").
  assert.deepEqual(targetLines(x), [
    'uds/bare req/s 0.99 (0.93–1.05, 95%) (target ≥ 0.97: not resolved by this run (interval 0.93–1.05 holds 0.97))',
    'uds/bare server µs/req 1.02 (1.00–1.05, 95%) (target ≤ 1.03: not resolved by this run (interval 1.00–1.05 holds 1.03))',
  ]);
  // The whole interval below 0.97: not met.
  const [y] = ratios(results.map((r) => (r.scenario === 'uds' ? { ...r, reqPerSec: r.reqPerSec * 0.9 } : r)), ['uds', 'bare']);
  assert.equal(targetLines(y)[0], 'uds/bare req/s 0.89 (0.83–0.95, 95%) (target ≥ 0.97: not met)');
  // Steady rounds whose whole interval is on the right side: met.
  const steady = results.map((r) => (r.scenario === 'uds' ? { ...r, reqPerSec: 10000 + r.round, server: { cpuUsPerReq: 40 + r.round / 100 } } : r));
  assert.deepEqual(targetLines(ratios(steady, ['uds', 'bare'])[0]), [
    'uds/bare req/s 1.00 (1.00–1.00, 95%) (target ≥ 0.97: met)',
    'uds/bare server µs/req 1.00 (1.00–1.00, 95%) (target ≤ 1.03: met)',
  ]);
});

test('every round runs the A/A pair and the runner-cost pairs next to uds: aa and bare one slot away, metrics-off two, try one', () => {
  const gap = (order, a, b) => Math.abs(order.indexOf(a) - order.indexOf(b));
  for (const names of [[...DEFAULT_SCENARIOS, 'aa'], [...DEFAULT_SCENARIOS, 'try', 'aa'], [...DEFAULT_SCENARIOS]]) {
    for (let r = 0; r < 2 * names.length; r++) {
      const order = roundOrder(roundUnits(names), r);
      assert.deepEqual([...order].sort(), [...names].sort(), 'every scenario once a round');
      if (names.includes('aa')) assert.equal(gap(order, 'aa', 'uds'), 1, order.join(' '));
      if (names.includes('try')) assert.equal(gap(order, 'try', 'uds'), 1, order.join(' '));
      assert.ok(gap(order, 'bare', 'uds') <= 2 && gap(order, 'metrics-off', 'uds') <= 2, order.join(' '));
    }
  }
  // Without uds there is no block: the plain rotation.
  assert.deepEqual(roundUnits(['stock', 'tcp']), ['stock', 'tcp']);
});
