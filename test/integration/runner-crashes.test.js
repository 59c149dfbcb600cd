'use strict';
// The crash policy with real workers: a route that throws outside its request
// kills the worker that takes it; once the app has proved it serves (a worker
// stayed up tunekit_app_min_uptime_ms after it listened), every dead worker is
// replaced and the runner keeps serving, and the error is logged once in full and
// then counted. An app that dies right after every start (a broken deploy) stops
// the cluster after tunekit_app_young_death_limit deaths, with one line.
// Through nginx, for a minute, at 2 crashes a second: test/faults/crash-storm.test.js.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { freePort } = require('../../lib/proc');
const crashRoute = require('../fixtures/runner/crash-route');

const APP = path.join(h.FIXTURES, 'crash-route.js');

// On TCP, as in the report (`--listen tcp:127.0.0.1:3007`).
const args = (port, extra = []) => [APP, '--listen', `tcp:127.0.0.1:${port}`, '--workers', '2', ...extra];

/** One GET on a new connection: { status } or { err }. */
function get(port, urlPath) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent: false, timeout: 15000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
    req.on('error', (err) => resolve({ err }));
  });
}

/** GET /crash: the worker that takes it dies, answering it (and any other open request) 500 on its way out. */
async function crash(port) {
  assert.deepEqual(await get(port, '/crash'), { status: 500 });
}

test('a route that throws outside its request, hit 6 times (the report): each dead worker is replaced, the runner keeps serving, the error is logged once in full and counted', async (t) => {
  const port = await freePort();
  const r = h.start(t, { args: args(port) });
  await r.ready();
  await r.waitFor('stable');
  const exits = [];
  for (let i = 0; i < 6; i++) {
    const after = r.events.length;
    await crash(port);
    exits.push(await r.waitFor('worker-exit', (e) => e.level === 'warn', h.READY_TIMEOUT_MS, { after }));
  }
  const res = await get(port, '/');
  assert.equal(res.status, 200, 'the cluster still serves');
  assert.equal(r.child.exitCode, null, 'the runner is still running');
  assert.deepEqual(r.events.filter((e) => e.event === 'crash-loop'), []);

  const [first, ...more] = r.events.filter((e) => e.event === 'worker-crash');
  assert.deepEqual(more, [], 'one worker-crash line for the one error');
  assert.equal(first.error.message, crashRoute.CRASH_MESSAGE);
  assert.ok(first.error.frames.some((f) => f.includes('crash-route.js')), `its frames name the app's file: ${first.error.frames}`);
  assert.deepEqual(exits.map((e) => e.crash), exits.map(() => first.crash), 'every exit names that error');

  // The repeats are counted and said when the runner stops (or every minute).
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  const summaries = r.events.filter((e) => e.event === 'crash-summary');
  assert.deepEqual(summaries.map((e) => [e.crash, e.count, e.total]), [[first.crash, 5, 6]]);
});

test('an app that dies right after every start (a broken deploy): tunekit_app_young_death_limit deaths stop the cluster, exit 1, one line naming the error', async (t) => {
  const port = await freePort();
  const r = h.start(t, { args: args(port), env: { CRASH_AFTER_LISTEN_MS: '50' } });
  const { code } = await r.exited;
  assert.equal(code, 1);
  assert.deepEqual(r.events.filter((e) => e.event === 'stable'), [], 'no worker stayed up tunekit_app_min_uptime_ms');
  const [loop, ...more] = r.events.filter((e) => e.event === 'crash-loop');
  assert.deepEqual(more, []);
  assert.equal(loop.deaths, 5, 'the definition\'s tunekit_app_young_death_limit');
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^tunekit: crash loop: 5 worker deaths and no worker stayed up 1000 ms after it listened .*Last worker error: Error: boom: the app died right after it started listening \(fixture crash-route\) \(at .*crash-route\.js:\d+:\d+\)/);
  assert.equal(r.events.filter((e) => e.event === 'worker-crash').length, 1, 'the error in full once');
});
