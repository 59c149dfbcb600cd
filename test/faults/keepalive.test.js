'use strict';
// The keep-alive race between nginx's upstream pool and the app, reproduced.
//
// nginx keeps idle upstream connections for keepalive_timeout (60 s); if the app
// closes an idle connection first, a request nginx writes on it at that moment is
// lost: nginx reads a reset (or EOF) instead of a response. nginx retries an
// idempotent request on another connection, but not a POST (proxy_next_upstream:
// "a request with a non-idempotent method is not passed to the next server"),
// which the client gets as a 502.
//
// The inverted set (app keepAliveTimeout 1 s below nginx's 60 s) is one
// `tunekit render` refuses (the keepalive-race rule), so this test makes it the way a hand edit
// would on a host: the rendered app.json is rewritten before the runner starts
// (startStack's test-only beforeStart), and only the runner's own checks apply.
//
// The load: rounds of POSTs, each round's gap straddling the moment the app closes
// its idle connections. Node closes an idle connection keepAliveTimeout + 1 s
// after the last response (Node adds a fixed 1 s buffer:
// https://github.com/nodejs/node/blob/v20.x/lib/_http_server.js,
// HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER), and on loopback nginx drops a pooled
// connection as soon as it sees the close, so the race window of an idle app is
// microseconds (a paced load alone hit it once in 96 POSTs here). It opens wide
// when the app is busy at that moment: a CPU-bound request blocks the worker
// across its close time; the POSTs nginx writes meanwhile wait unread, and when
// the worker runs again its expired keep-alive timers close those connections
// with the requests unread (libuv runs timers before it reads), so nginx reads
// ECONNRESET. One app worker, so the busy request blocks the worker that holds
// the pooled connections. The same load against the kit's derived timeouts (the
// app waits 65 s, above nginx's 60 s): 0 failed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const crypto = require('node:crypto');
const { startHashStack, doctor, errorLog } = require('./stack');
const { record } = require('./report');
const { sleep } = require('../lib/util');

const APP_KEEPALIVE_MS = 1000;
const NODE_BUFFER_MS = 1000; // Node closes an idle connection keepAliveTimeout + 1 s after its last response
const LANES = 8; // POSTs at once: one pooled upstream connection each
const ROUNDS = 5; // at least: one round per gap in pacedLoad's `after`
const MAX_LOAD_MS = 60_000; // the inverted load's bound should no POST ever be lost
const BUSY_MS = 300; // the CPU-bound request, centred on the app's close time
const RACE_LOG = /upstream prematurely closed connection|recv\(\) failed \(104: Connection reset by peer\)|writev?\(\) failed \(32: Broken pipe\)/;


function send(agent, url, method, body) {
  return new Promise((resolve) => {
    const req = http.request(url, { agent, method, headers: body ? { 'content-length': body.length } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('client timeout 30 s')));
    req.on('error', (err) => resolve(err.code || err.message));
    req.end(body);
  });
}

/**
 * Rounds of: LANES POSTs at once (filling nginx's pool), then, after a gap that
 * ends just past the app's close time, LANES POSTs and LANES GETs at once, while a
 * CPU-bound GET holds the app's worker across that close time. `rounds` of them;
 * with `untilLost`, at least that many and on until a POST was lost (502), or
 * MAX_LOAD_MS: the event the inverted set is tested for, not a count, ends its load.
 */
async function pacedLoad(stack, { rounds, untilLost = false }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 * LANES + 1 });
  const closeAt = APP_KEEPALIVE_MS + NODE_BUFFER_MS;
  const post = { status: {}, sent: 0 };
  const get = { status: {}, sent: 0 };
  const count = (c, s) => { c.sent += 1; c.status[s] = (c.status[s] || 0) + 1; };
  // Where the POSTs go relative to the close time varies per round (ms), so they
  // straddle it; all of them fall inside the busy request's block.
  const after = [-60, -20, 20, 60, 100];
  const started = Date.now();
  const more = (i) => i < rounds || (untilLost && !post.status[502] && Date.now() - started < MAX_LOAD_MS);
  let i = 0;
  for (; more(i); i++) {
    const body = () => crypto.randomBytes(1024);
    for (const s of await Promise.all(Array.from({ length: LANES }, () => send(agent, stack.url, 'POST', body())))) count(post, s);
    await sleep(closeAt - BUSY_MS / 2);
    const busy = send(agent, `${stack.url}?busy_ms=${BUSY_MS}`, 'GET');
    await sleep(BUSY_MS / 2 + after[i % after.length]);
    const [posts, gets] = await Promise.all([
      Promise.all(Array.from({ length: LANES }, () => send(agent, stack.url, 'POST', body()))),
      Promise.all(Array.from({ length: LANES }, () => send(agent, stack.url, 'GET'))),
    ]);
    for (const s of posts) count(post, s);
    for (const s of gets) count(get, s);
    count(get, await busy);
  }
  agent.destroy();
  return { post, get, rounds: i };
}

