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
// The load (race-load.js): rounds of POSTs, each round's gap straddling the moment
// the app closes its idle connections, while a CPU-bound request blocks the app's
// only worker across its close time. Node closes an idle connection keepAliveTimeout
// + 1 s after the last response (Node 20.18+ and 22.9+ add a 1 s buffer,
// https://github.com/nodejs/node/pull/54863; server.keepAliveTimeoutBuffer from
// 22.19 / 24.6). One app worker, so the busy request blocks the worker that holds
// the pooled connections. The same load against the kit's derived timeouts (the
// app waits 65 s, above nginx's 60 s): 0 failed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startHashStack, doctor, errorLog } = require('./stack');
const { record } = require('./report');
const { pacedLoad, LANES, BUSY_MS, RACE_LOG } = require('./race-load');

const APP_KEEPALIVE_MS = 1000;
const NODE_BUFFER_MS = 1000; // Node closes an idle connection keepAliveTimeout + 1 s after its last response
const ROUNDS = 5; // at least: one round per gap of race-load's AFTER

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
  const load = await pacedLoad(stack.url, { closeAtMs: APP_KEEPALIVE_MS + NODE_BUFFER_MS, rounds, untilLost: inverted });
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
