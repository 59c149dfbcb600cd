'use strict';
// The primary's workers, one life at a time: fork (a slot's worker or the warm
// spare), the IPC from each (loaded, listening, its fatal error), the first
// `ready`, a death (spare promoted, respawn with backoff, crash loop, a module
// that cannot load; what a death means: app/crashes.js) and retiring (drain,
// then SIGKILL after the grace).
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.s, p.log, p.listen, p.state ('starting' | 'running' | 'stopping'), p.everReady,
//   p.slots ([{ n, current, timer }]), p.infos (worker.id -> info), p.spare,
//   p.spareTimer, p.lastError, p.startTimeouts (failed starts in a row), p.exitCode,
//   and through app/crashes.js p.proven, p.deathsSinceStable, p.unstableDeaths, p.crashKinds, p.crashTimer;
// and calls p.forkWorker(env) (cluster.fork), p.onMetricsSample, p.fork, p.sendListener, p.takeSpare,
// p.scheduleSpare, p.bindingOf, p.workerListening, p.watchSockets,
// p.pids, p.shutdown, p.finish.
// A worker is what cluster.fork returns: id, process.pid, process.kill(sig),
// send(msg, handle, cb), isConnected(), on('message').

const { socketPaths } = require('./settings');
const { MSG } = require('./ipc');
const { formatFor } = require('./log');
const crashes = require('./crashes');
const shedShare = require('./shed-share');

// A worker must report listening within settings.startTimeoutMs, or it is killed
// as a failed start. This many failed starts in a row, with no worker started in
// between, and the runner stops (exit 1): every new worker loads the same module.
const START_TIMEOUT_LIMIT = 3;

/** Why a worker did not start in time and what to do; `loaded`: it had asked for a listener. */
function startTimeoutAdvice(ms, loaded) {
  const name = `tunekit_app_start_timeout_ms (${ms} ms)`;
  if (loaded) {
    return {
      reason: `the worker loaded the app module but did not listen within ${name}`,
      fix: 'look for an error in the worker\'s log before this line; if the host is only slow, raise tunekit_app_start_timeout_ms',
    };
  }
  return {
    reason: `the app module (its top-level await or its factory) did not resolve within ${name}`,
    fix: 'a factory must resolve to a handler or server; check for an await that never settles, e.g. a database connect; if it is only slow, raise tunekit_app_start_timeout_ms',
  };
}

function errorText(error) {
  if (!error) return 'no error was reported (the worker was killed or exited on its own)';
  const head = error.name ? `${error.name}: ${error.message}` : error.message;
  return error.at ? `${head} (at ${error.at})` : head;
}

function fork(p, slot, { replacement = false, spare = false } = {}) {
  const worker = p.forkWorker({
    TUNEKIT_PRIMARY_PID: String(process.pid),
    TUNEKIT_LOG: formatFor(),
    TUNEKIT_SETTINGS: JSON.stringify(p.s),
    TUNEKIT_SLOT: String(slot ? slot.n : 0),
    TUNEKIT_WORKERS: String(p.s.workers),
  });
  const info = {
    worker, slot, id: worker.id, pid: worker.process.pid, state: spare ? 'spare' : 'starting', replacement, error: null, waiting: false,
  };
  info.ready = new Promise((resolve) => { info.resolveReady = resolve; });
  info.exited = new Promise((resolve) => { info.resolveExit = resolve; });
  info.startTimer = setTimeout(() => {
    if (info.state !== 'starting') return;
    info.timedOut = true;
    p.startTimeouts += 1;
    p.log('error', 'worker-start-timeout', {
      worker: info.id, worker_pid: info.pid, ms: p.s.startTimeoutMs, in_a_row: p.startTimeouts,
      ...startTimeoutAdvice(p.s.startTimeoutMs, info.waiting),
    });
    worker.process.kill('SIGKILL');
  }, p.s.startTimeoutMs);
  info.startTimer.unref();
  p.infos.set(worker.id, info);
  worker.on('message', (msg) => {
    try {
      onMessage(p, info, msg);
    } catch (err) {
      p.log('error', 'primary-error', { error: err.stack || String(err), worker: info.id });
    }
  });
  p.log('info', spare ? 'spare-start' : 'worker-start', { worker: info.id, worker_pid: info.pid, slot: slot ? slot.n : null });
  return info;
}

