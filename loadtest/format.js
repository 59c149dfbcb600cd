'use strict';
// Number formatting shared by the terminal table, the Markdown and HTML writers
// and the demo. Imports nothing.

// 12345.6 -> "12,346"; null -> "–".
function int(n) {
  return n == null || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US');
}

function fixed(n, digits = 1) {
  return n == null || !Number.isFinite(n) ? '–' : n.toFixed(digits);
}

// "median (min–max)".
function spreadText(s, fmt = int) {
  if (!s || s.median == null) return '–';
  return s.n > 1 ? `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})` : fmt(s.median);
}

module.exports = { int, fixed, spreadText };
