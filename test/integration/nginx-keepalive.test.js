'use strict';
// Through the rendered nginx on a UDS, upstream keep-alive is really used, counted
// at the app: each app worker counts the connections it accepts.
//
// The invariant: an nginx worker opens an upstream connection only when none of
// its pooled ones is idle, and closes pooled ones only when more than `keepalive`
// sit idle (or after keepalive_requests / keepalive_timeout, far away here). A
// client connection carries one request at a time, so an nginx worker never has
// more requests in flight than it has client connections. With C client
// connections, C <= keepalive, the pool never overflows, and the upstream
// connections opened during the run are at most C — across all nginx workers,
// whatever way the kernel spreads the C connections over them (so also at most
// keepalive x nginx workers). The stock profile, for contrast, opens one per request.
//
// A WebSocket handshake and echo pass through the same location.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');
const WebSocket = require('ws');
const { startStack } = require('../../lib/stack');

const FIXTURE = path.join(__dirname, '../fixtures/nginx/counting-app.js');
const REQUESTS = 2000;
const CLIENTS = 16;

function countDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-count-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function totalConnections(dir) {
  return fs.readdirSync(dir).reduce((sum, f) => sum + Number(fs.readFileSync(path.join(dir, f), 'utf8')), 0);
}

async function burst(url) {
  const result = await autocannon({ url, connections: CLIENTS, amount: REQUESTS, pipelining: 1, timeout: 30 });
  assert.equal(result.errors, 0, 'no connection errors');
  assert.equal(result.timeouts, 0, 'no timeouts');
  assert.equal(result.non2xx, 0, 'every answer 2xx');
  assert.ok(result.requests.sent >= REQUESTS, `sent ${result.requests.sent}`);
  return result;
}

function wsEcho(url, message) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => { ws.terminate(); reject(new Error('no echo within 10 s')); }, 10000);
    ws.on('open', () => ws.send(message));
    ws.on('message', (data) => {
      clearTimeout(timer);
      ws.close();
      resolve(data.toString());
    });
    ws.on('unexpected-response', (req, res) => { clearTimeout(timer); reject(new Error(`handshake answered HTTP ${res.statusCode}`)); });
    ws.on('error', (err) => { clearTimeout(timer); reject(err); });
  });
}

test('UDS: 2,000 requests open no more upstream connections than there are clients (<= pool)', { timeout: 180_000 }, async (t) => {
  const dir = countDir(t);
  const stack = await startStack({ upstream: 'uds', workers: 2, module: FIXTURE, env: { COUNT_DIR: dir } });
  t.after(() => stack.stop());
  const pool = stack.vars.tunekit_nginx_upstream_keepalive;
  const nginxWorkers = stack.pids().nginx.length - 1;
  assert.ok(CLIENTS <= pool, `the test needs ${CLIENTS} clients within the pool of ${pool}`);
  assert.equal(stack.appListen, `unix:${stack.socketPath}`);

  const before = totalConnections(dir);
  await burst(stack.url);
  const opened = totalConnections(dir) - before;
  t.diagnostic(`${REQUESTS} requests, ${CLIENTS} clients, pool ${pool} x ${nginxWorkers} nginx workers: ${opened} upstream connections opened`);
  assert.ok(opened >= 1, 'the app counted the connections nginx opened');
  assert.ok(opened <= CLIENTS, `opened ${opened} upstream connections for ${CLIENTS} clients`);
  assert.ok(opened <= pool * nginxWorkers);
  assert.ok(opened * 20 < REQUESTS, 'far below one per request');

  // WebSocket through the same location: Upgrade/Connection pass, echo comes back.
  const wsUrl = stack.url.replace(/^http/, 'ws') + 'ws';
  assert.equal(await wsEcho(wsUrl, 'hello through nginx'), 'hello through nginx');
  // A plain request after the upgrade still works (the map sent "" for it).
  const res = await fetch(stack.url);
  assert.equal(res.status, 200);

  const errors = fs.readFileSync(stack.errorLogPath, 'utf8');
  assert.doesNotMatch(errors, /upstream prematurely closed|\[error\]/);
});

test('stock (HTTP/1.0, no pool) opens an upstream connection per request: the counter sees the difference', { timeout: 180_000 }, async (t) => {
  const dir = countDir(t);
  const stack = await startStack({ profile: 'stock', workers: 2, module: FIXTURE, env: { COUNT_DIR: dir } });
  t.after(() => stack.stop());
  assert.match(stack.appListen, /^tcp:127\.0\.0\.1:\d+$/);
  const before = totalConnections(dir);
  await burst(stack.url);
  const opened = totalConnections(dir) - before;
  t.diagnostic(`stock: ${opened} upstream connections for ${REQUESTS} requests`);
  assert.ok(opened >= REQUESTS, `stock opened ${opened} connections for ${REQUESTS} requests`);
});
