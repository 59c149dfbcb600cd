'use strict';
// Restarts with bodies: nginx reloads (SIGHUP to its master) and rolling restarts
// of the app (SIGHUP to the runner's primary: one worker at a time is replaced,
// the old one drains) under a load of GETs and POSTs with bodies of 0..64 KB.
//
// Every request carries an id (?id=lane-n); the app (the hash app) writes down the
// id and the sha256 of each body it read, and answers the hash; the client checks
// it. So the test proves what a user would notice: no body lost (every POST id
// reached the app), none corrupted (the app's hash is the client's), none twice.
//
// The client: an idempotent GET is retried once on a reset, on a new connection
// (as test/faults/reload.test.js found necessary on an nginx reload). A POST is
// retried once, with the same id, only when its connection was reset before any
// byte of the answer came back (nginx closed an idle keep-alive connection the
// request was sent on: nginx never read it); the id works as an idempotency key,
// and the app's record proves such a retry never made a duplicate.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const crypto = require('node:crypto');
const { startHashStack, doctor, errorLog } = require('./stack');
const { record } = require('./report');
const { sleep, until } = require('../lib/util');

const NGINX_RELOADS = 6;
const APP_RELOADS = 3;
const CONNECTIONS = 12;
const MAX_BODY = 64 * 1024;

/** One request; {status, sha256} or {err, answered: whether any byte of a response came}. */
function once(agent, url, method, body) {
  return new Promise((resolve) => {
    let answered = false;
    const req = http.request(url, { agent, method, headers: body ? { 'content-type': 'application/octet-stream', 'content-length': body.length } : {} }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let sha256 = null;
        try { sha256 = JSON.parse(text).sha256; } catch { /* a non-JSON answer (nginx's error page) */ }
        resolve({ status: res.statusCode, sha256 });
      });
      res.on('error', (err) => resolve({ err, answered }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('client timeout 30 s')));
    req.on('error', (err) => resolve({ err, answered }));
    req.end(body);
  });
}

const isReset = (err) => err.code === 'ECONNRESET' || err.code === 'EPIPE' || /socket hang up/.test(err.message);

async function load(url, stop) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const c = { get: 0, post: 0, postBytes: 0, getRetried: 0, postRetried: 0, failed: 0, corrupted: 0, status: {}, errors: {}, sent: new Map() };
  const lane = async (l) => {
    for (let n = 0; !stop(); n++) {
      const id = `${l}-${n}`;
      const post = n % 2 === 0;
      const body = post ? crypto.randomBytes(crypto.randomInt(0, MAX_BODY + 1)) : undefined;
      const sha256 = post ? crypto.createHash('sha256').update(body).digest('hex') : null;
      const target = `${url}?id=${id}`;
      if (post) { c.post += 1; c.postBytes += body.length; c.sent.set(id, sha256); } else c.get += 1;
      let r = await once(agent, target, post ? 'POST' : 'GET', body);
      if (r.err && isReset(r.err) && !r.answered) {
        c[post ? 'postRetried' : 'getRetried'] += 1;
        r = await once(false, target, post ? 'POST' : 'GET', body);
      }
      if (r.err) {
        c.failed += 1;
        c.errors[r.err.code || r.err.message] = (c.errors[r.err.code || r.err.message] || 0) + 1;
        continue;
      }
      c.status[r.status] = (c.status[r.status] || 0) + 1;
      if (r.status !== 200) c.failed += 1;
      else if (post && r.sha256 !== sha256) c.corrupted += 1;
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, l) => lane(l)));
  agent.destroy();
  return c;
}

const appEvents = (stack, event) => fs.readFileSync(stack.appLogPath, 'utf8').split('\n')
  .filter((l) => l.startsWith('{') && JSON.parse(l).event === event).length;

