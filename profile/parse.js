'use strict';
// Pure parsers for what `tunekit profile` reads: `perf trace -s`'s summary,
// `perf script`'s stacks (folded, flame-graph style), `ss -l`'s listeners and
// /proc/net/netstat's TCP counters. Unit-tested on output recorded on this
// kit's host (test/fixtures/profile/). strace -c's table: loadtest/syscalls.js.

const { servedPath } = require('../lib/proc');

// `perf trace -s` -> [{ comm, tid, rows: [{ name, calls, errors, seconds }] }],
// one entry per thread ("node (11942), 12703 events, 93.4%").
function parsePerfTraceSummary(text) {
  const threads = [];
  let cur = null;
  for (const line of text.split('\n')) {
    const head = /^\s*(.+?) \((\d+)\), \d+ events/.exec(line);
    if (head) {
      cur = { comm: head[1], tid: Number(head[2]), rows: [] };
      threads.push(cur);
      continue;
    }
    const c = line.trim().split(/\s+/);
    // syscall calls errors total(ms) min avg max stddev%
    if (cur && c.length >= 8 && /^[a-z_0-9]+$/.test(c[0]) && /^\d+$/.test(c[1]) && /^\d+$/.test(c[2])) {
      cur.rows.push({ name: c[0], calls: Number(c[1]), errors: Number(c[2]), seconds: Number(c[3]) / 1000 });
    }
  }
  return threads;
}

// One frame of `perf script`: "  7fd3a00086c3 JS:*hashPassword /x/app.js:6:22+0x283 (/tmp/perf-1.map)".
// JavaScript frames keep their name and file:line (V8's "*" optimized / "^"
// baseline / "~" interpreted marker dropped); native ones lose the offset.
function frameName(line) {
  const m = /^\s*[0-9a-f]+ (.*?)(?: \(([^)]*)\))?$/.exec(line);
  if (!m) return null;
  let sym = m[1].replace(/\+0x[0-9a-f]+$/, '');
  const js = /^JS:[*^~+-]?(\S*) (?:file:\/\/)?(\S+?):(\d+)(?::\d+)?$/.exec(sym);
  if (js) return `${js[1] || '(anonymous)'} ${js[2].split('/').pop()}:${js[3]} [js]`;
  if (sym === '[unknown]') sym = `[unknown ${(m[2] || '').split('/').pop()}]`;
  return sym.replace(/;/g, ':');
}

// `perf script` -> { stacks: Map("pid;root;...;leaf" -> samples), samples }.
// `keep(pid)` picks the processes (default all); each stack starts with its
// process "comm pid" so one flame graph can hold nginx's and the app's workers.
function foldPerfScript(text, { keep = () => true, group = (comm, pid) => `${comm} ${pid}` } = {}) {
  const stacks = new Map();
  let samples = 0;
  for (const block of text.split(/\n\s*\n/)) {
    const lines = block.split('\n').filter((l) => l.trim() !== '');
    if (!lines.length) continue;
    const head = /^\s*(\S.*?)\s+(\d+)(?:\/(\d+))?\s+\[?\d*\]?\s*[\d.]+:/.exec(lines[0]);
    if (!head) continue;
    const pid = Number(head[2]);
    if (!keep(pid)) continue;
    const frames = lines.slice(1).map(frameName).filter(Boolean).reverse();
    const key = [group(head[1], pid), ...frames].join(';');
    stacks.set(key, (stacks.get(key) || 0) + 1);
    samples++;
  }
  return { stacks, samples };
}

// Self samples per leaf frame, highest first: [{ name, samples, share, js }].
function topSymbols(stacks, n = 15) {
  const self = new Map();
  let total = 0;
  for (const [key, count] of stacks) {
    const leaf = key.slice(key.lastIndexOf(';') + 1);
    self.set(leaf, (self.get(leaf) || 0) + count);
    total += count;
  }
  return [...self].sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([name, samples]) => ({ name, samples, share: total ? samples / total : 0, js: name.endsWith(' [js]') }));
}

// Where a stack's time goes, by its frames: 'js' (a JavaScript frame is the
// leaf or the nearest named caller of a V8 builtin/IC), 'gc' (V8's heap code),
// 'syscall' (the kernel's syscall entry is on the stack), else 'native'.
function classify(key) {
  const frames = key.split(';');
  if (frames.some((f) => /entry_SYSCALL|do_syscall_64|__x64_sys_/.test(f))) return 'syscall';
  if (frames.some((f) => /v8::internal::Heap::|Scavenger|MarkCompact|ConcurrentMarking|v8::internal::GCTracer/.test(f))) return 'gc';
  const leaf = frames[frames.length - 1];
  if (leaf.endsWith(' [js]') || /^Builtins_|^\[unknown perf-\d+\.map\]/.test(leaf)) return 'js';
  return 'native';
}

// Sample shares per class (js, gc, syscall, native) of the stacks kept.
function shares(stacks) {
  const out = { js: 0, gc: 0, syscall: 0, native: 0 };
  let total = 0;
  for (const [key, count] of stacks) {
    out[classify(key)] += count;
    total += count;
  }
  for (const k of Object.keys(out)) out[k] = total ? out[k] / total : 0;
  return out;
}

// `ss -lxn` / `ss -ltn` -> [{ local, recvQ, sendQ }] of the listening sockets.
// For a listener Recv-Q is the accept queue's length now, Send-Q its limit (the backlog).
function parseSsListen(text) {
  const out = [];
  for (const line of text.split('\n').slice(1)) {
    const c = line.trim().split(/\s+/);
    if (c.length < 5) continue;
    const i = c[0] === 'LISTEN' ? 0 : c[1] === 'LISTEN' ? 1 : -1;
    if (i < 0) continue;
    // A unix listener of the runner is listed by the name it was bound with (lib/proc.js servedPath).
    out.push({ local: servedPath(c[i + 3]), recvQ: Number(c[i + 1]), sendQ: Number(c[i + 2]) });
  }
  return out;
}

// /proc/net/netstat -> { TcpExt: { ListenOverflows, ListenDrops, ... }, ... }.
function parseNetstat(text) {
  const lines = text.split('\n').filter(Boolean);
  const out = {};
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const names = lines[i].split(/\s+/);
    const values = lines[i + 1].split(/\s+/);
    const section = names[0].replace(/:$/, '');
    out[section] = Object.fromEntries(names.slice(1).map((n, k) => [n, Number(values[k + 1])]));
  }
  return out;
}

module.exports = { parsePerfTraceSummary, frameName, foldPerfScript, topSymbols, classify, shares, parseSsListen, parseNetstat };
