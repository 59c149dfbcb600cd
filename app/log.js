'use strict';
// The runner's log: one line per event. JSON lines (for journald, log shippers
// and the tests) unless a person is reading: on a terminal, or with
// `tunekit run --log text`, a short human-readable line instead.
// The primary picks the format and hands it to its workers in TUNEKIT_LOG.

const FORMATS = ['auto', 'json', 'text'];

/** 'json' or 'text' for the given choice (auto: text on a terminal). */
function formatFor(choice = process.env.TUNEKIT_LOG || 'auto', out = process.stdout) {
  if (choice === 'auto') return out.isTTY ? 'text' : 'json';
  return choice;
}

function textValue(v) {
  if (v && typeof v === 'object') return JSON.stringify(v);
  const s = String(v);
  return /\s/.test(s) ? JSON.stringify(s) : s;
}

/** One line for an event record { ts, level, event, pid, ...fields }. */
function formatLine(format, record) {
  if (format === 'json') return `${JSON.stringify(record)}\n`;
  const { ts, level, event, pid, ...fields } = record;
  const rest = Object.entries(fields)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k}=${textValue(v)}`);
  const lvl = level === 'info' ? '' : ` ${level.toUpperCase()}`;
  return `${ts.slice(11, 23)} [${pid}]${lvl} ${event}${rest.length ? ` ${rest.join(' ')}` : ''}\n`;
}

/** log(level, event, fields) writing to out in the chosen format. */
function makeLogger(out = process.stdout, format = formatFor(undefined, out), base = {}) {
  return (level, event, fields = {}) => {
    out.write(formatLine(format, { ts: new Date().toISOString(), level, event, pid: process.pid, ...base, ...fields }));
  };
}

module.exports = { FORMATS, formatFor, formatLine, makeLogger };
