'use strict';
// What a run can resolve (loadtest/interval.js): the 95% interval of a ratio from its
// per-round values, the verdict against a bound, and the stopping rule of
// `bench --rounds auto`, all with made-up rounds (no stack, no timing).

const test = require('node:test');
const assert = require('node:assert/strict');
const I = require('../../loadtest/interval');

const near = (a, b, eps = 1e-6) => assert.ok(Math.abs(a - b) < eps, `${a} is not ${b}`);

test('Student t quantiles match the printed tables (two-sided 95%)', () => {
  // t(0.975, df) from any table of Student's t: 12.706, 4.303, 2.776, 2.228, 2.042.
  for (const [df, t] of [[1, 12.706], [2, 4.303], [4, 2.776], [10, 2.228], [30, 2.042]]) near(I.tQuantile(0.975, df), t, 1e-3);
  near(I.tCdf(0, 5), 0.5);
  near(I.tCdf(-2.776, 4), 0.025, 1e-4);
});

test('a known spread gives a known interval: geometric mean ± t × sd / √n on the logs', () => {
  // Logs of e^0.1, e^0.2, e^0.3: mean 0.2, sd 0.1, n 3: half-width 4.3027 × 0.1 / √3 = 0.24841.
  const ci = I.interval([Math.exp(0.1), Math.exp(0.2), Math.exp(0.3)]);
  near(ci.estimate, Math.exp(0.2));
  near(ci.low, Math.exp(0.2 - 0.248414), 1e-5);
  near(ci.high, Math.exp(0.2 + 0.248414), 1e-5);
  assert.deepEqual([ci.n, ci.level], [3, 0.95]);
  near(ci.halfWidth, Math.exp(0.248414) - 1, 1e-5);
  // b/a is a/b inverted, end for end.
  const inv = I.interval([Math.exp(-0.1), Math.exp(-0.2), Math.exp(-0.3)]);
  near(inv.low, 1 / ci.high);
  near(inv.high, 1 / ci.low);
  // More rounds of the same spread narrow it (t and √n both).
  const six = I.interval([0.1, 0.2, 0.3, 0.1, 0.2, 0.3].map(Math.exp));
  assert.ok(six.halfWidth < ci.halfWidth / 2, `${six.halfWidth} vs ${ci.halfWidth}`);
});

test('identical rounds give a zero-width interval; one round gives none; rounds with no value are left out', () => {
  assert.deepEqual(I.interval([1.05, 1.05, 1.05]), { estimate: 1.05, low: 1.05, high: 1.05, level: 0.95, n: 3, halfWidth: 0 });
  assert.deepEqual(I.interval([1.2]), { estimate: 1.2, low: null, high: null, level: 0.95, n: 1, halfWidth: null });
  assert.equal(I.interval([null, 1.1, NaN, 1.1]).n, 2);
  assert.equal(I.interval([]).estimate, null);
  assert.equal(I.intervalText(I.interval([1.05, 1.05, 1.05])), '1.05 (1.05–1.05, 95%)');
  assert.equal(I.intervalText(I.interval([1.2])), '1.20 (one round: no interval)');
});

test('a bound is met only when the whole interval is on its side, not met only when the whole is on the other', () => {
  const ci = (low, high) => ({ estimate: (low + high) / 2, low, high });
  assert.equal(I.judge(ci(0.98, 1.02), { min: 0.97 }), 'met');
  assert.equal(I.judge(ci(0.9, 0.96), { min: 0.97 }), 'not met');
  assert.equal(I.judge(ci(0.95, 1.01), { min: 0.97 }), 'unresolved', 'the median 0.98 meets it, the interval does not');
  assert.equal(I.judge(ci(0.99, 1.03), { max: 1.03 }), 'met');
  assert.equal(I.judge(ci(1.04, 1.1), { max: 1.03 }), 'not met');
  assert.equal(I.judge(ci(1.0, 1.06), { max: 1.03 }), 'unresolved');
  assert.equal(I.judge(I.interval([0.99]), { min: 0.97 }), 'unresolved', 'one round resolves nothing');
});

// The stopping rule: ratios made up per round, asked before each round as the bench does.
const rule = { width: 0.03, minRounds: 3, maxRounds: 10, budgetS: 1000 };
const ask = (perRound, rounds, over = {}) => I.autoStop({
  ...rule, rounds, elapsedS: 60 + rounds * 100, roundS: 100, ...over,
  intervals: Object.entries(perRound).map(([name, xs]) => ({ name, ci: I.interval(xs.slice(0, rounds)) })),
});

test('auto: stops at the width once every interval is within it, not before the least rounds', () => {
  const steady = { 'uds/tcp req/s': [1.17, 1.16, 1.18, 1.17], 'aa/uds req/s': [1.0, 1.01, 0.995, 1.0] };
  assert.equal(ask(steady, 0), null);
  assert.equal(ask(steady, 2), null, 'two rounds that agree are not yet a spread');
  assert.deepEqual(ask(steady, 3), { by: 'width', rounds: 3, unresolved: [] });
  assert.equal(I.autoText({ ...ask(steady, 3), ...rule }), 'rounds auto: stopped after 3 rounds: every interval within ±3.0%');
  // Identical rounds: zero width, done at the least rounds.
  assert.equal(ask({ x: [1, 1, 1] }, 3).by, 'width');
});

test('auto: a ratio that stays wide runs to the round cap, and the cap is said with what was not resolved', () => {
  const wide = { 'uds/tcp req/s': [1.17, 1.16, 1.18, 1.17, 1.17, 1.16, 1.18, 1.17, 1.17, 1.16], 'uds/bare req/s': [0.8, 1.0, 1.2, 0.8, 1.0, 1.2, 0.8, 1.0, 1.2, 0.8] };
  const roomy = { budgetS: 5000 };
  for (let r = 0; r < 10; r++) assert.equal(ask(wide, r, roomy), null, `round ${r}`);
  const stop = ask(wide, 10, roomy);
  assert.equal(stop.by, 'max-rounds');
  assert.deepEqual(stop.unresolved.map((u) => u.name), ['uds/bare req/s']);
  assert.match(I.autoText({ ...stop, ...rule }), /^rounds auto: stopped after 10 rounds: the round cap \(10\) was reached; not resolved to ±3\.0%: uds\/bare req\/s \(±\d+\.\d%\)$/);
});

test('auto: the budget ends it before a round that would not fit, and says so', () => {
  const wide = { 'uds/bare req/s': [0.8, 1.0, 1.2, 0.8, 1.0] };
  // 60 s of starts and 4 rounds of 100 s: a fifth would end at 560 s.
  assert.equal(ask(wide, 4, { budgetS: 560 }), null);
  const stop = ask(wide, 4, { budgetS: 559 });
  assert.equal(stop.by, 'budget');
  assert.match(I.autoText({ ...stop, ...rule, budgetS: 559 }), /the time budget \(559 s\) had no room for another round; not resolved to ±3\.0%: uds\/bare req\/s/);
  // The first round always runs (there is no round time to judge by yet).
  assert.equal(ask(wide, 0, { budgetS: 1 }), null);
  // With one round there is no interval: named so.
  assert.match(I.autoText({ ...ask(wide, 1, { budgetS: 1 }), ...rule, budgetS: 1 }), /uds\/bare req\/s \(no interval\)$/);
});
