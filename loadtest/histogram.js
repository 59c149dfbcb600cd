'use strict';
// Latency histograms in integer microseconds (hdr-histogram-js), recorded per
// response by the kit itself. autocannon's own histogram has a lowest
// discernible value of 1 ms, too coarse to tell UDS from TCP; its per-response
// event carries the time as fractional milliseconds from process.hrtime, which
// this module turns into microseconds. HDR histograms merge exactly, so
// several generator processes can each record and the parent adds them up.

const hdr = require('hdr-histogram-js');

// 1 µs .. 120 s at 3 significant digits: every reported value is within 0.1%.
const LOWEST_US = 1;
const HIGHEST_US = 120e6;
const SIGNIFICANT_DIGITS = 3;

// The percentiles every report shows, and the finer set the HTML curve draws.
const PERCENTILES = [50, 90, 99, 99.9];
const CURVE_PERCENTILES = [0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99, 99.999, 100];

function createHistogram() {
  return hdr.build({
    lowestDiscernibleValue: LOWEST_US,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: SIGNIFICANT_DIGITS,
    useWebAssembly: false,
  });
}

function clampUs(us) {
  if (!(us >= LOWEST_US)) return LOWEST_US;
  return us > HIGHEST_US ? HIGHEST_US : Math.round(us);
}

// Record one response time given in (fractional) milliseconds.
function recordMs(histogram, ms) {
  histogram.recordValue(clampUs(ms * 1000));
}

// Record one response time given in nanoseconds (a bigint from hrtime.bigint()).
function recordNs(histogram, ns) {
  histogram.recordValue(clampUs(Number(ns) / 1000));
}

function encode(histogram) {
  return hdr.encodeIntoCompressedBase64(histogram);
}

function decode(text) {
  const decoded = hdr.decodeFromCompressedBase64(text, 32, false);
  // Decoded histograms keep the encoder's range; copy into our standard shape.
  const h = createHistogram();
  h.add(decoded);
  return h;
}

// A new histogram holding every value of the given ones (exact, not averaged).
function merge(histograms) {
  const out = createHistogram();
  for (const h of histograms) out.add(h);
  return out;
}

// The summary's field of a percentile: 50 -> p50, 99.9 -> p999.
function percentileKey(p) {
  return `p${String(p).replace('.', '')}`;
}

// Plain numbers (µs) for reports, one field per PERCENTILES entry; null fields
// when nothing was recorded.
function summarize(histogram) {
  const count = histogram.totalCount;
  if (!count) {
    return { count: 0, min: null, mean: null, ...Object.fromEntries(PERCENTILES.map((p) => [percentileKey(p), null])), max: null, curve: [] };
  }
  const at = (p) => histogram.getValueAtPercentile(p);
  return {
    count,
    min: histogram.minNonZeroValue,
    mean: Math.round(histogram.mean * 10) / 10,
    ...Object.fromEntries(PERCENTILES.map((p) => [percentileKey(p), at(p)])),
    max: histogram.maxValue,
    curve: CURVE_PERCENTILES.map((p) => [p, p === 100 ? histogram.maxValue : at(p)]),
  };
}

module.exports = {
  PERCENTILES,
  CURVE_PERCENTILES,
  createHistogram,
  recordMs,
  recordNs,
  encode,
  decode,
  merge,
  summarize,
};
