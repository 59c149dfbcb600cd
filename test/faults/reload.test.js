'use strict';
// nginx reloads under load. On a reload (SIGHUP to the master) the old workers
// close their idle client keep-alive connections; a client that sends on one at
// that moment gets a reset (nginx cannot answer on a connection it already
// closed).
//
// Measured here: a client that retries an idempotent request once on a reset of a
// *reused* connection (Node's req.reusedSocket, as the http docs advise) still
// loses a few requests: an old worker also resets a *fresh* connection it had
// accepted before the reload but not yet read. A client that retries an
// idempotent request once on any reset, on a new connection, loses none.
//
// The three clients run at the same time against the same reloads. Counts are
// asserted, the figures recorded (report.js), timings never asserted.
// TUNEKIT_FAULTS_SET=k=v,k=v overrides variables of the stack (for A/B runs);
// TUNEKIT_FAULTS_NGINX_MAIN='directive;' adds a directive the kit has no variable
// for to nginx.conf's main context (a trial, e.g. worker_shutdown_timeout 5s;),
// checked with nginx -t and loaded before the measured reloads.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { startStack } = require('../../lib/stack');
const { nginxBinary } = require('../../lib/nginx');
const { alive } = require('../../lib/proc');
const client = require('./client');
const { record } = require('./report');
const { until } = require('../lib/util');

const RELOADS = 20;
const INTERVAL_MS = 1500; // the scenario's pace (a reload every 1.5 s under the load), not a wait for an event
const CONNECTIONS = 24;

async function underReloads(stack) {
  const master = stack.pids().nginx[0];
  let done = false;
  const stop = () => done;
  const started = Date.now();
  const raw = client.run({ url: stack.url, connections: CONNECTIONS, stop });
  const reused = client.run({ url: stack.url, connections: CONNECTIONS, stop, retry: 'reused' });
  const any = client.run({ url: stack.url, connections: CONNECTIONS, stop, retry: 'any' });
  for (let i = 0; i < RELOADS; i++) {
    await new Promise((res) => setTimeout(res, INTERVAL_MS));
    process.kill(master, 'SIGHUP');
  }
  await new Promise((res) => setTimeout(res, INTERVAL_MS));
  done = true;
  const [a, b, c] = await Promise.all([raw, reused, any]);
  return { raw: a, reused: b, any: c, seconds: (Date.now() - started) / 1000, master };
}

/** Append a main-context directive to the stack's nginx.conf, check it, reload, wait for the old workers to go. */
async function addMainDirective(stack, directive) {
  const conf = path.join(stack.renderDir, 'etc/nginx/nginx.conf');
  fs.appendFileSync(conf, `\n# trial (test/faults/reload.test.js)\n${directive}\n`);
  execFileSync(nginxBinary(), ['-t', '-q', '-c', conf], { stdio: ['ignore', 'ignore', 'inherit'] });
  const before = stack.pids().nginx.slice(1);
  process.kill(stack.pids().nginx[0], 'SIGHUP');
  await until(`nginx's old workers ${before} to exit after the reload that added "${directive}"`,
    () => !stack.pids().nginx.slice(1).some((p) => before.includes(p)));
}

test(`${RELOADS} nginx reloads under load: a client retrying idempotent requests once on a reset fails 0`, { timeout: 180_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2, set: (process.env.TUNEKIT_FAULTS_SET || '').split(',').filter(Boolean) });
  t.after(async () => {
    const pids = stack.pids();
    await stack.stop();
    for (const pid of [...pids.nginx, ...pids.app]) assert.ok(!alive(pid), `process ${pid} is left running`);
  });
  const main = process.env.TUNEKIT_FAULTS_NGINX_MAIN || '';
  if (main) await addMainDirective(stack, main);
  const r = await underReloads(stack);
  assert.ok(alive(r.master), 'nginx master survived the reloads');
  t.diagnostic(`${r.seconds.toFixed(1)} s, ${RELOADS} reloads; non-retrying: ${JSON.stringify(r.raw)}`);
  t.diagnostic(`retry on reused: ${JSON.stringify(r.reused)}`);
  t.diagnostic(`retry on any reset: ${JSON.stringify(r.any)}`);

  for (const c of [r.raw, r.reused, r.any]) {
    assert.ok(c.requests > 0, 'every client sent requests');
    // What a client loses on reload is resets only: nginx answers no 5xx.
    assert.deepEqual(Object.keys(c.status), ['200']);
    assert.deepEqual(Object.keys(c.errors).filter((e) => e !== 'ECONNRESET'), []);
  }
  assert.equal(r.raw.failed, r.raw.resets, 'every failure of the non-retrying client is a reset');
  assert.equal(r.reused.failed, r.reused.resets - r.reused.resetsOnReused, 'retrying on a reused connection leaves only the resets of fresh ones');
  assert.equal(r.any.failed, 0, 'retrying once on any reset fails no request');

  const logged = fs.readFileSync(stack.errorLogPath, 'utf8').split('\n').filter(Boolean);
  t.diagnostic(`nginx error log (level ${stack.vars.tunekit_nginx_error_log_level}): ${logged.length} lines`);
  const set = process.env.TUNEKIT_FAULTS_SET || '';
  const trial = [set, main].filter(Boolean).join(', ');
  record(trial ? `reload ${trial}` : 'reload', {
    command: `${set ? `TUNEKIT_FAULTS_SET=${set} ` : ''}${main ? `TUNEKIT_FAULTS_NGINX_MAIN='${main}' ` : ''}TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/reload.test.js`,
    reloads: RELOADS,
    errorLogLevel: stack.vars.tunekit_nginx_error_log_level,
    errorLogLines: logged.length,
    errorLogSample: logged.slice(0, 2),
    seconds: Number(r.seconds.toFixed(1)),
    connectionsPerClient: CONNECTIONS,
    raw: { requests: r.raw.requests, resets: r.raw.resets, failed: r.raw.failed },
    retryReused: { requests: r.reused.requests, resets: r.reused.resets, resetsOfFresh: r.reused.resets - r.reused.resetsOnReused, retried: r.reused.retried, failed: r.reused.failed },
    retryAny: { requests: r.any.requests, resets: r.any.resets, retried: r.any.retried, failed: r.any.failed },
  });
});
