'use strict';
// What only the app knows, measured black-box over its socket or port, for an app
// that is not the kit's runner (whose /healthz says it): when it closes an idle
// keep-alive connection, and whether it still waits for a request whose headers
// never end. Two connections, one HEAD request, bounded by a time budget.
//
//   keep-alive: HEAD PATH, then the connection stays idle; the time from the
//     response's last byte to the app's FIN is its real idle close — Node's
//     server.keepAliveTimeout, plus server.keepAliveTimeoutBuffer where Node has
//     one (22.19 / 24.6: the socket closes at keepAliveTimeout + buffer). The
//     `Keep-Alive: timeout=N` hint Node sends is read too; when it names a close
//     past the budget the probe does not wait for it and says so.
//   headers: a request line and one header, never ended. Node answers 408 and
//     closes once headersTimeout has passed, checked every
//     connectionsCheckingInterval (30 s by default), so the close comes up to that
//     late; within the budget the probe only learns "not before T".
//
// Precision: the keep-alive close is timed to the millisecond on this host's
// clock, late by the app's event-loop delay at that moment; an answer the probe
// could not wait for is a lower bound ("still open after 15.0 s").
// https://nodejs.org/api/http.html#serverkeepalivetimeout
// https://nodejs.org/api/http.html#serverheaderstimeout

const net = require('node:net');

const BUDGET_MS = 15000;
const HEAD_BYTES_MAX = 64 * 1024;

/** A connection to the app: { socketPath } or { host, port }. */
function connect(target) {
  return target.socketPath ? net.connect({ path: target.socketPath }) : net.connect({ host: target.host, port: target.port });
}