function onMessage(p, info, msg) {
  if (!msg || typeof msg !== 'object') return;
  if (msg.tunekit === MSG.METRICS_SAMPLE) {
    p.onMetricsSample(info, msg);
    return;
  }
  if (msg.tunekit === MSG.HOLD) {
    shedShare.onReport(p, info, msg);
    return;
  }
  if (msg.tunekit === MSG.FATAL) {
    info.error = msg.error;
    info.open = msg.open || 0;
    p.lastError = msg.error;
    return;
  }
  if (msg.tunekit === MSG.WANT_LISTEN) {
    if (p.state === 'stopping' || info.state === 'retiring') return; // it has been told to drain
    info.waiting = true;
    if (info.state === 'spare') {
      // Loaded and waiting; it gets a listener when a worker dies.
      clearTimeout(info.startTimer);
      p.log('info', 'spare-ready', { worker: info.id, worker_pid: info.pid });
      return;
    }
    p.sendListener(info);
    return;
  }
  if (msg.tunekit === MSG.ACCEPT_MORE_WANTED) {
    sendAcceptMore(p, info, msg.n);
    return;
  }
  if (msg.tunekit === MSG.LISTENING) {
    clearTimeout(info.startTimer);
    p.startTimeouts = 0;
    crashes.onListening(p, info);
    if (info.state === 'starting') info.state = 'ready';
    try {
      p.workerListening(info);
    } catch (err) {
      p.log('error', 'socket-group', { error: err.message });
    }
    p.log('info', 'worker-ready', { worker: info.id, worker_pid: info.pid, slot: info.slot.n, module: msg.source });
    if (!info.replacement) info.slot.current = info;
    info.resolveReady(true);
    maybeReady(p);
  }
}

function sendListener(p, info) {
  if (!info.slot) return;
  const b = p.bindingOf(info.slot);
  info.listener = b;
  const send = (m, handle) => info.worker.send(m, handle, () => {});
  if (!b) {
    send({ tunekit: MSG.LISTEN, via: 'cluster' });
    return;
  }
  send({ tunekit: MSG.LISTEN, via: 'handle', address: b.path }, b.handle);
  sendAcceptMore(p, info, p.s.acceptsPerTurn - 1);
}

/**
 * n more descriptors of the worker's listening socket: each send of a handle is a
 * new descriptor in the worker (SCM_RIGHTS), and libuv accepts one connection per
 * descriptor per turn (tunekit_app_accepts_per_turn; the worker opens them while
 * its loop turns slowly, app/accepts.js). Never more than the setting allows, and
 * none to a worker that is leaving or listens through Node's cluster.
 */
function sendAcceptMore(p, info, n) {
  const b = info.listener;
  if (!b || !b.handle || info.state === 'retiring' || p.state === 'stopping' || !info.worker.isConnected()) return;
  const count = Math.min(Number.isInteger(n) ? n : 0, p.s.acceptsPerTurn - 1);
  for (let k = 0; k < count; k++) info.worker.send({ tunekit: MSG.ACCEPT_MORE }, b.handle, () => {});
}

/**
 * Give a slot to the waiting spare, if there is one: a dead worker's slot, or
 * (replacement) a slot whose worker a rolling restart replaces.
 */
function takeSpare(p, slot, { replacement = false } = {}) {
  const spare = p.spare;
  if (!spare || !spare.waiting || spare.state !== 'spare') return null;
  p.spare = null;
  spare.state = 'starting';
  spare.slot = slot;
  spare.replacement = replacement;
  if (!replacement) slot.current = spare;
  p.log('info', 'spare-promoted', { worker: spare.id, worker_pid: spare.pid, slot: slot.n });
  p.sendListener(spare);
  return spare;
}

/** Keep one loaded spare (settings.spareWorkers > 0), forked after `delay`. */
function scheduleSpare(p, delay) {
  clearTimeout(p.spareTimer);
  p.spareTimer = null;
  if (p.s.spareWorkers < 1 || p.state === 'stopping' || p.spare) return;
  p.spareTimer = setTimeout(() => {
    p.spareTimer = null;
    if (p.state === 'stopping' || p.spare) return;
    p.spare = p.fork(null, { spare: true });
  }, delay);
}

function maybeReady(p) {
  if (p.everReady || p.state !== 'starting') return;
  if (!p.slots.every((slot) => slot.current && slot.current.state === 'ready')) return;
  p.everReady = true;
  p.state = 'running';
  const fields = { listen: p.listen.text, strategy: p.s.strategy, workers: pids(p) };
  if (p.s.strategy === 'per-worker') fields.sockets = socketPaths(p.s);
  if (p.s.metrics) fields.metrics = p.s.metricsEndpoint.text;
  p.log('info', 'ready', fields);
  p.scheduleSpare(0);
  p.watchSockets();
}

function pids(p) {
  return p.slots.map((slot) => (slot.current ? slot.current.pid : null)).filter(Boolean);
}