/** The fault: fields of a rendered app.json changed by hand, past the render's checks. */
function handEdit(appJson, fields) {
  fs.writeFileSync(appJson, `${JSON.stringify({ ...JSON.parse(fs.readFileSync(appJson, 'utf8')), ...fields }, null, 2)}\n`);
}

// The inverted set's load runs until a POST is lost; the kit's set gets as many rounds.
async function run(t, inverted, rounds) {
  const stack = await startHashStack(t, {
    workers: 1,
    ...(inverted && { beforeStart: (vars) => handEdit(vars.tunekit_app_config_path, { keepAliveTimeoutMs: APP_KEEPALIVE_MS, headersTimeoutMs: APP_KEEPALIVE_MS + 1000 }) }),
  });
  const started = Date.now();
  const load = await pacedLoad(stack, { rounds, untilLost: inverted });
  const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
  const lines = errorLog(stack).filter((l) => RACE_LOG.test(l));
  const kinds = {};
  for (const l of lines) {
    const kind = l.match(RACE_LOG)[0];
    kinds[kind] = (kinds[kind] || 0) + 1;
  }
  const race = doctor(stack).find((f) => f.id === 'keepalive-race');
  t.diagnostic(`${inverted ? 'inverted' : 'kit'}: ${load.rounds} rounds, ${seconds} s; POST ${JSON.stringify(load.post)}; GET ${JSON.stringify(load.get)}; nginx: ${JSON.stringify(kinds)}; doctor: ${race && `${race.level}: ${race.what}`}`);
  return { stack, load, seconds, kinds, lines, race };
}

test('keep-alive race: app keepAliveTimeout 1 s under nginx\'s 60 s gives 502s to POSTs; the kit\'s derived timeouts give none', { timeout: 240_000 }, async (t) => {
  const bad = await run(t, true, ROUNDS);
  const good = await run(t, false, bad.load.rounds);

  const failed = (c) => c.sent - (c.status[200] || 0);
  // Inverted: POSTs are lost (502, never retried by nginx), each with its line in nginx's error log.
  assert.ok(bad.load.post.status[502] > 0, `the inverted set gave 502s to POSTs: ${JSON.stringify(bad.load.post)}`);
  assert.deepEqual(Object.keys(bad.load.post.status).filter((s) => s !== '200' && s !== '502'), [], 'a lost POST is a 502, nothing else');
  assert.ok(bad.lines.length >= bad.load.post.status[502], `nginx logged each lost request (${bad.lines.length} lines for ${bad.load.post.status[502]} 502s)`);
  assert.equal(bad.race.level, 'fail', 'doctor names the inversion');
  assert.match(bad.race.what, new RegExp(`app keepAliveTimeout ${APP_KEEPALIVE_MS} ms \\(live /healthz\\)`));
  assert.match(bad.race.what, /recv\(\) failed \(104: Connection reset by peer\)/, 'doctor names the line nginx logs on a Unix socket');
  // The kit's set, same load: nothing lost, nothing logged.
  assert.equal(failed(good.load.post), 0, `kit's timeouts: 0 failed POSTs: ${JSON.stringify(good.load.post)}`);
  assert.equal(failed(good.load.get), 0, `kit's timeouts: 0 failed GETs: ${JSON.stringify(good.load.get)}`);
  assert.equal(good.lines.length, 0, 'kit\'s timeouts: no race line in nginx\'s error log');
  assert.equal(good.race.level, 'ok');

  record('keepalive-race', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/keepalive.test.js',
    rounds: bad.load.rounds,
    lanes: LANES,
    busyMs: BUSY_MS,
    appKeepAliveMs: APP_KEEPALIVE_MS,
    nginxKeepAliveS: bad.stack.vars.tunekit_nginx_upstream_keepalive_timeout_s,
    kitAppKeepAliveMs: good.stack.vars.tunekit_app_keepalive_timeout_ms,
    inverted: { post: bad.load.post, get: bad.load.get, nginx: bad.kinds, seconds: bad.seconds },
    kit: { post: good.load.post, get: good.load.get, nginxLines: good.lines.length, seconds: good.seconds },
    nginxSample: bad.lines[0] ? bad.lines[0].replace(/^.*?\[error\] \d+#\d+: \*\d+ /, '').replace(/, client:.*$/, '') : null,
    doctor: bad.race.what,
    fix: bad.race.fix,
  });
});
