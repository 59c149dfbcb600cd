'use strict';
// Per-client fairness through the real stack (nginx in front of the cluster on a
// Unix socket): tunekit_nginx_limit_conn and tunekit_nginx_limit_req_rate, keyed by
// the client's address. Two clients on loopback, told apart by the address they
// connect from (127.0.0.3 and 127.0.0.2; the stack's own readiness probe comes from
// 127.0.0.1): the one past its limit is answered tunekit_nginx_limit_status by
// nginx, without the app seeing the request; the other is served. The app holds
// each request while a file exists (test/fixtures/overload/hold-app.js), so "in
// flight" is an event the test waits for (the app has seen N requests), never a time.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { startStack } = require('../../lib/stack');
const { holdDir, seen } = require('../lib/queue-wait');
const { until } = require('../lib/util');

const FIXTURE = path.join(__dirname, '../fixtures/overload/hold-app.js');
const WAIT_MS = 30000;
const GREEDY = '127.0.0.3';
const OTHER = '127.0.0.2';

/** One GET on a new connection from `localAddress`: its status. */
function get(url, localAddress) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, localAddress, timeout: WAIT_MS }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${WAIT_MS} ms`)));
    req.on('error', reject);
  });
}

/** Wait until the app has seen `n` requests (bounded by WAIT_MS). */
const untilSeen = (dir, n) => until(`the app to see ${n} requests`, () => seen(dir) >= n, WAIT_MS, 20);

async function stack(t, dir, set) {
  const s = await startStack({
    upstream: 'uds', workers: 1, module: FIXTURE, env: { HOLD_DIR: dir },
    set: ['tunekit_nginx_worker_processes=2', ...set],
  });
  t.after(() => s.stop());
  return s;
}

test('tunekit_nginx_limit_conn: a client with its requests in flight is refused 429 at once, another client is served', async (t) => {
  const dir = holdDir(t);
  const s = await stack(t, dir, ['tunekit_nginx_limit_conn=2']);
  const held = [get(`${s.url}a1`, GREEDY), get(`${s.url}a2`, GREEDY)];
  await untilSeen(dir, 2);

  assert.equal(await get(`${s.url}a3`, GREEDY), 429, 'the third request of a client with two in flight is refused');
  assert.equal(seen(dir), 2, 'the refused request never reached the app');
  const other = get(`${s.url}b1`, OTHER);
  await untilSeen(dir, 3);

  fs.rmSync(path.join(dir, 'hold'));
  assert.deepEqual(await Promise.all([...held, other]), [200, 200, 200], 'the requests within each client\'s limit are served');
  assert.equal(await get(`${s.url}a4`, GREEDY), 200, 'once its requests ended, the client is served again');
});

test('tunekit_nginx_limit_req_rate: past its rate and burst a client is refused with tunekit_nginx_limit_status, another client is served', async (t) => {
  const dir = holdDir(t, false);
  // One request a minute, a burst of one: a client's third request within the minute is past it.
  const s = await stack(t, dir, ['tunekit_nginx_limit_req_rate=1r/m', 'tunekit_nginx_limit_req_burst=1', 'tunekit_nginx_limit_status=503']);
  assert.deepEqual([await get(`${s.url}a1`, GREEDY), await get(`${s.url}a2`, GREEDY), await get(`${s.url}a3`, GREEDY)], [200, 200, 503]);
  assert.equal(seen(dir), 2, 'the refused request never reached the app');
  assert.equal(await get(`${s.url}b1`, OTHER), 200, 'another client has a rate of its own');
  assert.equal(seen(dir), 3);
});

test('without a per-client limit (the default) every request of one client reaches the app', async (t) => {
  const dir = holdDir(t, false);
  const s = await stack(t, dir, []);
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push(await get(`${s.url}a${i}`, GREEDY));
  assert.deepEqual(statuses, [200, 200, 200, 200]);
  assert.equal(seen(dir), 4);
});
