'use strict';
// Directories made for paths a user gives (render --out, --json FILE, ...).
// Node's fs.mkdirSync(dir, { recursive: true }) never returns for a path under
// a file system that answers ENOENT for a child it cannot hold (procfs, sysfs):
// it reads ENOENT as "parent missing", finds the parent, and retries for ever.
// Seen here with Node 20 on `render --out /proc/x/y`; reported for Node 18 and 22
// in https://github.com/Kewton/CommandMate/issues/1774. makeDirs walks down from
// the deepest directory that exists and stops at the first failure, naming it.

const fs = require('node:fs');
const path = require('node:path');
const { KitError } = require('./errors');

/**
 * mkdir -p that always ends: every missing directory of `dir`, top down.
 * @param {string} dir
 * @param {object} [opts]
 * @param {number} [opts.mode]  mode of the directories it creates
 * @param {string} [opts.what]  how the user named it, for the message ("--out /x")
 */
function makeDirs(dir, { mode, what } = {}) {
  const missing = [];
  let d = path.resolve(dir);
  for (;;) {
    let st = null;
    try {
      st = fs.statSync(d);
    } catch (err) {
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw cannotCreate(dir, d, err, what);
    }
    if (st) {
      if (!st.isDirectory()) throw new KitError(`${what || dir}: ${d} is not a directory; choose a path under a directory`);
      break;
    }
    missing.unshift(d);
    const parent = path.dirname(d);
    if (parent === d) break;
    d = parent;
  }
  for (const m of missing) {
    try {
      fs.mkdirSync(m, mode === undefined ? undefined : { mode });
    } catch (err) {
      if (err.code !== 'EEXIST') throw cannotCreate(dir, m, err, what);
    }
  }
}

function cannotCreate(dir, at, err, what) {
  const why = err.code === 'ENOENT' ? 'its file system does not allow it' : reason(err);
  return new KitError(`${what || dir}: cannot create ${at} (${why}); choose a path where you can write`);
}

const REASONS = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'a directory, not a file',
  ENOTDIR: 'a part of the path is not a directory',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
};

/** A file-system error in words, with its code: "no such file (ENOENT)". */
function reason(err) {
  return REASONS[err.code] ? `${REASONS[err.code]} (${err.code})` : err.code || err.message;
}

module.exports = { makeDirs, reason };
