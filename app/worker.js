'use strict';
// A cluster worker: loads the user's app (app/load.js), applies the timeouts and
// serves on the listener it is given. It never binds a path it could unlink and
// never unlinks anything.
//
// Two ways to be started:
//   managed  — forked by the tunekit primary (app/cluster.js). Detected by
//              TUNEKIT_PRIMARY_PID equal to our parent's pid. Settings arrive in
//              TUNEKIT_SETTINGS; the primary sends the listening handle over IPC.
//   foreign  — any other cluster primary, e.g. PM2 cluster mode (exec_mode: cluster).
//              Settings are read from the file named by TUNEKIT_CONFIG; the worker
//              calls server.listen(path), which Node's cluster turns into a request
//              to that primary, which binds the path and owns it.

const cluster = require('node:cluster');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { loadApp } = require('./load');
const { MSG, PM2_READY } = require('./ipc');
const { makeLogger, formatFor } = require('./log');
const { normalize, readSettingsFile } = require('./settings');
const metrics = require('./metrics');
const { listenMetrics, instanceEndpoint } = require('./metrics-server');
const address = require('./address');
const shed = require('./shed');
const { createAccepts } = require('./accepts');
const { performance } = require('node:perf_hooks');
const { createHold, SAMPLE_MS } = require('./hold');

const managed = Boolean(process.env.TUNEKIT_PRIMARY_PID) &&
  Number(process.env.TUNEKIT_PRIMARY_PID) === process.ppid &&
  typeof process.send === 'function';

let server = null;
let settings = null;
let meter = null; // app/metrics.js, when settings.metrics
let draining = false;
// More descriptors of the listening socket (acceptMore, tunekit_app_accepts_per_turn),
// opened only while the loop turns slowly (app/accepts.js).
const accepts = createAccepts({
  listen: acceptThrough,
  ask: (n) => process.send({ tunekit: MSG.ACCEPT_MORE_WANTED, n }, undefined, () => {}),
});
let dying = false;

const log = makeLogger(process.stdout, formatFor(), { worker: cluster.worker ? cluster.worker.id : 0 });

// The stack frames an error report carries (the primary logs each distinct error
// once with them, app/crashes.js).
const REPORTED_FRAMES = 5;

function describeError(err) {
  if (!(err instanceof Error)) return { message: String(err) };
  const frames = String(err.stack || '').split('\n').map((l) => l.trim()).filter((l) => l.startsWith('at ')).map((l) => l.slice(3));
  const frame = frames.find((l) => /\(?\/.+:\d+:\d+\)?$/.test(l) && !l.includes('node:'));
  return {
    name: err.name,
    message: err.message,
    code: err.code,
    at: frame,
    frames: frames.slice(0, REPORTED_FRAMES),
  };
}

/**
 * Report an uncaught error to the primary (so a crash loop names it) with the
 * number of requests open (`open`: the primary tells a worker a request killed
 * from one that died on its own, app/crashes.js), answer those requests
 * (failOpenRequests), then exit: once both are done, or after FATAL_GRACE_MS.
 */
const FATAL_GRACE_MS = 1000;

function fatal(err, where) {
  if (dying) return;
  dying = true;
  const error = { ...describeError(err), where };
  const open = [...sockets].filter(openResponse).length;
  const leave = () => process.exit(1);
  setTimeout(leave, FATAL_GRACE_MS).unref();
  // Under the kit's primary the error travels with the exit and the primary logs
  // it (once, with the worker's exit); on its own the worker logs it itself.
  const reported = managed && process.connected
    ? new Promise((resolve) => process.send({ tunekit: MSG.FATAL, error, open }, resolve))
    : log('error', 'worker-error', { error, open });
  Promise.all([reported, failOpenRequests()]).then(leave, leave);
}

/**
 * The worker dies of an uncaught error: it stops accepting, every request still
 * open is answered 500 with its connection closed, idle connections close. A
 * request left without an answer on a pooled upstream connection is retried by
 * nginx on the next pooled connection, another worker's, at no cost to its
 * proxy_next_upstream_tries (an error on a cached connection does not count:
 * ngx_http_upstream_next, where a comment notes the balancer is not told), so the request that
 * killed this worker would kill each worker in turn: through the kit's nginx one
 * such request killed 3 workers of 2 slots and the spare within 40 ms. Node's
 * docs allow clean-up before the exit
 * (https://nodejs.org/api/process.html#warning-using-uncaughtexception-correctly);
 * the app's own code gets no further request. Resolves once the answers are written.
 */
