'use strict';
// The two halves of the rollout's health gate, on this machine (the fleet
// rollout itself runs in test/e2e/ansible-site.test.js):
// - the runner sends the release file next to it (INSTALL_DIR/release, written
//   by the Ansible role) as X-Tunekit-Release and $TUNEKIT_RELEASE, each worker
//   the one it started with: after a rolling reload, the new one;
// - roles/tunekit_rollout/files/health-gate.js, against a loopback server: N
//   2xx in a row with the release, and what it reports when it does not get them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { runCommand } = require('../lib/util');

const GATE = path.join(h.ROOT, 'roles/tunekit_rollout/files/health-gate.js');

/** The runner from a copy of app/ in `dir`, as the role lays it out (INSTALL_DIR/app/). */
async function startCopy(t, dir, workers) {
  fs.cpSync(path.join(h.ROOT, 'app'), path.join(dir, 'app'), { recursive: true });
  const sock = path.join(dir, 'app.sock');
  const config = h.writeConfig(dir, { listen: `unix:${sock}`, workers });
  const r = h.start(t, { via: 'argv', argv: [process.execPath, path.join(dir, 'app/cluster.js'), '--config', config] });
  await r.ready();
  return { r, sock };
}

test('the runner sends the deployed release on every response; a rolling reload switches it, worker by worker', async (t) => {
  const dir = h.tmpDir(t);
  fs.writeFileSync(path.join(dir, 'release'), '0123abcd\n');
  const { r, sock } = await startCopy(t, dir, 2);
  for (const res of await h.requests(sock, 10, { concurrency: 2 })) {
    assert.equal(res.status, 200);
    assert.equal(res.headers['x-tunekit-release'], '0123abcd');
  }
  fs.writeFileSync(path.join(dir, 'release'), '4567ef01\n');
  const after = r.events.length;
  r.signal('SIGHUP');
  await r.waitFor('reload-done', () => true, h.READY_TIMEOUT_MS, { after });
  const releases = new Set((await h.requests(sock, 10, { concurrency: 2 })).map((res) => res.headers['x-tunekit-release']));
  assert.deepEqual([...releases], ['4567ef01'], 'a worker still reports the old release after the reload');
});

test('no release file: no header', async (t) => {
  const { sock } = await startCopy(t, h.tmpDir(t), 1);
  const res = await h.request(sock, '/');
  assert.equal(res.status, 200);
  assert.equal(res.headers['x-tunekit-release'], undefined);
});

/** A loopback server answering from `answers` in turn (the last one repeats). */
async function serve(t, answers) {
  let n = 0;
  const server = http.createServer((req, res) => {
    const a = answers[Math.min(n++, answers.length - 1)];
    res.writeHead(a.status, a.release ? { 'x-tunekit-release': a.release } : {});
    res.end(`answer ${n}`);
  });
  await new Promise((done) => server.listen(0, '127.0.0.1', done));
  t.after(() => server.close());
  return `http://127.0.0.1:${server.address().port}/healthz`;
}

async function gate(opts) {
  const r = await runCommand(process.execPath, [GATE, JSON.stringify({ host: 'localhost', ...opts })], { timeoutMs: 30000 });
  assert.equal(r.code, 0, r.out);
  return JSON.parse(r.out.trim().split('\n').pop());
}

test('gate: passes after COUNT 2xx in a row with the release, a miss starting the count again', async (t) => {
  const url = await serve(t, [{ status: 502 }, { status: 200, release: 'new' }, { status: 200, release: 'old' }, { status: 200, release: 'new' }]);
  const res = await gate({ url, count: 3, timeout: 20, release: 'new' });
  assert.equal(res.ok, true, JSON.stringify(res));
  assert.equal(res.probes, 6, 'one 502, one new, one old (the run starts again), then three new');
});

test('gate: the old release answering 200 fails it, naming the release seen', async (t) => {
  const url = await serve(t, [{ status: 200, release: 'old' }]);
  const res = await gate({ url, count: 2, timeout: 1, release: 'new' });
  assert.equal(res.ok, false);
  assert.equal(res.best, 0);
  assert.deepEqual({ status: res.last.status, release: res.last.release }, { status: 200, release: 'old' });
});

test('gate: without a release to check, status codes alone; 503s fail it with the status seen', async (t) => {
  assert.equal((await gate({ url: await serve(t, [{ status: 204 }]), count: 2, timeout: 5, release: '' })).ok, true);
  const res = await gate({ url: await serve(t, [{ status: 200 }, { status: 503 }]), count: 2, timeout: 1, release: '' });
  assert.equal(res.ok, false);
  assert.equal(res.best, 1);
  assert.equal(res.last.status, 503);
  assert.match(res.last.body, /^answer \d+$/);
});

test('gate: nothing listening fails it with the connection error', async () => {
  // A port that was free a moment ago (bound, then closed).
  const srv = http.createServer();
  await new Promise((done) => srv.listen(0, '127.0.0.1', done));
  const free = srv.address().port;
  await new Promise((done) => srv.close(done));
  const res = await gate({ url: `http://127.0.0.1:${free}/healthz`, count: 1, timeout: 1, release: '' });
  assert.equal(res.ok, false);
  assert.equal(res.last.status, null);
  assert.match(res.last.error, /ECONNREFUSED/);
});
