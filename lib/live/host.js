'use strict';
// What /proc and the kernel say of a process: its limits, its state; a file read
// that yields null when it cannot be read (the layer is then skipped or named).

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { childrenOf } = require('../proc');

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

/**
 * The Node cluster workers among pid's children: those Node's cluster forked
 * (NODE_UNIQUE_ID in their environment). In cluster mode the primary holds the
 * listening socket and hands each connection to a worker (PM2's daemon, "God",
 * is the primary of every cluster-mode app it runs), so `ss` names the primary
 * and the workers that serve are its children.
 */
function clusterWorkers(pid) {
  return childrenOf(pid).filter((k) => (readText(`/proc/${k}/environ`) || '').split('\0').some((kv) => kv.startsWith('NODE_UNIQUE_ID=')));
}

// The Node version of each binary run so far, by its file (nodeVersionOf).
const NODE_VERSIONS = new Map();

/**
 * The Node version a process runs, from its own executable (/proc/PID/exe
 * --version: the binary it started from, even if a package upgrade replaced the
 * file since); null when the executable is not node.
 */
function nodeVersionOf(pid) {
  let exe;
  try {
    exe = fs.readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  } catch {
    return null;
  }
  if (!/^node(js)?(\d+)?$/.test(path.basename(exe))) return null;
  // One run per binary (a sampler asks every few seconds): the file by its inode and change time.
  let key;
  try {
    const st = fs.statSync(`/proc/${pid}/exe`);
    key = `${st.dev}:${st.ino}:${st.ctimeMs}`;
  } catch {
    return null;
  }
  if (!NODE_VERSIONS.has(key)) {
    const r = spawnSync(`/proc/${pid}/exe`, ['--version'], { encoding: 'utf8', timeout: 10000 });
    const m = r.status === 0 && /^v(\d+\.\d+\.\d+)\s*$/.exec(r.stdout);
    NODE_VERSIONS.set(key, m ? m[1] : null);
  }
  const version = NODE_VERSIONS.get(key);
  return version ? { version, from: `${exe} --version of pid ${pid} (/proc/${pid}/exe)` } : null;
}

module.exports = { readText, readInt, nofile, limit, stoppedOf, readFailure, isRoot, clusterWorkers, nodeVersionOf };
