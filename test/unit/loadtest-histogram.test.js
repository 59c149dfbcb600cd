'use strict';
// The kit's latency histogram: fractional milliseconds in, integer
// microseconds out, exact merges across generator processes.

const test = require('node:test');
const assert = require('node:assert/strict');
const H = require('../../loadtest/histogram');

test('a fractional-ms response time is kept to the microsecond', () => {
  const h = H.createHistogram();
  for (let i = 0; i < 100; i++) H.recordMs(h, 0.3456);
  for (let i = 0; i < 100; i++) H.recordMs(h, 2.1234);
  const s = H.summarize(h);
  assert.equal(s.count, 200);
  assert.ok(Math.abs(s.min - 346) <= 1, `min ${s.min}`);
  assert.ok(Math.abs(s.max - 2123) <= 3, `max ${s.max}`);
  // p50 is the low value, p90 the high one: sub-ms digits survive.
  assert.ok(Math.abs(s.p50 - 346) <= 1, `p50 ${s.p50}`);
  assert.notEqual(s.p90 % 1000, 0);
});

test('merging histograms adds counts and keeps every value (what the parent does with N generators)', () => {
  const a = H.createHistogram();
  const b = H.createHistogram();
  for (let i = 1; i <= 1000; i++) H.recordMs(a, i / 1000); // 1..1000 µs
  for (let i = 1001; i <= 2000; i++) H.recordMs(b, i / 1000); // 1001..2000 µs
  const m = H.merge([H.decode(H.encode(a)), H.decode(H.encode(b))]);
  const s = H.summarize(m);
  assert.equal(s.count, 2000);
  assert.equal(s.min, 1);
  assert.ok(Math.abs(s.p50 - 1000) <= 1, `p50 ${s.p50}`);
  assert.ok(Math.abs(s.p99 - 1980) <= 2, `p99 ${s.p99}`);
  assert.ok(s.max >= 2000 && s.max <= 2002, `max ${s.max}`);
  // The curve is ordered and ends at the max.
  for (let i = 1; i < s.curve.length; i++) assert.ok(s.curve[i][1] >= s.curve[i - 1][1]);
  assert.equal(s.curve.at(-1)[1], s.max);
});

test('an empty histogram summarises to nulls, not zeros', () => {
  const s = H.summarize(H.createHistogram());
  assert.equal(s.count, 0);
  assert.equal(s.p50, null);
  assert.deepEqual(s.curve, []);
});

test('values outside the range are clamped, never dropped', () => {
  const h = H.createHistogram();
  H.recordMs(h, 0);
  H.recordMs(h, 1e9);
  H.recordNs(h, 1500n);
  assert.equal(h.totalCount, 3);
});
