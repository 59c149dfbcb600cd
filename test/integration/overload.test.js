'use strict';
// Overload protection through the real stack (nginx in front of the cluster on a
// Unix socket): with tunekit_nginx_upstream_max_conns=N, nginx lets N requests
// through to the app at once, for the whole stack — the count lives in the
// upstream's zone, shared by every nginx worker — and answers every other one
// 503 with Retry-After at once, without the app seeing it. The app holds each
// request while a file exists (test/fixtures/overload/hold-app.js), so "at once"
// is an event the test waits for (the app has seen N requests), never a time.
// Without the bound the same requests all reach the app. "No upstream connection is
// opened for a refusal" is read from the runner's own count of the connections its
// workers accepted (tunekit_app_connections_accepted_total, asked of every worker
// when scraped).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { startStack } = require('../../lib/stack');

const FIXTURE = path.join(__dirname, '../fixtures/overload/hold-app.js');
const BOUND = 3;
// Requests past the bound, each on a connection of its own: the kernel spreads
// new connections over nginx's workers (reuseport), so a count kept per worker
// (no zone) would let more than BOUND through.
const EXCESS = 8;
const WAIT_MS = 30000;

/** One GET on a new connection: { status, retryAfter }. */
function get(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: WAIT_MS }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${WAIT_MS} ms`)));
    req.on('error', reject);
  });
}

function holdDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-hold-'));
  fs.chmodSync(dir, 0o777);
  fs.writeFileSync(path.join(dir, 'hold'), '');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Requests the app has seen so far, all workers. */
function seen(dir) {
  return fs.readdirSync(dir).filter((f) => f.startsWith('seen.'))
    .reduce((n, f) => n + Number(fs.readFileSync(path.join(dir, f), 'utf8')), 0);
}

/** Wait until the app has seen `n` requests (bounded by WAIT_MS). */
async function untilSeen(dir, n) {
  const deadline = Date.now() + WAIT_MS;
  while (seen(dir) < n) {
    if (Date.now() > deadline) throw new Error(`the app saw ${seen(dir)} requests, not ${n}, within ${WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The app's connections, summed over its workers: { accepted (ever), active (open now) }. */
async function appConnections(s) {
  const text = await new Promise((resolve, reject) => {
    http.get(s.metrics[0].url, { agent: false, timeout: WAIT_MS }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
  const sum = (name) => [...text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
  return { accepted: sum('tunekit_app_connections_accepted_total'), active: sum('tunekit_app_connections_active') };
}

async function stack(t, dir, set) {
  const s = await startStack({
    upstream: 'uds', workers: 2, module: FIXTURE, env: { HOLD_DIR: dir },
    set: ['tunekit_nginx_worker_processes=2', ...set],
  });
  t.after(() => s.stop());
  return s;
}

test('past tunekit_nginx_upstream_max_conns, every nginx worker answers 503 with Retry-After at once and the app never sees the request', async (t) => {
  const dir = holdDir(t);
  const s = await stack(t, dir, [`tunekit_nginx_upstream_max_conns=${BOUND}`, 'tunekit_nginx_overload_retry_after_s=7']);
  const held = Array.from({ length: BOUND }, () => get(`${s.url}held`));
  await untilSeen(dir, BOUND);
  const before = await appConnections(s);

  // The stack is at its bound: every further request, on any nginx worker, is refused.
  const refused = await Promise.all(Array.from({ length: EXCESS }, () => get(`${s.url}excess`)));
  assert.deepEqual(refused.map((r) => r.status), Array(EXCESS).fill(503), 'every request past the bound answered 503');
  assert.deepEqual(refused.map((r) => r.retryAfter), Array(EXCESS).fill('7'), 'each 503 carries Retry-After: 7');
  assert.equal(seen(dir), BOUND, 'no refused request reached the app');
  assert.equal((await appConnections(s)).accepted, before.accepted, 'nginx opened no connection to the app for a refused request');

  // The admitted ones are served once the app lets them go, and the slots are free again.
  fs.rmSync(path.join(dir, 'hold'));
  assert.deepEqual((await Promise.all(held)).map((r) => r.status), Array(BOUND).fill(200), 'every admitted request answered 200');
  assert.equal((await get(`${s.url}after`)).status, 200, 'a request after the held ones finished is admitted');
});

test('without the bound (the default) the same requests all reach the app', async (t) => {
  const dir = holdDir(t);
  const s = await stack(t, dir, []);
  const before = await appConnections(s);
  const all = Array.from({ length: BOUND + EXCESS }, () => get(`${s.url}held`));
  await untilSeen(dir, BOUND + EXCESS);
  // Each held request holds a connection of its own: new ones, but for those idle in nginx's pool before.
  const grown = (await appConnections(s)).accepted - before.accepted;
  assert.ok(grown >= BOUND + EXCESS - before.active, `the app accepted ${grown} connections for ${BOUND + EXCESS} held requests (${before.active} open before)`);
  fs.rmSync(path.join(dir, 'hold'));
  assert.deepEqual((await Promise.all(all)).map((r) => r.status), Array(BOUND + EXCESS).fill(200));
});

test('a 502 that is not a refusal stays a 502: the app down behind a bounded stack', async (t) => {
  const dir = holdDir(t);
  fs.rmSync(path.join(dir, 'hold'));
  const s = await stack(t, dir, [`tunekit_nginx_upstream_max_conns=${BOUND}`]);
  assert.equal((await get(`${s.url}up`)).status, 200);
  // The app's processes (this test's own, from the stack it started) killed:
  // nginx's connect() fails, and that 502 is no refusal.
  const app = s.pids().app;
  for (const pid of app) process.kill(pid, 'SIGKILL');
  const r = await get(`${s.url}down`);
  assert.equal(r.status, 502);
  assert.equal(r.retryAfter, undefined);
});
