'use strict';
// The bodies load: GETs and POSTs with bodies of 0..64 KB over keep-alive
// connections, for restarts under load (nginx reloads, rolling restarts of the
// app under the runner, systemd or PM2). Every request carries an id
// (?id=lane-n); the hash app (test/fixtures/faults/hash-app.js) answers the
// sha256 of the body it read and writes down id and hash; the client checks the
// answer, and tally() checks the app's record. So a run proves what a user would
// notice: no body lost (every POST id reached the app), none corrupted (the
// app's hash is the client's), none twice.
//
// The client: an idempotent GET is retried once on a reset, on a new connection
// (test/faults/reload.test.js found that necessary on an nginx reload). A POST is
// retried once, with the same id, only when its connection was reset before any
// byte of the answer came back (nginx closed an idle keep-alive connection the
// request was sent on: nginx never read it); the id works as an idempotency key,
// and the app's record proves such a retry never made a duplicate.
//
// As a command (run inside a test's own container, against its loopback):
//   node test/faults/bodies.js URL MAX_SECONDS CONNECTIONS [SEEN_DIR [STOP_FILE]]
// runs until STOP_FILE exists or MAX_SECONDS (at most 120) have passed, and prints
// one JSON line: summary(), with the app's record from SEEN_DIR when given.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const crypto = require('node:crypto');
const { once, isReset } = require('./client');

const MAX_BODY = 64 * 1024;
const MAX_SECONDS = 120;

/** The sha256 the hash app answered; null for another answer (nginx's error page). */
function answeredHash(text) {
  try {
    return JSON.parse(text).sha256;
  } catch {
    return null;
  }
}

/**
 * `connections` lanes, one request at a time each, until stop() returns true.
 * `live.done` (when given) counts the requests finished so far, for a caller that
 * waits for the load to flow (flowing()).
 * @returns {Promise<object>} counts, and `sent`: POST id -> sha256 of its body
 */
async function load(url, stop, { connections = 12, live = {} } = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const c = { get: 0, post: 0, postBytes: 0, getRetried: 0, postRetried: 0, failed: 0, corrupted: 0, status: {}, errors: {}, sent: new Map() };
  live.done = 0;
  const lane = async (l) => {
    for (let n = 0; !stop(); n++) {
      const id = `${l}-${n}`;
      const post = n % 2 === 0;
      const body = post ? crypto.randomBytes(crypto.randomInt(0, MAX_BODY + 1)) : undefined;
      const sha256 = post ? crypto.createHash('sha256').update(body).digest('hex') : null;
      const target = `${url}?id=${id}`;
      if (post) { c.post += 1; c.postBytes += body.length; c.sent.set(id, sha256); } else c.get += 1;
      const what = { method: post ? 'POST' : 'GET', body };
      let r = await once(agent, target, what);
      if (r.err && isReset(r.err) && !r.answered) {
        c[post ? 'postRetried' : 'getRetried'] += 1;
        r = await once(false, target, what);
      }
      live.done += 1;
      if (r.err) {
        c.failed += 1;
        c.errors[r.err.code || r.err.message] = (c.errors[r.err.code || r.err.message] || 0) + 1;
        continue;
      }
      c.status[r.status] = (c.status[r.status] || 0) + 1;
      if (r.status !== 200) c.failed += 1;
      else if (post && answeredHash(r.text) !== sha256) c.corrupted += 1;
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, l) => lane(l)));
  agent.destroy();
  return c;
}

/**
 * Resolves once `n` more requests of a load (its `live` object) have finished than
 * had when called: the load is flowing, whatever the machine's speed. Throws
 * naming `what` after timeoutMs.
 */
function flowing(live, what, n, timeoutMs = 60_000) {
  // Required here: a booted test host gets test/faults without test/lib and runs
  // this file as a command, which never calls flowing().
  const { until } = require('../lib/util');
  const from = live.done;
  return until(`${n} requests of the load to finish ${what}`, () => live.done >= from + n, timeoutMs, 20);
}

/**
 * The load's counts, and what the app's record (the hash app's seen(): [{method,
 * url, sha256}]) says about the POSTs sent: lost, read wrong, or seen twice.
 */