function failOpenRequests() {
  if (server && server.listening) net.Server.prototype.close.call(server);
  accepts.end();
  const answered = [];
  for (const socket of sockets) {
    const res = openResponse(socket);
    if (!res || res.headersSent) {
      socket.destroy(); // idle (nginx drops it from its pool), or an answer already under way
      continue;
    }
    answered.push(new Promise((resolve) => res.once('close', resolve)));
    try {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      res.end('500 Internal Server Error: the app process serving this request crashed\n');
    } catch {
      socket.destroy();
    }
  }
  return Promise.all(answered);
}

process.on('uncaughtException', (err) => fatal(err, 'uncaughtException'));
process.on('unhandledRejection', (err) => fatal(err, 'unhandledRejection'));

function readSettings() {
  if (managed) return normalize(JSON.parse(process.env.TUNEKIT_SETTINGS));
  const file = process.env.TUNEKIT_CONFIG;
  if (!file) {
    throw new Error('TUNEKIT_CONFIG is not set: under PM2 (or any foreign cluster primary) set it to the rendered app.json, e.g. /etc/tunekit-app/app.json');
  }
  return readSettingsFile(file);
}

// The release this worker runs: the file the Ansible role writes next to the
// runner (INSTALL_DIR/release, a checksum of the code it deployed), read once at
// start, so a worker keeps reporting the code it loaded. Sent as X-Tunekit-Release
// on every response (the rollout's health gate compares it with what was
// deployed) and given to the app as $TUNEKIT_RELEASE. No file: neither.
const RELEASE_FILE = path.join(__dirname, '..', 'release');

function readRelease() {
  try {
    const text = fs.readFileSync(RELEASE_FILE, 'utf8').trim();
    return /^[\w.+-]{1,128}$/.test(text) ? text : null;
  } catch {
    return null;
  }
}

const release = readRelease();
if (release) process.env.TUNEKIT_RELEASE = release;

function applyTimeouts(srv, s) {
  // nginx must close an idle upstream connection before Node does (the keep-alive
  // 502 race); headersTimeout above keepAliveTimeout; requestTimeout bounds a request.
  srv.keepAliveTimeout = s.keepAliveTimeoutMs;
  srv.headersTimeout = s.headersTimeoutMs;
  srv.requestTimeout = s.requestTimeoutMs;
}

// ---- graceful close of keep-alive connections ----------------------------------
//
// While draining, every response says "Connection: close", and a connection is
// closed the way RFC 9112 section 9.6 asks (and nginx's lingering_close does): send
// FIN after the response, keep reading until the client hangs up, then close. A
// request that still arrives on such a connection is read and dropped, never
// handled ("MUST NOT process any further requests"). Node's own close sends FIN and
// destroys at once; a client that already wrote its next request then gets EPIPE or
// ECONNRESET instead of a clean end of stream.

const CLOSING = Symbol('tunekit.closing');
const UPGRADED = Symbol('tunekit.upgraded');
const LINGER_MS = 2000;
const sockets = new Set();

function lingeringClose(socket) {
  if (socket.destroyed) return;
  socket[CLOSING] = true;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.resume();
  socket.end();
}

// ---- the open-files limit ---------------------------------------------------------
//
// When accept() fails with EMFILE, libuv closes a descriptor it keeps in reserve,
// accepts the waiting connections and closes them unread, then takes the reserve
// back (uv__emfile_trick, https://github.com/libuv/libuv/blob/v1.x/src/unix/stream.c):
// Node never sees the error, and nginx answers those requests 502. So the worker
// watches its own count: the descriptors open when it started listening plus the
// extra listening descriptors (acceptMore) and the connections it holds. At the
// soft RLIMIT_NOFILE (read from /proc/self/limits, again every FILES_CHECK_MS, so
// a prlimit is seen too) it logs open-files-limit, at most once per FILES_LOG_MS,
// with how often it was hit since.
const FILES_CHECK_MS = 1000;
const FILES_LOG_MS = 10_000;
const files = { limit: Infinity, baseline: 0, hits: 0, lastLog: 0 };

function readFilesLimit() {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    files.limit = m && m[1] !== 'unlimited' ? Number(m[1]) : Infinity;
  } catch {
    files.limit = Infinity; // no procfs: not watched
  }
}