function onExit(p, worker, code, signal) {
  const info = p.infos.get(worker.id);
  if (!info) return;
  p.infos.delete(worker.id);
  if (p.shed) p.shed.reports.delete(info.id);
  clearTimeout(info.startTimer);
  info.resolveReady(false);
  info.resolveExit({ code, signal });
  const wasSpare = info.state === 'spare';
  if (p.spare === info) p.spare = null;
  const planned = info.state === 'retiring' || p.state === 'stopping';
  // replaced: a slot's worker that a new one took over from while the runner keeps
  // running (rolling restart, re-bind), not one that left because the runner stops.
  const fields = { worker: info.id, worker_pid: info.pid, slot: info.slot ? info.slot.n : null, code, signal, spare: wasSpare || undefined,
    start_timeout: info.timedOut || undefined, replaced: (info.state === 'retiring' && p.state !== 'stopping' && info.slot) ? true : undefined };
  if (info.slot && info.slot.current === info) info.slot.current = null;

  if (planned) {
    p.log('info', 'worker-exit', fields);
    if (p.state === 'stopping' && p.infos.size === 0) p.finish();
    return;
  }
  if (info.timedOut && p.startTimeouts >= START_TIMEOUT_LIMIT) {
    // Each new worker loads the same module and waits on the same thing: stop
    // with the reason instead of killing and forking for ever.
    const { reason, fix } = startTimeoutAdvice(p.s.startTimeoutMs, info.waiting);
    const message = `${p.startTimeouts} workers in a row did not start: ${reason}; ${fix} (stopping; the app module is ${p.s.module || '(example app)'})`;
    p.log('error', 'start-timeout-limit', { ...fields, in_a_row: p.startTimeouts, message });
    process.stderr.write(`tunekit: ${message}\n`);
    p.shutdown('start-timeout-limit', 1);
    return;
  }
  if (!p.everReady && info.error && info.error.where === 'load') {
    // The module cannot load: every worker would fail the same way. Say it
    // once and stop, instead of respawning into the crash-loop guard.
    const message = `the app module ${p.s.module || '(example app)'} failed to load: ${errorText(info.error)}; ` +
      'fix it and start again (no worker was respawned)';
    p.log('error', 'module-load-failed', { ...fields, error: info.error, message });
    process.stderr.write(`tunekit: ${message}\n`);
    p.shutdown('module-load-failed', 1);
    return;
  }
  // What the death was (app/crashes.js): its stage, and its error counted by kind.
  const stage = crashes.stageOf(p, info);
  const head = errorText(info.error);
  const crash = crashes.record(p, info, { code, signal, head });
  p.log('warn', 'worker-exit', { ...fields, stage, crash: crash.id, error: info.error ? head : undefined });
  if (crash.first) crashes.logFirst(p, info, { id: crash.id, stage, head, code, signal });
  onDeath(p, info, wasSpare, stage);
}

/** An unplanned exit after the start: crash loop, or the spare / a respawn fills the slot. */
function onDeath(p, info, wasSpare, stage) {
  const { delay, stop } = crashes.afterDeath(p, stage);
  if (stop) {
    const message = crashes.crashLoopMessage(p, errorText(p.lastError));
    p.log('error', 'crash-loop', { deaths: p.deathsSinceStable, min_uptime_ms: p.s.minUptimeMs, error: p.lastError, message });
    process.stderr.write(`tunekit: ${message}\n`);
    p.shutdown('crash-loop', 1);
    return;
  }
  if (info.replacement) return; // a failed rolling-restart replacement; the reload reports it
  if (wasSpare) {
    p.scheduleSpare(delay);
    return;
  }
  const slot = info.slot;
  if (p.takeSpare(slot)) {
    p.scheduleSpare(delay);
    return;
  }
  p.log('info', 'respawn', { slot: slot.n, in_ms: delay, unstable_deaths: p.unstableDeaths });
  clearTimeout(slot.timer);
  slot.timer = setTimeout(() => {
    slot.timer = null;
    if (p.state === 'stopping' || slot.current) return;
    const next = p.fork(slot);
    slot.current = next;
  }, delay);
}

/** Ask a worker to drain; SIGKILL it if it is still there after the drain timeout. */
function retire(p, info) {
  info.state = 'retiring';
  if (info.worker.isConnected()) info.worker.send({ tunekit: MSG.DRAIN }, undefined, () => {});
  else info.worker.process.kill('SIGTERM');
  const killer = setTimeout(() => {
    if (!p.infos.has(info.id)) return;
    p.log('warn', 'worker-kill', { worker: info.id, worker_pid: info.pid, reason: `still running ${p.s.drainTimeoutMs + p.s.killGraceMs} ms after drain` });
    p.exitCode = p.exitCode || 1;
    info.worker.process.kill('SIGKILL');
  }, p.s.drainTimeoutMs + p.s.killGraceMs);
  killer.unref();
  return info.exited.then(() => clearTimeout(killer));
}

module.exports = {
  START_TIMEOUT_LIMIT, errorText, fork, onMessage, sendListener, takeSpare, scheduleSpare, maybeReady, pids, onExit, retire,
};
