'use strict';
// What a run can resolve: the 95% interval of a ratio from the rounds of the same
// run, the verdict that follows it, and the stopping rule of `bench --rounds auto`.
//
// The interval is Student's t over the logarithms of the per-round ratios (each
// round's ratio of the two stacks measured side by side in that round): the centre
// is their geometric mean, the half-width t(0.975, n−1) × sd / √n. Why t on logs,
// not a bootstrap over rounds (docs/benchmarks.md, "What a run can resolve"):
//   - rounds are few (3–10). A percentile bootstrap of n values never reaches past
//     their min and max, and the min–max of n rounds covers the true median only
//     with probability 1 − 2^(1−n) (75% for 3 rounds): it claims 95% and is too
//     narrow exactly when rounds are few. t with n−1 degrees of freedom pays for the
//     spread being estimated from those few rounds (×4.30 with 3 rounds, ×2.26 with 10);
//   - it needs no random numbers, so a report is reproducible from its rounds;
//   - logs make a/b and b/a the same interval inverted, and a ratio cannot go below 0.
// It assumes the rounds are independent and their log-ratios roughly normal; an odd
// round widens it (the sd grows), it never narrows it. Imports nothing.

const LEVEL = 0.95;

// ln Γ(x), Lanczos (g = 7, n = 9), accurate to ~1e-15 for x > 0.
const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
  -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
