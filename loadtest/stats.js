'use strict';
// Small statistics for A/B rounds: median with min and max, and ratios of
// medians. Rounds are few (3-7), so the median, not the mean, is the centre.

function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// { median, min, max, n } of the finite numbers in `values`.
function spread(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (!v.length) return { median: null, min: null, max: null, n: 0 };
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
}

function ratio(a, b) {
  if (typeof a !== 'number' || typeof b !== 'number' || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  return a / b;
}

// Round orders: round r starts with scenario r (mod n), so each scenario
// leads once every n rounds, and odd rounds run the list backwards, so the
// neighbours change too (with two scenarios: AB, BA, AB, …). An entry may be a
// list of names (a block): it rotates as one, so its names stay next to each other
// in every round (reversed in odd rounds) and a ratio between two of them is taken
// between runs seconds apart, not minutes.
function roundOrder(names, round) {
  const n = names.length;
  const shift = round % 2 ? round + 1 : round;
  const rotated = names.flatMap((_, i) => names[(i + shift) % n]);
  return round % 2 ? rotated.reverse() : rotated;
}

module.exports = { median, spread, ratio, roundOrder };