function watchFiles() {
  try {
    // Connections and the extra listening descriptors (acceptMore) are counted live.
    files.baseline = fs.readdirSync('/proc/self/fd').length - sockets.size - accepts.descriptors;
  } catch {
    return; // no procfs: not watched
  }
  readFilesLimit();
  setInterval(readFilesLimit, FILES_CHECK_MS).unref();
}

/**
 * The worker listens: what it watches only while it serves starts now (a warm
 * spare, loaded and waiting, runs no timer: each would wake it for nothing).
 */
function serving() {
  watchFiles();
  if (managed) accepts.start();
  if (meter) metrics.watchLoop(meter);
}

function countFiles() {
  const open = files.baseline + accepts.descriptors + sockets.size;
  if (open < files.limit) return;
  files.hits += 1;
  const now = Date.now();
  if (now - files.lastLog < FILES_LOG_MS) return;
  log('warn', 'open-files-limit', {
    limit: files.limit,
    open,
    connections: sockets.size,
    hits: files.hits,
    reason: 'at its open-files limit the worker cannot accept: libuv closes the connections past it unread, and nginx answers 502 ("recv() failed (104: Connection reset by peer)")',
    fix: 'raise the limit: LimitNOFILE= in the unit (tunekit_app_limit_nofile, 65536 by default)',
  });
  files.hits = 0;
  files.lastLog = now;
}

// ---- the response a connection carries ---------------------------------------------
//
// No listener and no property per response: the dispatcher runs for every request,
// and what it adds there is the runner's cost against a plain cluster worker
// (docs/benchmarks.md, "The dispatcher without a listener per response"). A
// connection remembers its latest response (socket[RESPONSE]); Node writes a
// connection's responses in the order of its requests, so the connection is idle
// once that one is done. The meter counts a response when it is found done: when
// the connection's next request comes, when the connection closes, or when the
// meter is read (settleMeter); a pipelined response still being written when the
// next request comes is counted at its close.
const RESPONSE = Symbol('tunekit.response'); // on a socket: its latest response not yet counted
const REUSED = Symbol('tunekit.reused'); // on a socket: 1 when that response is not the connection's first

/** Written out, or its connection gone: nothing more will be sent for it. */
const responseDone = (res) => res.writableFinished || res.destroyed;

/** The response this connection is still writing, or null: the connection is idle. */
function openResponse(socket) {
  const res = socket[RESPONSE];
  return res && !responseDone(res) ? res : null;
}

/** Count the connection's latest response if it is done (or `always`), and forget it. */
function settle(socket, always) {
  const res = socket[RESPONSE];
  if (!res || !(always || responseDone(res))) return;
  socket[RESPONSE] = null;
  if (meter) metrics.countResponse(meter, res.statusCode, socket[REUSED]);
}

/** Before the meter is read: every response done since its connection's last request. */
function settleMeter() {
  for (const socket of sockets) settle(socket, false);
}

/** A new request on `socket`: its previous response is counted, now if done, else (pipelined) at its close. */
function nextResponse(socket, req, res) {
  settle(socket, false);
  const prev = socket[RESPONSE]; // still being written: pipelined
  if (prev && meter) {
    prev[REUSED] = socket[REUSED];
    prev.once('close', pipelinedClosed);
  }
  socket[RESPONSE] = res;
  socket[REUSED] = meter ? metrics.countRequest(meter, req) : 0;
}

// A pipelined response's end (`this`): counted by its own status and connection.
function pipelinedClosed() {
  metrics.countResponse(meter, this.statusCode, this[REUSED]);
}

