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
const fs = require('node:fs');
const path = require('node:path');
const { normalize, readSettingsFile, socketPaths } = require('./settings');
const sock = require('./socket');
const { AppError } = require('./errors');
const { MSG } = require('./ipc');
const { makeLogger, formatFor } = require('./log');
const { preflight } = require('./preflight');

const WORKER_ENTRY = path.join(__dirname, 'worker.js');
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

// Node's flags for the workers: the primary's own, plus, with perfMap, V8's
// perf map (/tmp/perf-PID.map) of compiled JavaScript functions, so `perf`
// (and `tunekit profile`) names JavaScript frames. Only functions, not V8's
// stubs and handlers: a smaller map, the same names for the app's code.
// See https://nodejs.org/en/learn/diagnostics/poor-performance/using-linux-perf
const PERF_MAP_FLAG = '--perf-basic-prof-only-functions';

function workerExecArgv(s) {
  const own = process.execArgv.filter((a) => a !== PERF_MAP_FLAG);
  return s.perfMap ? [...own, PERF_MAP_FLAG] : own;
}

class Primary {
  constructor(settings, { log = makeLogger(), exit = (code) => process.exit(code) } = {}) {
    this.s = settings;
    this.log = log;
    this.exit = exit;
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
    this.deaths = [];
    this.lastError = null;
    this.startTimeouts = 0; // failed starts in a row (START_TIMEOUT_LIMIT)
    this.state = 'starting';
    this.everReady = false;
    this.reloading = false;
    this.exitCode = 0;
    this.done = null;
  }

  // ---- listeners -------------------------------------------------------------

  async bindListeners() {
    const { s, listen } = this;
    if (listen.kind === 'fd') {
      this.bound.push(sock.adoptFd(listen.fd, { systemd: listen.systemd }));
      this.log('info', 'listen', { listen: listen.text, fd: listen.fd, owner: 'inherited' });
      return;
    }
    if (listen.kind === 'tcp') {
      if (s.strategy === 'round-robin') return; // Node's cluster binds it
      this.bound.push(sock.bindTcp(listen.host, listen.port, listen.ipv6));
      this.log('info', 'listen', { listen: listen.text, backlog: s.backlog });
      return;
    }
    const paths = socketPaths(s);
    for (const p of paths) {
      sock.checkPathLength(p);
      sock.checkDirectory(p);
    }
    sock.resolveGroup(s.socketGroup); // refuse an unknown group before touching anything
    for (const p of paths) {
      const removed = await sock.preparePath(p);
      if (removed) this.log('warn', 'stale-socket-removed', { path: p, reason: 'connect() was refused: nobody accepts on it' });
    }
    if (s.strategy === 'round-robin') {
      // Node's cluster binds the path when the first worker listens, in this
      // process: the umask gives the socket its mode from the first moment.
      process.umask(0o777 & ~s.modeBits);
      return;
    }
    for (const p of paths) {
      const b = sock.bindUnix(p, s);
      this.bound.push(b);
      this.log('info', 'listen', { listen: `unix:${p}`, mode: s.socketMode, group: s.socketGroup || null, backlog: s.backlog });
    }
  }

  /**
   * Round-robin: Node's cluster bound the socket (again, if every worker had left).
   * Make its group and mode right, and remember which file it is. `info` is the
   * worker that just listened: while another one listens, Node's cluster still holds
   * the socket it bound first, so another file at the path is not Node's: left alone.
   */
  adoptRoundRobinSocket(info) {
    if (this.s.strategy !== 'round-robin' || this.listen.kind !== 'unix') return;
    const p = this.listen.path;
    let st;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    const gid = sock.resolveGroup(this.s.socketGroup);
    const mode = this.s.modeBits;
    if (this.rrSocket && sock.sameFile(sock.identity(p), this.rrSocket) && (gid === null || st.gid === gid)) return;
    const othersListen = [...this.infos.values()].some((other) => other !== info && other.state === 'ready');
    if (this.rrSocket && othersListen && sock.pathState(this.rrSocket) !== 'ours') return;
    if (gid !== null && st.gid !== gid) fs.chownSync(p, -1, gid);
    if ((st.mode & 0o777) !== mode) fs.chmodSync(p, mode);
    this.rrSocket = { kind: 'unix', path: p, ...sock.identity(p), owned: true, boundAt: Date.now() };
    this.log('info', 'listen', { listen: `unix:${p}`, mode: this.s.socketMode, group: this.s.socketGroup || null, backlog: this.s.backlog, bound_by: 'node-cluster' });
  }

