'use strict';
// The apps people run, under `tunekit run`: an ES module with top-level await is
// served by every worker; a module path given relative with --set is found from the
// directory the command ran in; a factory that never resolves is named, with the fix,
// and stops the runner after a few tries instead of restarting for ever.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('../fixtures/runner/harness');

const group = h.someGroup();

function args(sock, extra = [], workers = 2) {
  return ['--listen', `unix:${sock}`, '--workers', String(workers), '--socket-group', group.name, ...extra];
}

/** Requests on new connections until both workers have answered. */
async function bothWorkers(sock, check) {
  const pids = new Set();
  const { until } = require('../lib/util');
  await until('answers from both workers', async () => {
    const res = await h.request(sock);
    check(res);
    pids.add(res.json.pid);
    return pids.size === 2;
  });
  return pids;
}

test('an ES module with top-level await is served by both workers', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: [path.join(h.FIXTURES, 'top-level-await.mjs'), ...args(sock)] });
  await r.ready();
  await bothWorkers(sock, (res) => assert.equal(res.json.tla, true));
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null });
});

test('--set tunekit_app_module=RELATIVE loads the file from the current directory', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  fs.mkdirSync(path.join(dir, 'srv'));
  fs.copyFileSync(path.join(h.FIXTURES, 'top-level-await.mjs'), path.join(dir, 'srv', 'app.mjs'));
  const r = h.start(t, { cwd: dir, args: ['--set', 'tunekit_app_module=srv/app.mjs', ...args(sock)] });
  const started = await r.waitFor('start');
  assert.equal(started.module, path.join(dir, 'srv', 'app.mjs'));
  await r.ready();
  assert.equal((await h.request(sock)).json.tla, true);
});

test('a factory that never resolves: each start timeout says why and what to do; the runner stops after 3 in a row', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const module = path.join(h.FIXTURES, 'never-resolves.js');
  // One worker: its starts follow one another, so the count in a row is exact.
  const r = h.start(t, {
    args: [module, ...args(sock, ['--set', 'tunekit_app_start_timeout_ms=1000'], 1)],
  });
  const first = await r.waitFor('worker-start-timeout');
  assert.equal(first.ms, 1000);
  assert.equal(first.reason, 'the app module (its top-level await or its factory) did not resolve within tunekit_app_start_timeout_ms (1000 ms)');
  assert.match(first.fix, /^a factory must resolve to a handler or server; check for an await that never settles, e\.g\. a database connect/);
  const { code } = await r.exited;
  assert.equal(code, 1, 'stopped with a failure, so systemd (Restart=on-failure) and PM2 see it');
  const timeouts = r.events.filter((e) => e.event === 'worker-start-timeout');
  assert.deepEqual(timeouts.map((e) => e.in_a_row), [1, 2, 3]);
  const last = r.events.find((e) => e.event === 'start-timeout-limit');
  assert.ok(last, 'the final event says the runner gave up');
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], new RegExp(`^tunekit: 3 workers in a row did not start: the app module .* did not resolve within tunekit_app_start_timeout_ms \\(1000 ms\\); a factory must resolve to a handler or server; .* \\(stopping; the app module is ${module.replace(/[.]/g, '\\.')}\\)$`));
  assert.equal(r.events.at(-1).event, 'stop');
  assert.equal(fs.existsSync(sock), false, 'socket removed');
});