/** Route every request through one listener that knows about draining. */
function installDispatcher(srv) {
  const listeners = srv.listeners('request');
  const queueBudgetMs = settings.queueBudgetMs;
  const holdRequest = settings.sustainedAfterS > 0 ? heldDispatch(srv, listeners) : null;
  srv.removeAllListeners('request');
  srv.on('connection', (socket) => {
    sockets.add(socket);
    if (meter) metrics.countConnection(meter, socket);
    countFiles();
    socket[RESPONSE] = null;
    socket[REUSED] = 0;
    socket.once('close', () => {
      settle(socket, true);
      sockets.delete(socket);
    });
  });
  srv.on('request', (req, res) => {
    const socket = req.socket;
    if (socket[CLOSING] || socket.writableEnded) {
      req.resume(); // a request after "Connection: close": drop it, unanswered
      return;
    }
    nextResponse(socket, req, res);
    if (release) res.setHeader('x-tunekit-release', release);
    if (draining) {
      res.setHeader('connection', 'close');
      markClosing(socket);
    }
    if (holdRequest) {
      holdRequest(req, res);
      return;
    }
    // Past the queue budget (app/shed.js): answered here, no app code runs.
    // No budget (0, the default): no clock read, no header parsed.
    if (queueBudgetMs > 0 && shed.overBudget(req, queueBudgetMs, Date.now())) {
      refuse(res, 'queue_time', shed.queueWaitMs(req, Date.now()));
      return;
    }
    for (const fn of listeners) fn.call(srv, req, res);
  });

  // An upgraded connection (a WebSocket) belongs to the app: the drain leaves it to
  // the app's tunekit:drain listener (a close frame), not to the HTTP close above.
  // Marked as Node hands it over; wrapping emit adds no 'upgrade' listener, which
  // would change how Node treats an upgrade request the app does not handle.
  // Every event of the server passes here, each request's too: no rest array, no spread.
  const emit = srv.emit;
  srv.emit = function emitMarkingUpgrades(event, req, socket) {
    if (event === 'upgrade' && socket) socket[UPGRADED] = true;
    return emit.apply(this, arguments);
  };
}

/**
 * The queue each worker holds (app/hold.js, tunekit_app_sustained_after_s above
 * 0): every request read joins it, and the app gets them one per turn of the
 * event loop, so each turn reads (and counts) what arrived meanwhile. Returns
 * what the dispatcher calls for each request.
 */
function heldDispatch(srv, listeners) {
  accepts.keepWide();
  // The primary sets the share nginx refuses from each worker's samples (app/shed-share.js).
  // With how busy the event loop was over the sample's second.
  let loop = performance.eventLoopUtilization();
  const report = settings.shedDir && managed
    ? (sample) => {
      const now = performance.eventLoopUtilization();
      const { utilization } = performance.eventLoopUtilization(now, loop);
      loop = now;
      process.send({ tunekit: MSG.HOLD, ...sample, utilization }, undefined, () => {});
    }
    : null;
  const held = createHold({ sustainedAfterS: settings.sustainedAfterS, sustainedBudgetMs: settings.sustainedBudgetMs, onSample: report });
  if (report) setInterval(() => held.tick(Date.now()), SAMPLE_MS).unref();
  const queueBudgetMs = settings.queueBudgetMs;
  let scheduled = false;

  // One request to the app a turn; the refused ones cost no app code, so all of
  // them that come up in this turn are answered in it.
  function serveHeld() {
    scheduled = false;
    const now = Date.now();
    for (let next = held.take(now); next !== undefined; next = held.take(now)) {
      const { req, res } = next.item;
      if (req.socket.destroyed) continue; // its connection closed while it waited: nginx gave up on it
      if (next.refuse || (queueBudgetMs > 0 && next.waited > queueBudgetMs)) {
        refuse(res, next.refuse ? 'sustained' : 'queue_time', next.waited);
        continue;
      }
      if (held.length > 0) {
        scheduled = true;
        setImmediate(serveHeld);
      }
      for (const fn of listeners) fn.call(srv, req, res);
      return;
    }
  }

  return function holdRequest(req, res) {
    const now = Date.now();
    const start = shed.requestStartMs(req.headers['x-request-start']);
    if (held.arrive({ req, res }, start === null ? now : start, now)) {
      refuse(res, 'sustained', start === null ? 0 : now - start);
      return;
    }
    if (!scheduled) {
      scheduled = true;
      setImmediate(serveHeld);
    }
  };
}

// A shed request is logged as one `shed` line per reason at most every
// SHED_LOG_MS, with how many were shed since the last one: under overload there
// are thousands a second, and a line each would add to the load it reports.
const SHED_LOG_MS = 10_000;
const shedLogs = { queue_time: { count: 0, lastLog: 0 }, sustained: { count: 0, lastLog: 0 } };

