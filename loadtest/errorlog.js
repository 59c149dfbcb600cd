'use strict';
// Lines nginx adds to its error.log during a run: note the size before,
// read what was appended after. A healthy run adds none; a UDS accept queue
// overflow shows up here as "(11: Resource temporarily unavailable)" and a
// keep-alive race as "upstream prematurely closed connection".

const fs = require('node:fs');

const SAMPLE_LINES = 5;

function mark(file) {
  if (!file) return null;
  try {
    return { file, offset: fs.statSync(file).size };
  } catch {
    return { file, offset: 0 };
  }
}

function linesSince(m) {
  if (!m) return null;
  let text = '';
  try {
    const fd = fs.openSync(m.file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      // A rotated or truncated log starts over from 0.
      const from = size >= m.offset ? m.offset : 0;
      const buf = Buffer.alloc(Math.min(size - from, 4 * 1024 * 1024));
      fs.readSync(fd, buf, 0, buf.length, from);
      text = buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch (err) {
    // lines: null, not 0: an unread log proves nothing.
    return { file: m.file, lines: null, sample: [], unreadable: err.code || err.message };
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return { file: m.file, lines: lines.length, sample: lines.slice(0, SAMPLE_LINES) };
}

module.exports = { mark, linesSince };