function hostHeader(target) {
  return target.socketPath ? 'localhost' : `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
}

/**
 * The idle keep-alive close: { closedAfterMs } when the app closed within the
 * budget, else { openAfterMs }; with the response's status, its Connection and
 * Keep-Alive headers (hintS: the timeout=N it names, or null).
 */
function probeKeepAlive(target, { path = '/', budgetMs = BUDGET_MS } = {}) {
  return withConnection(target, (socket, done, after) => {
    let head = '';
    let answered = null; // { status, connection, hintS, at }
    socket.on('connect', () => {
      socket.write(`HEAD ${path} HTTP/1.1\r\nHost: ${hostHeader(target)}\r\nUser-Agent: tunekit-doctor-probe\r\n\r\n`);
    });
    socket.on('data', (chunk) => {
      if (answered) return; // a HEAD answer has no body: anything more is the server's own
      head += chunk;
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > HEAD_BYTES_MAX) done(null, new Error(`the answer to HEAD ${path} has no end of headers in ${HEAD_BYTES_MAX} bytes: not HTTP/1.1`));
        return;
      }
      answered = parseHead(head.slice(0, end), path);
      if (answered.error) return done(null, answered.error);
      answered.at = process.hrtime.bigint();
      if (answered.connection !== 'close' && answered.hintS != null && answered.hintS * 1000 > budgetMs) {
        return done({ ...describe(answered), openAfterMs: 0, notWaited: true });
      }
      after(budgetMs, () => done({ ...describe(answered), openAfterMs: elapsedMs(answered.at) }));
    });
    socket.on('end', () => {
      if (!answered) return done(null, new Error(`the app closed the connection before it answered HEAD ${path}`));
      done({ ...describe(answered), closedAfterMs: elapsedMs(answered.at) });
    });
    socket.on('error', (err) => {
      if (answered) done({ ...describe(answered), closedAfterMs: elapsedMs(answered.at), reset: err.code });
      else done(null, err);
    });
  });
}

/**
 * One probe's connection: run(socket, done, after) drives it; done(result, err)
 * ends it (the socket destroyed, the timer cleared), after(ms, fn) sets its one timer.
 */
function withConnection(target, run) {
  return new Promise((resolve, reject) => {
    const socket = connect(target);
    let timer = null;
    const done = (result, err) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(result);
    };
    const after = (ms, fn) => {
      clearTimeout(timer);
      timer = setTimeout(fn, ms);
    };
    socket.setEncoding('latin1');
    run(socket, done, after);
  });
}

/** A response head: { status, connection, hintS } or { error }. */
function parseHead(text, path) {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]);
  if (!m) return { error: new Error(`the answer to HEAD ${path} is not an HTTP/1.x response: ${JSON.stringify(lines[0].slice(0, 80))}`) };
  const headers = new Map();
  for (const line of lines.slice(1)) {
    const at = line.indexOf(':');
    if (at > 0) headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
  }
  const hint = /(?:^|,)\s*timeout=(\d+)/i.exec(headers.get('keep-alive') || '');
  const connection = (headers.get('connection') || (m[1] === '0' ? 'close' : 'keep-alive')).toLowerCase();
  return { status: Number(m[2]), connection, hintS: hint ? Number(hint[1]) : null };
}

function describe(a) {
  return { status: a.status, connection: a.connection, hintS: a.hintS };
}

function elapsedMs(since) {
  return Number(process.hrtime.bigint() - since) / 1e6;
}

/**
 * A request whose headers never end: { closedAfterMs, status } when the app gave
 * up on it within the budget (Node: 408), else { openAfterMs }.
 */
function probeHeaders(target, { path = '/', budgetMs = BUDGET_MS, enough = null } = {}) {
  return withConnection(target, (socket, done, after) => {
    let sentAt = null;
    let answer = '';
    socket.on('connect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostHeader(target)}\r\n`);
      sentAt = process.hrtime.bigint();
      const stop = () => done({ openAfterMs: elapsedMs(sentAt) });
      after(budgetMs, stop);
      // `enough` resolves with a wait (ms from now) past which a lower bound is all that is asked.
      if (enough) {
        enough.then((ms) => {
          if (ms != null && !socket.destroyed) after(ms, stop);
        }, () => {});
      }
    });
    socket.on('data', (chunk) => { answer += chunk; });
    const closed = () => {
      if (!sentAt) return done(null, new Error('the app closed the connection before the probe sent a byte'));
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(answer);
      done({ closedAfterMs: elapsedMs(sentAt), status: m ? Number(m[1]) : null });
    };
    socket.on('end', closed);
    socket.on('error', (err) => (sentAt ? closed() : done(null, err)));
  });
}

// How long the headers probe goes on once the idle close is known: the rule it
// serves (headersTimeout above the idle close) needs no more than a wait past it.
const PAST_IDLE_CLOSE_MS = 1000;

/**
 * Both probes at once (two connections): { keepAlive, headers, budgetMs }. Once
 * the app closed the idle connection, the headers probe stops PAST_IDLE_CLOSE_MS
 * later (a wait still going then is a lower bound above the idle close).
 */
async function probeApp(target, options = {}) {
  const budgetMs = options.budgetMs ?? BUDGET_MS;
  const keep = probeKeepAlive(target, { ...options, budgetMs });
  const enough = keep.then((k) => (k.closedAfterMs != null && k.connection !== 'close' ? PAST_IDLE_CLOSE_MS : null));
  const [keepAlive, headers] = await Promise.all([keep, probeHeaders(target, { ...options, budgetMs, enough })]);
  return { keepAlive, headers, budgetMs };
}

/** One line for a finding: "closed after 5.0 s", "still open after 15.0 s", "says timeout=65, not waited for". */
function say(result) {
  const s = (ms) => `${(ms / 1000).toFixed(1)} s`;
  if (result.notWaited) return `says Keep-Alive: timeout=${result.hintS}, past the probe's budget: not waited for`;
  if (result.closedAfterMs != null) return `closed after ${s(result.closedAfterMs)}`;
  return `still open after ${s(result.openAfterMs)}`;
}

module.exports = { probeApp, probeKeepAlive, probeHeaders, parseHead, say, BUDGET_MS };