/** Answer a request 503 before the app's handler (app/shed.js), count and log it. */
function refuse(res, reason, waitedMs) {
  const budgetMs = reason === 'sustained' ? settings.sustainedBudgetMs : settings.queueBudgetMs;
  if (meter) metrics.countShed(meter, reason);
  shed.answerShed(res, settings.shedRetryAfterS, budgetMs, reason, settings.sustainedAfterS);
  const shedLog = shedLogs[reason];
  shedLog.count += 1;
  const now = Date.now();
  if (now - shedLog.lastLog < SHED_LOG_MS) return;
  log('warn', 'shed', {
    reason,
    count: shedLog.count,
    waited_ms: Math.round(waitedMs),
    budget_ms: budgetMs,
    ...(reason === 'sustained' && { sustained_after_s: settings.sustainedAfterS }),
    fix: 'past capacity: add app workers (tunekit_app_workers) or hosts, or cut the cost per request; a larger budget only makes requests wait longer',
  });
  shedLog.count = 0;
  shedLog.lastLog = now;
}

/** After its current response, this connection closes gently (see above). */
function markClosing(socket) {
  if (socket.destroySoon === lingeringDestroySoon) return;
  socket.destroySoon = lingeringDestroySoon;
}

// Node's http server calls socket.destroySoon() after a response that closes.
function lingeringDestroySoon() {
  lingeringClose(this);
}

/**
 * Listen on a handle the primary bound and sent over IPC. For a TCP handle that is
 * the public server.listen(handle), which listens here without asking the cluster
 * primary. For a Pipe (Unix socket) handle Node 20 instead routes listen(handle)
 * through the cluster primary by fd number — an fd in the primary's table, not ours
 * — so we take the same two steps the TCP branch takes (net.js: `this._handle =
 * handle; listenInCluster(..., exclusive=true)` → `_listen2`). The handle came from
 * IPC and holds no path, so closing it never unlinks the socket file.
 */
function listenOnHandle(srv, handle, backlog, pipeName, onListening) {
  srv.once('listening', onListening);
  if (handle.constructor && handle.constructor.name === 'TCP') {
    checkTcpHandle(handle, settings.endpoint);
    srv.listen(handle, backlog);
    return;
  }
  // A Unix socket that is not bound cannot listen (EINVAL): it never gets a name of its own.
  srv._handle = handle;
  if (pipeName) srv._pipeName = pipeName; // what server.address() reports
  srv._listen2(null, -1, -1, backlog);
}

/**
 * One more descriptor of the listening socket, held by app/accepts.js and opened
 * while the worker's loop turns slowly: each descriptor accepts one connection per
 * turn, so N of them accept up to N. A connection accepted here is handed to the
 * server as Node documents for http.Server ('connection' emitted by the user): the
 * server's timeouts, request listeners and connection tracking all apply; the
 * socket counts on this acceptor, whose close() waits for it (drain).
 */
function acceptMore(handle) {
  if (!handle) return;
  if (draining || !server || !server.listening) {
    handle.close();
    return;
  }
  accepts.add(handle);
}

function acceptThrough(handle) {
  const acceptor = new net.Server();
  acceptor.on('connection', (socket) => server.emit('connection', socket));
  acceptor.on('error', (err) => fatal(err, 'server'));
  listenOnHandle(acceptor, handle, settings.backlog, null, () => {});
  return acceptor;
}

/**
 * Before listen() on a TCP handle from the primary: it must be bound where the
 * settings say (app/address.js handleFault). listen() on a socket whose bind failed
 * would bind it to a random port on every interface: refuse instead, loudly.
 */
function checkTcpHandle(handle, endpoint) {
  const fault = address.handleFault(handle, endpoint);
  if (!fault) return;
  const err = new Error(`refusing to listen on the socket handed over for ${endpoint.text}: ${fault}; listen() there would accept on an address nobody asked for`);
  err.code = 'ELISTENADDR';
  throw err;
}

/**
 * A listen the cluster primary refused (PM2's daemon, or Node's round-robin in the
 * runner's primary): one line naming the address, what holds it or what is
 * missing, and the fix; the worker exits 1 (PM2 decides whether to start it again).
 */
function listenRefused(err, s) {
  const listen = s.endpoint;
  const message = listen.kind === 'tcp' ? address.tcpBindFailure(listen, err.code)
    : err.code === 'EADDRINUSE' ? `unix:${listen.path} is already in use, ${address.unixHeldBy(listen.path)}: stop that process, or choose another socket path`
      : `cannot listen on ${listen.text}: ${err.code || err.message}`;
  if (managed) {
    // The runner's primary says it (a worker's error travels with its exit).
    fatal(Object.assign(new Error(message), { code: err.code }), 'listen');
    return;
  }
  log('error', 'listen-refused', { error: message, code: err.code });
  process.stderr.write(`tunekit: ${message}\n`);
  process.exit(1);
}