  releaseListeners() {
    for (const b of [...this.bound, this.rrSocket]) {
      if (!b || b.kind !== 'unix') continue;
      const result = sock.release(b);
      if (result === 'removed') this.log('info', 'socket-removed', { path: b.path });
      if (result === 'replaced') this.log('warn', 'socket-kept', { path: b.path, reason: 'another socket now sits at the path; not ours to remove' });
    }
    this.bound = this.bound.filter((b) => b.kind !== 'unix');
    this.rrSocket = null;
  }

  // ---- workers ---------------------------------------------------------------

  fork(slot, { replacement = false, spare = false } = {}) {
    const worker = cluster.fork({
      TUNEKIT_PRIMARY_PID: String(process.pid),
      TUNEKIT_LOG: formatFor(),
      TUNEKIT_SETTINGS: JSON.stringify(this.s),
      TUNEKIT_SLOT: String(slot ? slot.n : 0),
      TUNEKIT_WORKERS: String(this.s.workers),
    });
    const info = {
      worker, slot, id: worker.id, pid: worker.process.pid, state: spare ? 'spare' : 'starting', replacement, error: null, waiting: false,
    };
    info.ready = new Promise((resolve) => { info.resolveReady = resolve; });
    info.exited = new Promise((resolve) => { info.resolveExit = resolve; });
    info.startTimer = setTimeout(() => {
      if (info.state !== 'starting') return;
      info.timedOut = true;
      this.startTimeouts += 1;
      this.log('error', 'worker-start-timeout', {
        worker: info.id, worker_pid: info.pid, ms: this.s.startTimeoutMs, in_a_row: this.startTimeouts,
        ...startTimeoutAdvice(this.s.startTimeoutMs, info.waiting),
      });
      worker.process.kill('SIGKILL');
    }, this.s.startTimeoutMs);
    info.startTimer.unref();
    this.infos.set(worker.id, info);
    worker.on('message', (msg) => {
      try {
        this.onMessage(info, msg);
      } catch (err) {
        this.log('error', 'primary-error', { error: err.stack || String(err), worker: info.id });
      }
    });
    this.log('info', spare ? 'spare-start' : 'worker-start', { worker: info.id, worker_pid: info.pid, slot: slot ? slot.n : null });
    return info;
  }

  onMessage(info, msg) {
    if (!msg || typeof msg !== 'object') return;
    if (msg.tunekit === MSG.FATAL) {
      info.error = msg.error;
      this.lastError = msg.error;
      return;
    }
    if (msg.tunekit === MSG.WANT_LISTEN) {
      if (this.state === 'stopping' || info.state === 'retiring') return; // it has been told to drain
      info.waiting = true;
      if (info.state === 'spare') {
        // Loaded and waiting; it gets a listener when a worker dies.
        clearTimeout(info.startTimer);
        this.log('info', 'spare-ready', { worker: info.id, worker_pid: info.pid });
        return;
      }
      this.sendListener(info);
      return;
    }
    if (msg.tunekit === MSG.LISTENING) {
      clearTimeout(info.startTimer);
      this.startTimeouts = 0;
      if (info.state === 'starting') info.state = 'ready';
      try {
        this.adoptRoundRobinSocket(info);
      } catch (err) {
        this.log('error', 'socket-group', { error: err.message });
      }
      this.log('info', 'worker-ready', { worker: info.id, worker_pid: info.pid, slot: info.slot.n, module: msg.source });
      if (!info.replacement) info.slot.current = info;
      info.resolveReady(true);
      this.maybeReady();
    }
  }