function summary(c, seen) {
  const out = {
    get: c.get,
    post: c.post,
    postMiB: Number((c.postBytes / 1024 / 1024).toFixed(1)),
    getRetried: c.getRetried,
    postRetried: c.postRetried,
    failed: c.failed,
    corrupted: c.corrupted,
    status: c.status,
    errors: c.errors,
  };
  if (!seen) return out;
  const at = new Map();
  let duplicates = 0;
  for (const s of seen.filter((x) => x.method === 'POST')) {
    const id = new URL(s.url, 'http://x').searchParams.get('id');
    if (at.has(id)) duplicates += 1;
    at.set(id, s.sha256);
  }
  let lost = 0;
  let wrong = 0;
  for (const [id, sha256] of c.sent) {
    if (!at.has(id)) lost += 1;
    else if (at.get(id) !== sha256) wrong += 1;
  }
  return { ...out, seenPosts: at.size, lost, wrong, duplicates };
}

/**
 * What a user would notice, asserted: summary() with the app's record. `errorLog`,
 * nginx's error log as text when the test has it: a failure quotes its lines
 * (errorLines' `other`), which say why nginx answered 5xx.
 */
function assertWhole(c, label, errorLog = '') {
  assert.ok(c.post > 0 && c.get > 0, `${label}: GETs and POSTs were sent`);
  const said = errorLog ? errorLines(errorLog).other : [];
  assert.equal(c.failed, 0, `${label}: 0 failed requests: ${JSON.stringify({ status: c.status, errors: c.errors })}` +
    (said.length ? `; nginx's error log: ${said.slice(0, 5).join(' | ')}` : ''));
  assert.equal(c.corrupted, 0, `${label}: every POST answer carries the hash of the body sent`);
  assert.equal(c.lost, 0, `${label}: every POST body reached the app`);
  assert.equal(c.wrong, 0, `${label}: the app read every POST body whole`);
  assert.equal(c.duplicates, 0, `${label}: no POST reached the app twice (the retries were of requests nginx never read)`);
}

/**
 * nginx's error-log lines (text) apart from the one a body above
 * client_body_buffer_size writes at warn (it goes to a temp file: not a fault).
 * retriedGets: "upstream prematurely closed connection while reading response
 * header" for a GET. A worker that drains closes its idle pooled connections; when
 * nginx sends a request on one as it closes, the request crosses the close
 * (RFC 9112 section 9.3.1) and nginx sends it again on another connection
 * (proxy_next_upstream error): the client gets its answer, nginx logs the line.
 * A POST is not sent again: it would fail, and the load counts it.
 */
function errorLines(text) {
  const lines = text.split('\n').filter(Boolean);
  const isBuffered = (l) => /a client request body is buffered to a temporary file/.test(l);
  const isRetriedGet = (l) => /upstream prematurely closed connection while reading response header from upstream, .*request: "GET /.test(l);
  return {
    buffered: lines.filter(isBuffered).length,
    retriedGets: lines.filter(isRetriedGet).length,
    other: lines.filter((l) => !isBuffered(l) && !isRetriedGet(l)),
  };
}

/** summary()'s figures for the reliability table (docs/reliability.md). */
function figures(c) {
  const keep = ['get', 'post', 'postMiB', 'getRetried', 'postRetried', 'failed', 'lost', 'duplicates'];
  return { ...Object.fromEntries(keep.map((k) => [k, c[k]])), corrupted: c.corrupted + (c.wrong || 0) };
}

async function main([url, seconds, connections = '12', seenDir, stopFile]) {
  const host = url && new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) {
    throw new Error(`bodies.js only targets loopback, not ${host || '(no URL)'}: node test/faults/bodies.js http://127.0.0.1/ SECONDS [CONNECTIONS [SEEN_DIR [STOP_FILE]]]`);
  }
  const deadline = Date.now() + Math.min(Number(seconds) || 20, MAX_SECONDS) * 1000;
  let stopped = false;
  let checked = 0;
  const stop = () => {
    if (stopped || Date.now() > deadline) return true;
    if (stopFile && Date.now() - checked > 100) {
      checked = Date.now();
      stopped = fs.existsSync(stopFile);
    }
    return stopped;
  };
  const c = await load(url, stop, { connections: Number(connections) });
  const seen = seenDir ? require('../fixtures/faults/hash-app').seen(seenDir) : null;
  process.stdout.write(`${JSON.stringify(summary(c, seen))}\n`);
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}

module.exports = { load, flowing, summary, assertWhole, figures, errorLines, MAX_BODY };