/** Where a server listening through a cluster primary accepts, as Node reports it (a listen string). */
function accepting(srv) {
  const at = srv.address();
  return typeof at === 'string' ? `unix:${at}` : at && address.listenText({ kind: 'tcp', address: at.address, port: at.port });
}

/** Listen the way a plain cluster worker does: the cluster primary binds and owns it. */
function listenThroughPrimary(srv, s, onListening) {
  const listen = s.endpoint;
  srv.once('listening', onListening);
  if (listen.kind === 'unix') {
    let p = listen.path;
    if (s.strategy === 'per-worker') {
      // PM2 numbers its instances from 0 (NODE_APP_INSTANCE); our sockets from 1.
      const slot = Number(process.env.TUNEKIT_SLOT || (Number(process.env.NODE_APP_INSTANCE || 0) + 1));
      p = `${p}.${slot}`;
    }
    srv.listen({ path: p, backlog: s.backlog });
  } else if (listen.kind === 'tcp') {
    srv.listen({ host: listen.host, port: listen.port, backlog: s.backlog });
  } else {
    throw new Error(`listen ${listen.text} needs the tunekit primary (app/cluster.js); under PM2 use unix: or tcp:`);
  }
}

// ---- telling the app ----------------------------------------------------------
//
// At the start of a drain the worker emits DRAIN_EVENT on `process`, with
// { timeoutMs }: the time left before it force-closes what is still open. The app
// ends what only it can end: a WebSocket with a close frame (1001, "going away"),
// an SSE stream or a long poll with the end of its response. On `process` because
// every module shape can reach it (a handler has no server object), and because a
// worker under the runner never sees the SIGTERM an app under plain Node or PM2
// would listen for: the primary asks its workers to drain over IPC.
const DRAIN_EVENT = 'tunekit:drain';

function tellApp(timeoutMs) {
  try {
    process.emit(DRAIN_EVENT, { timeoutMs });
  } catch (err) {
    // The drain goes on; the app's listener failing is its error to read.
    log('error', 'worker-error', { error: { ...describeError(err), where: DRAIN_EVENT } });
  }
}

/** While draining: a connection with no response open closes gently. */
function closeIfIdle(socket) {
  if (!openResponse(socket) && !socket[CLOSING]) lingeringClose(socket);
}

function drain() {
  if (draining) return;
  draining = true;
  if (!server || !server.listening) {
    process.exit(0);
    return;
  }
  const started = Date.now();
  // net's close, not http's: http.Server#close (Node >= 19) also destroys idle
  // keep-alive connections at once, racing a client that is sending its next
  // request on one. Stop accepting now, on every descriptor; the callback runs
  // once the last connection has closed (each counts where it was accepted).
  let open = 2;
  const closed = () => {
    if (--open > 0) return;
    if (!managed) log('info', 'worker-drained', { ms: Date.now() - started });
    process.exit(0);
  };
  net.Server.prototype.close.call(server, closed);
  accepts.end().then(closed);
  // Closing a connection the client may reuse races its next request (RFC 9112,
  // section 9.3.1): nginx sends it, reads the close, and answers 502 to a POST,
  // which it does not send again. So a connection is closed only when nginx knows
  // not to reuse it (its last answer said Connection: close) or when it has stayed
  // idle through a short grace: nginx reuses its most recently pooled connection
  // first, so one idle that long is the last it would pick.
  const grace = Math.min(500, Math.floor(settings.drainTimeoutMs / 4));
  for (const socket of sockets) {
    markClosing(socket);
    const res = openResponse(socket);
    if (!res) continue;
    // Not begun yet: its answer says Connection: close, and Node closes after it.
    if (!res.headersSent) res.setHeader('connection', 'close');
    // Begun before the drain (an SSE stream the app ends on tunekit:drain) and sent
    // keep-alive: nginx pools the connection again when it ends. Its next request
    // is answered (with Connection: close); none within the grace, it closes.
    else res.once('close', () => setTimeout(() => closeIfIdle(socket), grace).unref());
  }
  // Upgraded connections wait for the app only if it listens; else they go with the idle ones.
  const appCloses = process.listenerCount(DRAIN_EVENT) > 0;
  tellApp(settings.drainTimeoutMs);
  // Connections idle since before the drain: closed gently once the grace is over.
  setTimeout(() => {
    for (const socket of sockets) if (!(socket[UPGRADED] && appCloses)) closeIfIdle(socket);
  }, grace).unref();
  setTimeout(() => {
    const upgraded = [...sockets].filter((socket) => socket[UPGRADED]).length;
    log('warn', 'worker-drain-timeout', {
      ms: Date.now() - started,
      open: sockets.size,
      upgraded,
      fix: upgraded ? `close WebSockets on process.on('${DRAIN_EVENT}') with a close frame (1001); see app/README.md` : undefined,
    });
    for (const socket of sockets) socket.destroy();
    process.exit(0);
  }, settings.drainTimeoutMs).unref();
}

