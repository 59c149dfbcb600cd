'use strict';
// The bench's `bare` ceiling: a plain node:cluster program serving the app the
// runner would serve, with none of the runner on the request path (no metrics
// meter, no drain bookkeeping, no release header, no open-files watch), so
// `uds/bare` is what the runner itself costs per request.
//
//   node loadtest/bare-cluster.js --config DIR/etc/tunekit-app/app.json
//
// A program, not a module of the harness: lib/stack.js starts it in place of
// `tunekit run` (startStack's appProgram) on the app.json it rendered, as it
// starts the runner, and reads the same "ready" line. From app.json it takes
// what the runner's workers take: the unix: listen path, the worker count, the
// module (loaded through app/load.js, the runner's own loader: the example app
// when none is named, so the same handler), its workers' Node flags (app/worker-flags.js,
// the runner's: the memory reducer, the semi-space bound), the backlog and the three server
// timeouts — set once per server, no work per request, and the same values keep
// Node's idle timeout above nginx's upstream keepalive_timeout (the keep-alive
// 502 race). Node built-ins only.
//
// Listening: cluster.SCHED_NONE, so the primary binds the path and every worker
// accepts from the one queue, as the runner's default `shared` strategy does
// (app/README.md "Strategies"). When the last worker leaves, the primary closes
// the handle and libuv unlinks the path it bound. SIGTERM/SIGINT: the workers
// disconnect (stop accepting, close idle keep-alive connections, finish busy
// ones), any still there after drainTimeoutMs are killed by pid, then the
// primary exits 0 with the socket gone. A worker that dies otherwise is not
// replaced: the primary stops the rest and exits 1 (a ceiling that lost a worker
// measures nothing).

const cluster = require('node:cluster');
const fs = require('node:fs');
const path = require('node:path');

function line(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), level: event === 'error' ? 'error' : 'info', event, pid: process.pid, ...fields })}\n`);
}

function readConfig(argv) {
  const i = argv.indexOf('--config');
  if (i < 0 || !argv[i + 1]) throw new Error('usage: node loadtest/bare-cluster.js --config APP_JSON');
  const file = argv[i + 1];
  const s = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (typeof s.listen !== 'string' || !s.listen.startsWith('unix:')) {
    throw new Error(`${file}: listen is ${s.listen}; the bare cluster serves a unix: socket (tunekit_upstream_kind=uds)`);
  }
  return { ...s, path: s.listen.slice(5), file };
}

// ---- the workers ------------------------------------------------------------------

async function worker(s) {
  // The runner's loader, by path: this file is a program of its own, like the runner.
  const { loadApp } = require(path.join(__dirname, '..', 'app', 'load.js'));
  process.env.TUNEKIT_WORKERS = String(s.workers);
  const { server } = await loadApp(s.module);
  server.keepAliveTimeout = s.keepAliveTimeoutMs;
  server.headersTimeout = s.headersTimeoutMs;
  server.requestTimeout = s.requestTimeoutMs;
  server.listen({ path: s.path, backlog: s.backlog });
}

// ---- the primary ------------------------------------------------------------------

function primary(s) {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  let stopping = false;
  let listening = 0;
  let code = 0;
  const live = new Set();
  const stop = (exitCode) => {
    if (stopping) return;
    stopping = true;
    code = exitCode;
    for (const w of live) if (w.isConnected()) w.disconnect();
    setTimeout(() => {
      for (const w of live) w.process.kill('SIGKILL');
    }, s.drainTimeoutMs).unref();
  };
  cluster.on('listening', () => {
    listening += 1;
    if (listening === s.workers) {
      line('ready', { listen: s.listen, strategy: 'bare (node:cluster, SCHED_NONE)', workers: [...live].map((w) => w.process.pid) });
    }
  });
  cluster.on('exit', (w, exitCode, signal) => {
    live.delete(w);
    if (!stopping) {
      line('error', { message: `worker ${w.process.pid} exited (code ${exitCode}, signal ${signal}); the bare cluster stops` });
      stop(1);
    }
    if (live.size) return;
    // The last worker is gone: cluster's handle closed and libuv unlinked the path.
    // A path still there is not one this process bound: leave it.
    const left = fs.existsSync(s.path);
    line('stopped', { socketRemoved: !left });
    process.exit(code || (left ? 1 : 0));
  });
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
  // The runner's flags for its workers from the same app.json (the perf map, the
  // semi-space bound, the memory reducer off): V8 run the same way on both sides.
  const { workerExecArgv } = require(path.join(__dirname, '..', 'app', 'worker-flags.js'));
  cluster.setupPrimary({ execArgv: workerExecArgv(s) });
  for (let i = 0; i < s.workers; i++) live.add(cluster.fork());
}

function main() {
  let s;
  try {
    s = readConfig(process.argv);
  } catch (err) {
    line('error', { message: err.message });
    process.exit(2);
  }
  if (cluster.isPrimary) {
    primary(s);
    return;
  }
  worker(s).catch((err) => {
    line('error', { message: `worker: ${err.message}` });
    process.exit(1);
  });
}

main();
