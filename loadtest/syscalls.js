#!/usr/bin/env node
'use strict';
// Syscalls per request of nginx's workers and the app's workers, counted with
// `strace -c -f` during a short, bounded wrk run against each local stack
// (stock, tuned TCP, tuned UDS). Checks the "4 vs 8–10 syscalls per
// request" claim of the article "Your Unix Socket Stack Is Misconfigured. Here's What to Fix and Why."; see docs/benchmarks.md. strace slows the processes down a
// lot: the counts mean something, the speed under strace does not.
//
//   node loadtest/syscalls.js [--duration 3] [--connections 10]

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { parseCommandLine } = require('../lib/args');
const { startStack } = require('../lib/stack');
const { UsageError } = require('../lib/errors');

const STACKS = [['stock', { upstream: 'tcp', profile: 'stock' }], ['tcp', { upstream: 'tcp' }], ['uds', { upstream: 'uds' }]];

// strace -c's table -> [{ name, calls, errors, seconds }] (seconds: the
// "seconds" column, wall-clock time in the call when strace ran with -w).
function parseStraceC(text) {
  return text.split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((c) => c.length >= 5 && /^\d+$/.test(c[3]) && c[c.length - 1] !== 'total')
    .map((c) => ({ name: c[c.length - 1], calls: Number(c[3]), errors: c.length === 6 ? Number(c[4]) : 0, seconds: Number(c[1]) }));
}

// Attach `strace -c -f` (with `wall`: -w, time spent in each call as the
// caller waits, not CPU time) to pids; stop() detaches it and waits for it.
function attach(pids, out, { wall = false, bin = 'strace' } = {}) {
  const child = spawn(bin, ['-c', '-f', ...(wall ? ['-w'] : []), '-o', out, ...pids.flatMap((p) => ['-p', String(p)])], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.on('close', resolve));
  return { child, stop: () => { child.kill('SIGINT'); return exited; } };
}

async function count(name, opts, { duration, connections }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-strace-'));
  const stack = await startStack({ ...opts, workers: 2 });
  try {
    const p = stack.pids();
    const workers = (stack.ready && stack.ready.workers) || p.app.slice(1);
    const tracers = { nginx: attach(p.nginx.slice(1), path.join(dir, 'nginx')), app: attach(workers, path.join(dir, 'app')) };
    await new Promise((r) => setTimeout(r, 1000));
    const out = execFileSync('wrk', ['-t1', `-c${connections}`, `-d${duration}s`, stack.url], { encoding: 'utf8', timeout: (duration + 30) * 1000 });
    const requests = Number(/(\d+) requests in/.exec(out)[1]);
    const rows = {};
    for (const [who, t] of Object.entries(tracers)) {
      await t.stop();
      rows[who] = parseStraceC(fs.readFileSync(path.join(dir, who), 'utf8'));
    }
    return { name, requests, rows };
  } finally {
    await stack.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const USAGE = `usage: node loadtest/syscalls.js [--duration S] [--connections N]

Counts syscalls per request of nginx and the app workers (strace -c, wrk load)
for each upstream kind of the local stack.
  --duration S      seconds of load per stack (default 3)
  --connections N   wrk connections (default 10)`;

function options(argv) {
  const { values } = parseCommandLine({
    args: argv,
    options: { duration: { type: 'string', default: '3' }, connections: { type: 'string', default: '10' }, help: { type: 'boolean', short: 'h' } },
  }, 'node loadtest/syscalls.js --help');
  if (values.help) return null;
  const o = { duration: Number(values.duration), connections: Number(values.connections) };
  if (!(o.duration > 0)) throw new UsageError(`--duration must be a number > 0 (got "${values.duration}")`);
  if (!Number.isInteger(o.connections) || o.connections < 1) throw new UsageError(`--connections must be a whole number >= 1 (got "${values.connections}")`);
  return o;
}

async function main() {
  const o = options(process.argv.slice(2));
  if (!o) {
    console.log(USAGE);
    return;
  }
  for (const [name, opts] of STACKS) {
    const r = await count(name, opts, o);
    for (const [who, rows] of Object.entries(r.rows)) {
      const total = rows.reduce((a, x) => a + x.calls, 0);
      const top = rows.sort((a, b) => b.calls - a.calls).filter((x) => x.calls / r.requests >= 0.05)
        .map((x) => `${x.name} ${(x.calls / r.requests).toFixed(2)}`).join(', ');
      console.log(`${name.padEnd(5)} ${who.padEnd(5)} ${(total / r.requests).toFixed(1).padStart(5)} syscalls/request  (${top})`);
    }
  }
}

if (require.main === module) {
  main().catch((err) => {
    if (err instanceof UsageError) {
      console.error(`syscalls: ${err.message}`);
      process.exitCode = 2;
      return;
    }
    console.error(err.stack || err);
    process.exitCode = 1;
  });
}

module.exports = { parseStraceC, attach };