  /** The binding a slot's worker listens on (undefined: Node's cluster binds). */
  bindingOf(slot) {
    return this.s.strategy === 'per-worker' ? this.bound[slot.n - 1] : this.bound[0];
  }

  sendListener(info) {
    if (!info.slot) return;
    const b = this.bindingOf(info.slot);
    info.listener = b;
    const send = (m, handle) => info.worker.send(m, handle, () => {});
    if (b) send({ tunekit: MSG.LISTEN, via: 'handle', address: b.path }, b.handle);
    else send({ tunekit: MSG.LISTEN, via: 'cluster' });
  }

  /**
   * Give a slot to the waiting spare, if there is one: a dead worker's slot, or
   * (replacement) a slot whose worker a rolling restart replaces.
   */
  takeSpare(slot, { replacement = false } = {}) {
    const spare = this.spare;
    if (!spare || !spare.waiting || spare.state !== 'spare') return null;
    this.spare = null;
    spare.state = 'starting';
    spare.slot = slot;
    spare.replacement = replacement;
    if (!replacement) slot.current = spare;
    this.log('info', 'spare-promoted', { worker: spare.id, worker_pid: spare.pid, slot: slot.n });
    this.sendListener(spare);
    return spare;
  }

  /** Keep one loaded spare (settings.spareWorkers > 0), forked after `delay`. */
  scheduleSpare(delay) {
    clearTimeout(this.spareTimer);
    this.spareTimer = null;
    if (this.s.spareWorkers < 1 || this.state === 'stopping' || this.spare) return;
    this.spareTimer = setTimeout(() => {
      this.spareTimer = null;
      if (this.state === 'stopping' || this.spare) return;
      this.spare = this.fork(null, { spare: true });
    }, delay);
  }

  maybeReady() {
    if (this.everReady || this.state !== 'starting') return;
    if (!this.slots.every((slot) => slot.current && slot.current.state === 'ready')) return;
    this.everReady = true;
    this.state = 'running';
    const fields = { listen: this.listen.text, strategy: this.s.strategy, workers: this.pids() };
    if (this.s.strategy === 'per-worker') fields.sockets = socketPaths(this.s);
    this.log('info', 'ready', fields);
    this.scheduleSpare(0);
    this.watchSockets();
  }

  pids() {
    return this.slots.map((slot) => (slot.current ? slot.current.pid : null)).filter(Boolean);
  }