// ---- metrics ---------------------------------------------------------------------
//
// Under the kit's primary the primary serves the endpoint and asks each worker for
// its sample over IPC (MSG.METRICS); otherwise (PM2, on its own) the worker serves
// its own, instance I on the base port + I (app/metrics-server.js).

function metricsSample() {
  settleMeter();
  return metrics.sample(meter, metrics.infoOf(settings, release));
}

/** The worker's own endpoint (not managed): bound before the app listens, or a refusal. */
async function serveOwnMetrics() {
  const instance = Number(process.env.NODE_APP_INSTANCE || 0);
  const endpoint = instanceEndpoint(settings.metricsEndpoint, instance);
  const label = String(instance + 1);
  await listenMetrics(endpoint, () => metrics.render({ workers: [{ worker: label, pid: process.pid, sample: metricsSample() }] }));
  log('info', 'metrics-listen', { listen: endpoint.text, path: '/metrics', worker: label });
}

async function main() {
  settings = readSettings();
  process.env.TUNEKIT_WORKERS = String(settings.workers);
  if (settings.metrics) meter = metrics.createMeter({ loopResolutionMs: settings.metricsLoopResolutionMs });
  if (settings.metrics && !managed) await serveOwnMetrics();
  const app = await loadApp(settings.module);
  server = app.server;
  applyTimeouts(server, settings);
  installDispatcher(server);
  // A listen that fails (the cluster primary, PM2's daemon, could not bind: its error
  // comes as the listen's) is said in one line; any other server error is fatal.
  server.on('error', (err) => (!server.listening && ['bind', 'listen'].includes(err.syscall) ? listenRefused(err, settings) : fatal(err, 'server')));
  server.once('listening', serving);

  if (!managed) {
    listenThroughPrimary(server, settings, () => {
      // Confirmed before PM2 hears `ready`: the address Node reports is the one asked for.
      const at = server.address();
      if (settings.endpoint.kind === 'tcp' && !(at && address.atTcpEndpoint({ kind: 'tcp', ...at }, settings.endpoint))) {
        fatal(new Error(`the cluster primary listens on ${accepting(server)} for this worker, not on ${settings.listen} as asked`), 'listen');
        return;
      }
      log('info', 'listen', { listen: settings.listen, accepting: accepting(server), module: app.source, mode: cluster.isWorker ? 'foreign-primary' : 'standalone' });
      // PM2's wait_ready convention.
      if (typeof process.send === 'function') process.send(PM2_READY);
    });
    return;
  }

  process.on('message', (msg, handle) => {
    if (msg && msg.tunekit === MSG.ACCEPT_MORE) {
      acceptMore(handle);
      return;
    }
    if (!msg || typeof msg !== 'object' || msg.tunekit !== MSG.LISTEN || draining) return;
    const ready = () => process.send({ tunekit: MSG.LISTENING, source: app.source });
    try {
      if (msg.via === 'handle') listenOnHandle(server, handle, settings.backlog, msg.address, ready);
      else listenThroughPrimary(server, settings, ready);
    } catch (err) {
      fatal(err, 'listen');
    }
  });
  process.send({ tunekit: MSG.WANT_LISTEN });
}

// Before the app loads: a drain request may come at any time (a spare retired by a
// rolling restart, a stop during start-up); without a listener yet, drain exits.
process.on('SIGTERM', drain);
process.on('SIGINT', drain);
process.on('message', (msg) => {
  if (msg && msg.tunekit === MSG.DRAIN) drain();
  if (msg && msg.tunekit === MSG.METRICS && managed) {
    process.send({ tunekit: MSG.METRICS_SAMPLE, seq: msg.seq, sample: meter ? metricsSample() : null }, undefined, () => {});
  }
});

main().catch((err) => fatal(err, 'load'));
