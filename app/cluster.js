#!/usr/bin/env node
'use strict';
// The tunekit primary: binds the listener, hands it to N workers (app/worker.js),
// respawns them, restarts them one at a time on SIGHUP, drains on SIGTERM/SIGINT,
// and binds its socket path again when the file is deleted under it.
//
//   node app/cluster.js --config /etc/tunekit-app/app.json
//
// `tunekit run` (bin/commands/run.js) runs the same runPrimary() in-process.
// Logs: one JSON object per line on stdout; "event":"ready" once every worker listens.
// Node built-ins only (hosts run this without node_modules).

// First, before anything an old Node lacks: one line and exit 1 on Node < the minimum.
require('./node-version').requireSupportedNode('tunekit-app');

const cluster = require('node:cluster');
const path = require('node:path');
const { normalize, readSettingsFile } = require('./settings');
const { AppError } = require('./errors');
const { makeLogger } = require('./log');
const { preflight } = require('./preflight');
const listeners = require('./listeners');
const lifecycle = require('./lifecycle');
const crashes = require('./crashes');
const rolling = require('./rolling');
const socketWatch = require('./socket-watch');
const shedShare = require('./shed-share');
const metricsServer = require('./metrics-server');
const { createPrimaryCounters, countEvent } = require('./metrics');
const { workerExecArgv } = require('./worker-flags');

const WORKER_ENTRY = path.join(__dirname, 'worker.js');

// The primary's state lives here; each concern is a module of functions over it
// (each module's header lists what it reads and calls). The methods below only
// delegate, so that one module reaches another through the primary and a test
// can run one module against a fake primary
// (test/unit/runner-{lifecycle,rolling,socket-watch}.test.js).
class Primary {
  /**
   * forkWorker(env) starts a worker process (cluster.fork; a test passes a fake),
   * exit(code) leaves the process (see finish()).
   */
  constructor(settings, { log = makeLogger(), exit = (code) => process.exit(code), forkWorker = (env) => cluster.fork(env) } = {}) {
    this.s = settings;
    // Every event the primary logs is also counted (app/metrics.js countEvent).
    this.metricsCounters = createPrimaryCounters();
    this.metricsWaits = new Map(); // `${worker.id}:${seq}` -> resolve(sample): scrapes waiting
    this.log = (level, event, fields) => {
      countEvent(this.metricsCounters, level, event, fields);
      log(level, event, fields);
    };
    this.exit = exit;
    this.forkWorker = forkWorker;
    this.listen = settings.endpoint;
    this.bound = []; // per slot for per-worker, else one entry
    this.unreachable = []; // bindings replaced by a re-bind: held open, never closed or released
    this.checks = new Map(); // socket path -> { lastSeen, reported }: the periodic path check
    this.checkTimer = null;
    this.moveAfterReload = false;
    this.rrSocket = null; // round-robin: the socket Node's cluster bound, as we last saw it
    this.slots = Array.from({ length: settings.workers }, (_, i) => ({ n: i + 1, current: null, timer: null }));
    this.infos = new Map(); // worker.id -> info
    this.spare = null; // a loaded worker waiting to take a dead worker's listener
    this.spareTimer = null;
    // The crash policy (app/crashes.js): whether a worker has stayed up
    // minUptimeMs after it listened, the deaths since one last did (all, and
    // those of workers that died on their own), the errors that killed workers
    // (fingerprint -> counts) and the timer of their summary.
    this.proven = false;
    this.deathsSinceStable = 0;
    this.unstableDeaths = 0;
    this.crashKinds = new Map();
    this.crashTimer = null;
    this.lastError = null;
    this.startTimeouts = 0; // failed starts in a row (lifecycle.js START_TIMEOUT_LIMIT)
    this.state = 'starting';
    this.everReady = false;
    this.reloading = false;
    this.exitCode = 0;
    this.done = null;
    this.shed = null; // the share nginx refuses (app/shed-share.js), with tunekit_app_sustained_after_s
  }

  // ---- listeners (app/listeners.js) -----------------------------------------
  bindListeners() { return listeners.bindListeners(this); }
  workerListening(info) { listeners.workerListening(this, info); }
  publishListener(b) { listeners.publishListener(this, b); }
  releaseListeners() { listeners.releaseListeners(this); }
  bindingOf(slot) { return listeners.bindingOf(this, slot); }

  // ---- workers (app/lifecycle.js) -------------------------------------------
  fork(slot, options) { return lifecycle.fork(this, slot, options); }
  sendListener(info) { lifecycle.sendListener(this, info); }
  takeSpare(slot, options) { return lifecycle.takeSpare(this, slot, options); }
  scheduleSpare(delay) { lifecycle.scheduleSpare(this, delay); }
  pids() { return lifecycle.pids(this); }
  onExit(worker, code, signal) { lifecycle.onExit(this, worker, code, signal); }
  retire(info) { return lifecycle.retire(this, info); }

  // ---- rolling restart (app/rolling.js) -------------------------------------
  reload(options) { return rolling.reload(this, options); }
  moveWorkers() { rolling.moveWorkers(this); }

  // ---- metrics (app/metrics-server.js) --------------------------------------
  onMetricsSample(info, msg) { metricsServer.onSample(this, info, msg); }