test(`${NGINX_RELOADS} nginx reloads and ${APP_RELOADS} rolling restarts of the app under GETs and POSTs of 0..64 KB: no body lost, corrupted or duplicated`, { timeout: 180_000 }, async (t) => {
  const stack = await startHashStack(t, { workers: 2 });
  const nginxMaster = stack.pids().nginx[0];
  const primary = stack.pids().app[0];
  const workersBefore = stack.pids().app.slice(1);
  let done = false;
  const started = Date.now();
  const running = load(stack.url, () => done);
  // nginx, app, nginx, nginx, app, ...: each app restart waits for its reload-done.
  let nginxReloads = 0;
  let appReloads = 0;
  while (nginxReloads < NGINX_RELOADS || appReloads < APP_RELOADS) {
    await sleep(700);
    if (appReloads < APP_RELOADS && (nginxReloads >= NGINX_RELOADS || nginxReloads % 2 === 1)) {
      process.kill(primary, 'SIGHUP');
      appReloads += 1;
      await until(`the app's rolling restart ${appReloads} to be done`, () => appEvents(stack, 'reload-done') >= appReloads, 60_000, 50);
    } else {
      process.kill(nginxMaster, 'SIGHUP');
      nginxReloads += 1;
    }
  }
  await sleep(700);
  done = true;
  const c = await running;
  const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
  const workersAfter = stack.pids().app.slice(1);

  // What reached the app: each POST id with the hash of the body the app read.
  const seen = new Map();
  let duplicates = 0;
  for (const s of stack.seen().filter((x) => x.method === 'POST')) {
    const id = new URL(s.url, 'http://x').searchParams.get('id');
    if (seen.has(id)) duplicates += 1;
    seen.set(id, s.sha256);
  }
  let lost = 0;
  let wrong = 0;
  for (const [id, sha256] of c.sent) {
    if (!seen.has(id)) lost += 1;
    else if (seen.get(id) !== sha256) wrong += 1;
  }
  // A body above client_body_buffer_size goes to a temp file, logged at warn: not a fault.
  const logged = errorLog(stack);
  const buffered = logged.filter((l) => /a client request body is buffered to a temporary file/.test(l)).length;
  const other = logged.filter((l) => !/a client request body is buffered to a temporary file/.test(l));
  delete c.sent;
  const fails = doctor(stack).filter((f) => f.level === 'fail').map((f) => f.id);
  t.diagnostic(`${seconds} s: ${JSON.stringify(c)}; at the app: ${seen.size} POST ids, lost ${lost}, wrong ${wrong}, duplicates ${duplicates}; nginx error log: ${buffered} body-buffered lines, ${other.length} others ${JSON.stringify(other.slice(0, 2))}; doctor fails: ${JSON.stringify(fails)}`);

  assert.ok(workersAfter.every((p) => !workersBefore.includes(p)), `every app worker was replaced: ${workersBefore} -> ${workersAfter}`);
  assert.ok(c.post > 0 && c.get > 0, 'GETs and POSTs were sent');
  assert.equal(c.failed, 0, `0 failed requests: ${JSON.stringify({ status: c.status, errors: c.errors })}`);
  assert.equal(c.corrupted, 0, 'every POST answer carries the hash of the body sent');
  assert.equal(lost, 0, 'every POST body reached the app');
  assert.equal(wrong, 0, 'the app read every POST body whole');
  assert.equal(duplicates, 0, 'no POST reached the app twice (the retries were of requests nginx never read)');

  record('restart-bodies', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/restart-bodies.test.js',
    nginxReloads: NGINX_RELOADS,
    appReloads: APP_RELOADS,
    connections: CONNECTIONS,
    seconds,
    get: c.get,
    post: c.post,
    postMiB: Number((c.postBytes / 1024 / 1024).toFixed(1)),
    getRetried: c.getRetried,
    postRetried: c.postRetried,
    failed: c.failed,
    lost,
    corrupted: c.corrupted + wrong,
    duplicates,
    errorLogLevel: stack.vars.tunekit_nginx_error_log_level,
    errorLogBuffered: buffered,
    errorLogOther: other.length,
    doctorFails: fails,
  });
});