  onExit(worker, code, signal) {
    const info = this.infos.get(worker.id);
    if (!info) return;
    this.infos.delete(worker.id);
    clearTimeout(info.startTimer);
    info.resolveReady(false);
    info.resolveExit({ code, signal });
    const wasSpare = info.state === 'spare';
    if (this.spare === info) this.spare = null;
    const planned = info.state === 'retiring' || this.state === 'stopping';
    const fields = { worker: info.id, worker_pid: info.pid, slot: info.slot ? info.slot.n : null, code, signal, spare: wasSpare || undefined };
    if (info.slot && info.slot.current === info) info.slot.current = null;

    if (planned) {
      this.log('info', 'worker-exit', fields);
      if (this.state === 'stopping' && this.infos.size === 0) this.finish();
      return;
    }
    if (info.timedOut && this.startTimeouts >= START_TIMEOUT_LIMIT) {
      // Each new worker loads the same module and waits on the same thing: stop
      // with the reason instead of killing and forking for ever.
      const { reason, fix } = startTimeoutAdvice(this.s.startTimeoutMs, info.waiting);
      const message = `${this.startTimeouts} workers in a row did not start: ${reason}; ${fix} (stopping; the app module is ${this.s.module || '(example app)'})`;
      this.log('error', 'start-timeout-limit', { ...fields, in_a_row: this.startTimeouts, message });
      process.stderr.write(`tunekit: ${message}\n`);
      this.shutdown('start-timeout-limit', 1);
      return;
    }
    if (!this.everReady && info.error && info.error.where === 'load') {
      // The module cannot load: every worker would fail the same way. Say it
      // once and stop, instead of respawning into the crash-loop guard.
      const message = `the app module ${this.s.module || '(example app)'} failed to load: ${errorText(info.error)}; ` +
        'fix it and start again (no worker was respawned)';
      this.log('error', 'module-load-failed', { ...fields, error: info.error, message });
      process.stderr.write(`tunekit: ${message}\n`);
      this.shutdown('module-load-failed', 1);
      return;
    }
    this.log('warn', 'worker-exit', { ...fields, error: info.error ? errorText(info.error) : undefined });
    const now = Date.now();
    this.deaths = this.deaths.filter((t) => now - t < this.s.crashWindowMs);
    this.deaths.push(now);
    if (this.deaths.length >= this.s.crashLimit) {
      const message = `crash loop: ${this.deaths.length} worker deaths within ${this.s.crashWindowMs / 1000} s; ` +
        `stopping the cluster. Last worker error: ${errorText(this.lastError)}`;
      this.log('error', 'crash-loop', { deaths: this.deaths.length, window_ms: this.s.crashWindowMs, error: this.lastError, message });
      process.stderr.write(`tunekit: ${message}\n`);
      this.shutdown('crash-loop', 1);
      return;
    }
    if (info.replacement) return; // a failed rolling-restart replacement; the reload reports it
    const delay = Math.min(this.s.respawnBackoffMs * 2 ** (this.deaths.length - 1), this.s.respawnBackoffMaxMs);
    if (wasSpare) {
      this.scheduleSpare(delay);
      return;
    }
    const slot = info.slot;
    if (this.takeSpare(slot)) {
      this.scheduleSpare(delay);
      return;
    }
    this.log('info', 'respawn', { slot: slot.n, in_ms: delay, deaths_in_window: this.deaths.length });
    clearTimeout(slot.timer);
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (this.state === 'stopping' || slot.current) return;
      const next = this.fork(slot);
      slot.current = next;
    }, delay);
  }

  // ---- signals ---------------------------------------------------------------

  /**
   * Rolling restart: one slot at a time, a new worker listens before the old one
   * drains. SIGHUP restarts every slot with new processes (new code); after a
   * re-bind (reason 'socket-rebound') only the slots on a socket the runner no
   * longer binds, and the waiting spare, loaded and idle, takes the first of them.
   */
  async reload({ reason, slots = this.slots } = {}) {
    if (this.state !== 'running' || this.reloading) {
      this.log('warn', 'reload-ignored', { reason: this.reloading ? 'a rolling restart is already running' : `state is ${this.state}` });
      return;
    }
    this.reloading = true;
    const before = slots.map((slot) => slot.current && slot.current.pid).filter(Boolean);
    const rebound = reason === 'socket-rebound';
    this.log('info', 'reload', { workers: before, reason, slots: rebound ? slots.map((slot) => slot.n) : undefined });
    clearTimeout(this.spareTimer);
    if (this.spare && !rebound) {
      const old = this.spare; // loaded with the old code
      this.spare = null;
      this.retire(old);
    }
    try {
      for (const slot of slots) {
        if (this.state !== 'running') return;
        const old = slot.current;
        const fresh = (rebound && this.takeSpare(slot, { replacement: true })) || this.fork(slot, { replacement: true });
        const ok = await fresh.ready;
        if (!ok || this.state !== 'running') {
          this.log('error', 'reload-failed', {
            slot: slot.n,
            reason: 'the new worker exited before it listened; the old one keeps serving',
            error: fresh.error ? errorText(fresh.error) : undefined,
          });
          return;
        }
        fresh.replacement = false;
        // `old` may have died meanwhile and a respawn taken its slot: retire
        // whichever worker the slot holds now, and cancel a pending respawn.
        const previous = slot.current || old;
        clearTimeout(slot.timer);
        slot.timer = null;
        slot.current = fresh;
        if (previous && previous !== fresh && this.infos.has(previous.id)) await this.retire(previous);
      }
      this.log('info', 'reload-done', { workers: this.pids(), replaced: before, reason });
    } finally {
      this.reloading = false;
      this.scheduleSpare(0);
      if (this.moveAfterReload) {
        // A re-bind during this restart: workers started before it hold the old socket.
        this.moveAfterReload = false;
        setImmediate(() => this.moveWorkers());
      }
    }
  }

  // ---- the socket path, checked ------------------------------------------------
  //
  // An rm or a tmpfiles clean-up can delete the socket file under the running app:
  // the workers keep accepting on a socket nobody can reach by path any more, and
  // nginx's connect() fails with ENOENT (502) for every new upstream connection.
  // Every socketCheckMs the primary looks at each path it bound:
  //   our file      → nothing to do
  //   gone          → bind a new socket there (mode and group as at the start), then a
  //                   rolling restart of the slots on the old one (moveWorkers)
  //   another file  → never touched; said once (socket-replaced)
  // Round-robin: Node's cluster holds that socket, and binds again only once every
  // worker has left it (closing its handle, which unlinks the path unchecked), so
  // the runner only says the path is gone and that a restart fixes it. Inherited
  // sockets (fd:N, systemd) are not the runner's: never checked.

  watchSockets() {
    if (!this.s.socketCheckMs || this.listen.kind !== 'unix' || this.checkTimer) return;
    this.checkTimer = setInterval(() => {
      if (this.state !== 'running') return;
      try {
        this.checkSockets();
      } catch (err) {
        this.log('error', 'primary-error', { error: err.stack || String(err) });
      }
    }, this.s.socketCheckMs);
    this.checkTimer.unref();
  }

  /** Log an event once per state of a path (again only after the state changed). */
  reportOnce(check, key, level, event, fields) {
    if (check.reported === key) return;
    check.reported = key;
    this.log(level, event, fields);
  }

  checkSockets() {
    if (this.s.strategy === 'round-robin') {
      // Node's handle (and so the socket's inode) is held only while a worker listens.
      if (this.rrSocket && this.slots.some((slot) => slot.current && slot.current.state === 'ready')) this.checkSocket(this.rrSocket, -1);
      return;
    }
    for (let i = 0; i < this.bound.length; i++) {
      const b = this.bound[i];
      if (b.kind === 'unix' && b.owned) this.checkSocket(b, i);
    }
  }

  checkSocket(b, i) {
    // Known to be ours since it was bound; since each check that found it, after that.
    if (!this.checks.has(b.path)) this.checks.set(b.path, { lastSeen: b.boundAt, reported: null });
    const check = this.checks.get(b.path);
    let state;
    try {
      state = sock.pathState(b);
    } catch (err) {
      this.reportOnce(check, err.code, 'warn', 'socket-check-failed', { path: b.path, error: err.message, code: err.code });
      return;
    }
    if (state === 'ours') {
      check.lastSeen = Date.now();
      check.reported = null;
      return;
    }
    if (state === 'replaced') {
      this.reportOnce(check, 'replaced', 'warn', 'socket-replaced', {
        path: b.path,
        reason: 'another file now sits at the socket path; the runner leaves it alone, and nginx connects to it, not to this app',
        fix: `find what put it there and move it away (the runner then binds ${b.path} again within ${this.s.socketCheckMs} ms), or stop what serves on it and restart the app`,
      });
      return;
    }
    if (i < 0) {
      this.reportOnce(check, 'gone', 'warn', 'socket-gone', {
        path: b.path,
        ...sock.goneFor(b.path, check.lastSeen),
        reason: 'the socket file was deleted; with strategy round-robin Node\'s cluster holds the socket and the runner cannot bind the path again while workers listen on it',
        fix: 'restart the app (systemctl restart tunekit-app); find what deleted it (a tmpfiles rule, an rm)',
      });
      return;
    }
    this.rebind(b, i, check);
  }

  /** The socket file of binding i is gone: bind the path again and move the workers. */
  rebind(old, i, check) {
    const missing = sock.goneFor(old.path, check.lastSeen);
    let fresh;
    try {
      fresh = sock.bindAgain(old.path, this.s);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      this.reportOnce(check, `rebind:${err.code}`, 'warn', 'socket-rebind-failed', { path: old.path, error: err.message, code: err.code, retry_ms: this.s.socketCheckMs });
      return;
    }
    // The old handle stays open here for good: closing it would make libuv unlink
    // its path, which now holds the new socket. Its workers drain off it below.
    this.unreachable.push(old);
    this.bound[i] = fresh;
    check.lastSeen = fresh.boundAt;
    check.reported = null;
    this.log('info', 'socket-rebound', { path: fresh.path, ...missing, mode: this.s.socketMode, group: this.s.socketGroup || null });
    this.moveWorkers();
  }

  /** Slots whose worker listens on a socket the runner no longer binds. */
  staleSlots() {
    return this.slots.filter((slot) => slot.current && slot.current.listener && slot.current.listener !== this.bindingOf(slot));
  }

  /** Restart the workers of the old socket one at a time: new ones get the new socket. */
  moveWorkers() {
    if (this.state !== 'running') return;
    if (this.reloading) {
      this.moveAfterReload = true;
      return;
    }
    const slots = this.staleSlots();
    if (!slots.length) return;
    this.reload({ reason: 'socket-rebound', slots }).catch((err) => this.log('error', 'reload-failed', { error: err.message }));
  }

  /** Ask a worker to drain; SIGKILL it if it is still there after the drain timeout. */
  retire(info) {
    info.state = 'retiring';
    if (info.worker.isConnected()) info.worker.send({ tunekit: MSG.DRAIN }, undefined, () => {});
    else info.worker.process.kill('SIGTERM');
    const killer = setTimeout(() => {
      if (!this.infos.has(info.id)) return;
      this.log('warn', 'worker-kill', { worker: info.id, worker_pid: info.pid, reason: `still running ${this.s.drainTimeoutMs + this.s.killGraceMs} ms after drain` });
      this.exitCode = this.exitCode || 1;
      info.worker.process.kill('SIGKILL');
    }, this.s.drainTimeoutMs + this.s.killGraceMs);
    killer.unref();
    return info.exited.then(() => clearTimeout(killer));
  }

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
    this.log('info', 'stop', { code: this.exitCode });
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.removeListener(sig, this.signalHandlers[sig]);
    if (this.done) this.done(this.exitCode);
    // Leave without closing the bound handles (nor those a re-bind replaced): closing
    // one makes libuv unlink its path, and we only unlink after checking the inode
    // (releaseListeners, which checks the current bindings only).
    this.exit(this.exitCode);
  }

  // ---- start -----------------------------------------------------------------

  async run() {
    const { s } = this;
    this.log('info', 'start', {
      name: s.name, listen: s.listen, strategy: s.strategy, workers: s.workers,
      module: s.module || '(example app)', node: process.version,
    });
    try {
      preflight(s);
      await this.bindListeners();
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      this.log('error', 'listen-refused', { error: err.message, code: err.code });
      process.stderr.write(`tunekit: ${err.message}\n`);
      this.releaseListeners();
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

module.exports = { runPrimary, Primary, makeLogger, errorText, WORKER_ENTRY };