  // ---- the socket path, checked (app/socket-watch.js) -----------------------
  watchSockets() { socketWatch.watchSockets(this); }

  // ---- stop -----------------------------------------------------------------

  shutdown(reason, code = 0) {
    if (this.state === 'stopping') {
      // A second Ctrl-C (not the echo of a process-group signal) forces the stop.
      // A repeated SIGTERM is ignored: the drain timeout bounds the stop already.
      if (reason === 'SIGINT' && Date.now() - this.stoppingSince > 1000) {
        this.log('warn', 'drain-forced', { reason: 'second SIGINT' });
        for (const info of this.infos.values()) info.worker.process.kill('SIGKILL');
      }
      return;
    }
    this.stoppingSince = Date.now();
    this.state = 'stopping';
    this.exitCode = code;
    for (const slot of this.slots) clearTimeout(slot.timer);
    clearTimeout(this.spareTimer);
    clearInterval(this.checkTimer);
    crashes.report(this); // the repeats counted since the last crash-summary
    this.log('info', 'drain', { reason, timeout_ms: this.s.drainTimeoutMs, workers: [...this.infos.values()].map((i) => i.pid) });
    // Unlink first (only our own inode): new connects fail at once instead of
    // queueing on a socket nobody will accept on again.
    this.releaseListeners();
    if (this.infos.size === 0) {
      this.finish();
      return;
    }
    for (const info of this.infos.values()) this.retire(info);
  }

  finish() {
    if (this.finished) return;
    this.finished = true;
    this.releaseListeners();
    shedShare.stopShedShare(this);
    this.log('info', 'stop', { code: this.exitCode });
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.removeListener(sig, this.signalHandlers[sig]);
    if (this.done) this.done(this.exitCode);
    // Leave without closing the bound handles (nor those a re-bind replaced): closing
    // one makes libuv unlink its path, and we only unlink after checking the inode
    // (releaseListeners, which checks the current bindings only).
    this.exit(this.exitCode);
  }

  // ---- start ----------------------------------------------------------------

  async run() {
    const { s } = this;
    this.log('info', 'start', {
      name: s.name, listen: s.listen, strategy: s.strategy, workers: s.workers,
      module: s.module || '(example app)', node: process.version,
    });
    try {
      preflight(s);
      // The metrics endpoint first: a taken address refuses the start before any
      // socket is bound or worker forked.
      this.metricsServer = await metricsServer.serveForPrimary(this);
      if (this.metricsServer) this.log('info', 'metrics-listen', { listen: s.metricsEndpoint.text, path: '/metrics' });
      await this.bindListeners();
      this.shed = shedShare.startShedShare(this);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      this.log('error', 'listen-refused', { error: err.message, code: err.code });
      process.stderr.write(`tunekit: ${err.message}\n`);
      this.releaseListeners();
      if (this.metricsServer) this.metricsServer.close();
      return 1;
    }
    const finished = new Promise((resolve) => { this.done = resolve; });
    this.signalHandlers = {
      SIGTERM: () => this.shutdown('SIGTERM', 0),
      SIGINT: () => this.shutdown('SIGINT', 0),
      SIGHUP: () => { this.reload().catch((err) => this.log('error', 'reload-failed', { error: err.message })); },
    };
    for (const [sig, fn] of Object.entries(this.signalHandlers)) process.on(sig, fn);

    if (s.strategy === 'round-robin') cluster.schedulingPolicy = cluster.SCHED_RR;
    cluster.setupPrimary({ exec: WORKER_ENTRY, args: [], execArgv: workerExecArgv(s), silent: false });
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
    for (const slot of this.slots) slot.current = this.fork(slot);
    return finished;
  }
}

/**
 * Run the primary until it stops. Resolves with the exit code (and, by default,
 * exits the process with it: see Primary#finish).
 */
function runPrimary(settings, options) {
  if (!cluster.isPrimary) throw new Error('runPrimary() must run in a cluster primary');
  const primary = new Primary(normalize(settings), options);
  return primary.run();
}

function parseArgs(argv) {
  const i = argv.indexOf('--config');
  if (argv.includes('--help') || argv.includes('-h')) return { help: true };
  if (i === -1 || !argv[i + 1]) return { error: 'usage: node app/cluster.js --config /etc/tunekit-app/app.json' };
  return { config: argv[i + 1] };
}

if (require.main === module) {
  const args = parseArgs(process.argv.slice(2));
  if (args.help || args.error) {
    (args.help ? process.stdout : process.stderr).write('usage: node app/cluster.js --config /etc/tunekit-app/app.json\n');
    process.exit(args.help ? 0 : 2);
  }
  let settings;
  try {
    settings = readSettingsFile(args.config);
  } catch (err) {
    process.stderr.write(`tunekit: ${err.message}\n`);
    process.exit(2);
  }
  runPrimary(settings).then((code) => process.exit(code), (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exit(1);
  });
}

module.exports = { runPrimary, Primary, makeLogger, workerExecArgv, errorText: lifecycle.errorText, WORKER_ENTRY, START_TIMEOUT_MS: lifecycle.START_TIMEOUT_MS };
