'use strict';
// Acceptance 1 (and 6): 2 workers on a UDS, 200 requests reach both workers, for
// each strategy; an unchanged express app and a factory module are served.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { freePort } = require('../../lib/proc');

const group = h.someGroup();

function runArgs(sock, strategy, extra = []) {
  return ['--listen', `unix:${sock}`, '--workers', '2', '--strategy', strategy, '--socket-group', group.name, ...extra];
}

for (const strategy of ['shared', 'round-robin']) {
  test(`${strategy}: requests over the UDS reach both workers`, async (t) => {
    const dir = h.tmpDir(t);
    const sock = path.join(dir, 'app.sock');
    const r = h.start(t, { args: runArgs(sock, strategy) });
    const ready = await r.ready();
    assert.equal(ready.listen, `unix:${sock}`);
    assert.equal(ready.workers.length, 2);

    // Until both workers have answered (at most 30 s), not a count: with a shared
    // listener, a fast worker may take every connection of a short run.
    const results = await h.requestsUntil(sock, h.fromWorkers(2), { concurrency: 10 });
    assert.ok(results.every((res) => res.status === 200 && res.json.ok === true), 'every request answered 200 {"ok":true}');
    const pids = new Set(results.map((res) => res.json.pid));
    assert.deepEqual([...pids].sort(), [...ready.workers].sort(), `both workers served (saw ${[...pids]})`);
    const ids = new Set(results.map((res) => res.json.worker));
    assert.equal(ids.size, 2, 'two cluster worker ids');

    r.signal('SIGTERM');
    assert.deepEqual(await r.exited, { code: 0, signal: null });
    assert.equal(fs.existsSync(sock), false, 'socket removed on clean shutdown');
  });
}

test('per-worker: one socket per worker, PATH.1 and PATH.2, each served by its own worker', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: runArgs(sock, 'per-worker') });
  const ready = await r.ready();
  assert.deepEqual(ready.sockets, [`${sock}.1`, `${sock}.2`]);
  assert.equal(fs.existsSync(sock), false, 'no shared socket in per-worker mode');

  const seen = new Map();
  for (const p of ready.sockets) {
    const results = await h.requests(p, 100, { concurrency: 10 });
    assert.ok(results.every((res) => res.status === 200), `${p}: all 200`);
    const pids = new Set(results.map((res) => res.json.pid));
    assert.equal(pids.size, 1, `${p} is served by exactly one worker`);
    seen.set(p, [...pids][0]);
  }
  assert.deepEqual(new Set(seen.values()), new Set(ready.workers), 'the two sockets reach the two workers');

  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  for (const p of ready.sockets) assert.equal(fs.existsSync(p), false, `${p} removed`);
});

test('per-worker: a respawned worker takes the same PATH.N (nginx\'s server list stays valid)', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: runArgs(sock, 'per-worker') });
  await r.ready();
  const before = await h.request(`${sock}.2`);
  const inode = fs.statSync(`${sock}.2`).ino;
  process.kill(before.json.pid, 'SIGKILL');
  const respawned = await r.waitFor('worker-ready', (ev) => ev.slot === 2 && ev.worker_pid !== before.json.pid);
  const after = await h.request(`${sock}.2`);
  assert.equal(after.status, 200);
  assert.equal(after.json.pid, respawned.worker_pid, 'PATH.2 is served by the new worker of slot 2');
  assert.equal(fs.statSync(`${sock}.2`).ino, inode, 'same socket file: the dead worker did not unlink it');
});

test('tcp: shared strategy on 127.0.0.1', async (t) => {
  const port = await freePort();
  const r = h.start(t, { args: ['--listen', `tcp:127.0.0.1:${port}`, '--workers', '2'] });
  const ready = await r.ready();
  const http = require('node:http');
  const pids = new Set();
  for (let i = 0; i < 40; i++) {
    const body = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
        let b = '';
        res.on('data', (d) => { b += d; });
        res.on('end', () => resolve(JSON.parse(b)));
      }).on('error', reject);
    });
    pids.add(body.pid);
  }
  assert.ok([...pids].every((p) => ready.workers.includes(p)));
});

test('an unchanged express app from node_modules: tunekit run app.js', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const app = path.join(h.FIXTURES, 'express-app.js');
  const r = h.start(t, { args: [app, ...runArgs(sock, 'shared')] });
  await r.ready();
  const res = await h.request(sock, '/hello/nginx');
  assert.equal(res.status, 200);
  assert.equal(res.headers['x-powered-by'], 'Express');
  assert.equal(res.json.hello, 'nginx');
  assert.equal(res.json.framework, 'express');
  const missing = await h.request(sock, '/nope');
  assert.equal(missing.status, 404);
  const started = r.events.find((ev) => ev.event === 'worker-ready');
  assert.equal(started.module, app);
});

test('a factory module returning a promise of an http.Server', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: [path.join(h.FIXTURES, 'factory-app.js'), ...runArgs(sock, 'shared')] });
  await r.ready();
  const res = await h.request(sock, '/');
  assert.equal(res.status, 200);
  assert.equal(res.json.factory, true);
});

test('example app /healthz reports the timeouts the live server has, from the one definition', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const config = require('../../lib/config');
  const expected = config.appSettings(config.resolve({}));
  const r = h.start(t, { args: runArgs(sock, 'shared') });
  await r.ready();
  const res = await h.request(sock, '/healthz');
  assert.equal(res.status, 200);
  assert.equal(res.json.ok, true);
  assert.equal(res.json.workers, 2);
  assert.equal(res.json.keepAliveTimeout, expected.keepAliveTimeoutMs);
  assert.equal(res.json.headersTimeout, expected.headersTimeoutMs);
  assert.equal(res.json.requestTimeout, expected.requestTimeoutMs);
  assert.ok(res.json.keepAliveTimeout > 60000, 'above nginx\'s upstream keepalive_timeout (60 s)');
});

