'use strict';
// What /proc and the kernel say of a process: its limits, its state; a file read
// that yields null when it cannot be read (the layer is then skipped or named).

const fs = require('node:fs');

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function readInt(file) {
  const t = readText(file);
  return t == null ? null : Number(t.trim());
}

/** Soft "Max open files" of a process, or null. */
function nofile(pid) {
  const l = limit(pid, 'Max open files');
  return l ? l.soft : null;
}

/** Processes among pids stopped by a signal (state T in /proc/PID/stat: SIGSTOP, a debugger). */
function stoppedOf(pids) {
  return [...new Set(pids)].filter((pid) => {
    const t = readText(`/proc/${pid}/stat`);
    return t && /^\S+ \(.*\) [tT] /s.test(t);
  });
}

/** The cause of a failed read (the read check's fix says what to do about it). */
function readFailure(file, err) {
  if (err.code === 'ENOENT') return `${file} does not exist`;
  if (err.code === 'EACCES') return `${file}: permission denied (EACCES)${isRoot() ? ' even as root' : ''}`;
  return `${file}: ${err.code || err.message}`;
}

const isRoot = () => !process.geteuid || process.geteuid() === 0;

/** One field of /proc/PID/limits ("Max open files"): { soft, hard } (Infinity for unlimited), or null. */
function limit(pid, field) {
  const t = readText(`/proc/${pid}/limits`);
  const esc = field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = t && new RegExp(`^${esc}\\s+(\\d+|unlimited)\\s+(\\d+|unlimited)`, 'm').exec(t);
  if (!m) return null;
  const n = (x) => (x === 'unlimited' ? Infinity : Number(x));
  return { soft: n(m[1]), hard: n(m[2]) };
}

module.exports = { readText, readInt, nofile, limit, stoppedOf, readFailure, isRoot };