function lnGamma(x) {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  const z = x - 1;
  let a = LANCZOS[0];
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += LANCZOS[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

// The regularized incomplete beta I_x(a, b), by its continued fraction (modified Lentz).
function betaCf(x, a, b) {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  d = 1 / (Math.abs(d) < tiny ? tiny : d);
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    for (const num of [(m * (b - m) * x) / ((a + m2 - 1) * (a + m2)), -((a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1))]) {
      d = 1 + num * d;
      d = 1 / (Math.abs(d) < tiny ? tiny : d);
      c = 1 + num / c;
      if (Math.abs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (Math.abs(d * c - 1) < 1e-15) break;
  }
  return h;
}
function incompleteBeta(x, a, b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2) ? (front * betaCf(x, a, b)) / a : 1 - (front * betaCf(1 - x, b, a)) / b;
}

/** P(T ≤ t) for Student's t with df degrees of freedom. */
function tCdf(t, df) {
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The t with P(T ≤ t) = p (p > 0.5), by bisection on the CDF. */
function tQuantile(p, df) {
  let lo = 0;
  let hi = 1e4;
  for (let i = 0; i < 200 && hi - lo > 1e-12; i++) {
    const mid = (lo + hi) / 2;
    if (tCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/**
 * The interval of the ratio from its per-round values: { estimate (geometric mean),
 * low, high, level, n, halfWidth (the larger relative distance of an end from the
 * estimate: 0.03 is ±3%) }. Fewer than two finite positive rounds: low, high and
 * halfWidth null (one round says nothing about the spread).
 */
function interval(values, level = LEVEL) {
  const logs = values.filter((v) => typeof v === 'number' && Number.isFinite(v) && v > 0).map(Math.log);
  const n = logs.length;
  if (!n) return { estimate: null, low: null, high: null, level, n, halfWidth: null };
  const mean = logs.reduce((a, x) => a + x, 0) / n;
  if (n < 2) return { estimate: Math.exp(mean), low: null, high: null, level, n, halfWidth: null };
  const sd = Math.sqrt(logs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1));
  const h = tQuantile(1 - (1 - level) / 2, n - 1) * (sd / Math.sqrt(n));
  const estimate = Math.exp(mean);
  const low = Math.exp(mean - h);
  const high = Math.exp(mean + h);
  return { estimate, low, high, level, n, halfWidth: Math.max(high / estimate - 1, 1 - low / estimate) };
}

/**
 * Where a bound lies against an interval: `bound` { min } (the ratio must be at least
 * min) or { max }. 'met': the whole interval is on the right side; 'not met': the whole
 * interval on the wrong side; 'unresolved': the bound is inside it (or there is no
 * interval, one round).
 */
function judge(ci, bound) {
  if (!ci || ci.low == null) return 'unresolved';
  if (bound.min != null) return ci.low >= bound.min ? 'met' : ci.high < bound.min ? 'not met' : 'unresolved';
  return ci.high <= bound.max ? 'met' : ci.low > bound.max ? 'not met' : 'unresolved';
}

/** "1.17 (1.12–1.22, 95%)"; one round: "1.17 (one round: no interval)". */
function intervalText(ci, digits = 2) {
  if (!ci || ci.estimate == null) return '–';
  const f = (x) => x.toFixed(digits);
  if (ci.low == null) return `${f(ci.estimate)} (one round: no interval)`;
  return `${f(ci.estimate)} (${f(ci.low)}–${f(ci.high)}, ${Math.round(ci.level * 100)}%)`;
}

/** A table cell: "1.17 (1.12–1.22)"; one round: "1.17"; nothing: "–". */
function intervalCell(ci, digits = 2) {
  if (!ci || ci.estimate == null) return '–';
  const f = (x) => x.toFixed(digits);
  return ci.low == null ? f(ci.estimate) : `${f(ci.estimate)} (${f(ci.low)}–${f(ci.high)})`;
}

/** Why an interval resolves nothing against `bound` (a number): it holds the bound, or one round gave none. */
function unresolvedText(ci, bound) {
  if (!ci || ci.low == null) return 'not resolved by this run (one round: no interval; run 3 rounds or more)';
  return `not resolved by this run (interval ${ci.low.toFixed(2)}–${ci.high.toFixed(2)} holds ${bound})`;
}

/** A bound's verdict as the reports print it: 'met', 'not met' or 'not resolved by this run (…)'. */
function boundText(ci, bound) {
  const state = judge(ci, bound);
  return state === 'unresolved' ? unresolvedText(ci, bound.min != null ? bound.min : bound.max) : state;
}

/**
 * The stopping rule of `bench --rounds auto`, asked before each round. `s`: { rounds
 * (done so far), elapsedS (since the bench began), roundS (the mean round so far),
 * intervals: [{ name, ci }], width (0.03 for ±3%), minRounds, maxRounds, budgetS }.
 * Returns null (run another round) or
 * { by: 'width' | 'max-rounds' | 'budget', rounds, unresolved: [{ name, halfWidth }] }:
 *   width: every interval is at most ±width (after minRounds);
 *   max-rounds: maxRounds are done;
 *   budget: another round, as long as the mean round so far, would end past budgetS.
 */
function autoStop(s) {
  const unresolved = s.intervals.filter((x) => x.ci.halfWidth == null || x.ci.halfWidth > s.width)
    .map((x) => ({ name: x.name, halfWidth: x.ci.halfWidth }));
  const done = (by) => ({ by, rounds: s.rounds, unresolved });
  if (s.rounds >= s.minRounds && s.intervals.length && !unresolved.length) return done('width');
  if (s.rounds >= s.maxRounds) return done('max-rounds');
  if (s.rounds > 0 && s.elapsedS + s.roundS > s.budgetS) return done('budget');
  return null;
}

/** One line on why `--rounds auto` stopped. */
function autoText(a) {
  const pct = (x) => `±${(x * 100).toFixed(1)}%`;
  const why = {
    width: `every interval within ${pct(a.width)}`,
    'max-rounds': `the round cap (${a.maxRounds}) was reached`,
    budget: `the time budget (${a.budgetS} s) had no room for another round`,
  }[a.by];
  const open = a.unresolved.map((u) => `${u.name} (${u.halfWidth == null ? 'no interval' : pct(u.halfWidth)})`);
  return `rounds auto: stopped after ${a.rounds} rounds: ${why}` +
    (open.length ? `; not resolved to ${pct(a.width)}: ${open.join(', ')}` : '');
}

module.exports = { LEVEL, tCdf, tQuantile, interval, judge, intervalText, intervalCell, unresolvedText, boundText, autoStop, autoText };
