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

// What an errno code means, for the error kinds a load test meets most.
const ERROR_MEANING = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  EPIPE: 'broken pipe',
  ETIMEDOUT: 'connect timed out',
  ENOENT: 'no such socket file',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'no free local port',
  EMFILE: 'too many open files (client)',
};

// { ECONNREFUSED: 6800, 'HTTP 502': 3 } -> "6,800 ECONNREFUSED (connection refused), 3 HTTP 502",
// most frequent first.
function kindsText(kinds) {
  const rows = Object.entries(kinds || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  if (!rows.length) return '';
  return rows.map(([k, n]) => `${int(n)} ${k}${ERROR_MEANING[k] ? ` (${ERROR_MEANING[k]})` : ''}`).join(', ');
}

module.exports = { int, fixed, spreadText, kindsText, ERROR_MEANING };
