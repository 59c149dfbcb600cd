'use strict';
// The queue each worker holds (tunekit_app_sustained_after_s), through the real
// stack (nginx in front of the cluster on a Unix socket): a burst is served
// whole, however long it queues; an overload that keeps the queue growing turns
// the short budget on, and from then on the runner answers 503 with Retry-After,
// before the app's handler.
//
// The app's one worker serves 50 requests a second on any machine (each request
// blocks it 20 ms, test/fixtures/overload/slow-app.js), so "past its capacity"
// does not depend on the machine's speed. The overload is open loop: a request
// every 4 ms (250 a second), each on a connection of its own, until the first
// refusal comes back or a bound (count and time) is reached.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { startStack } = require('../../lib/stack');

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'overload', 'slow-app.js');
const SUSTAINED_AFTER_S = 3;
const SUSTAINED_BUDGET_MS = 100;
const RETRY_AFTER_S = 5;
const EVERY_MS = 4;
const MAX_REQUESTS = 5000; // 20 s of sending
const CLIENT_TIMEOUT_MS = 60_000;

async function stack(t) {
  const s = await startStack({
    upstream: 'uds', workers: 1, module: FIXTURE,
    set: ['tunekit_nginx_worker_processes=1', `tunekit_app_sustained_after_s=${SUSTAINED_AFTER_S}`,
      `tunekit_app_sustained_budget_ms=${SUSTAINED_BUDGET_MS}`, `tunekit_nginx_overload_retry_after_s=${RETRY_AFTER_S}`],
  });
  t.after(() => s.stop());
  return s;
}

/** One GET on a connection of its own: { status, retryAfter, body } or { error }. */
function get(url) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: CLIENT_TIMEOUT_MS }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], body }));
      res.on('error', (err) => resolve({ error: err.message }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CLIENT_TIMEOUT_MS} ms`)));
    req.on('error', (err) => resolve({ error: err.message }));
  });
}

/** The runner's shed requests by reason. */
async function shed(s) {
  const text = (await get(s.metrics[0].url)).body;
  const out = {};
  for (const m of text.matchAll(/^tunekit_app_shed_total\{[^}]*reason="([^"]+)"[^}]*\} (\d+)$/gm)) out[m[1]] = (out[m[1]] || 0) + Number(m[2]);
  return out;
}

const refusedAsSustained = (r) => r.status === 503 && /past its capacity/.test(r.body);

test('an overload that keeps the held queue growing turns the short budget on: 503 with Retry-After from the runner, every request answered', async (t) => {
  const s = await stack(t);
  const url = `${s.url}work`;
  const started = Date.now();
  const pending = [];
  let firstRefusalMs = null;
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      if (firstRefusalMs !== null || pending.length >= MAX_REQUESTS) {
        clearInterval(timer);
        resolve();
        return;
      }
      pending.push(get(url).then((r) => {
        if (firstRefusalMs === null && refusedAsSustained(r)) firstRefusalMs = Date.now() - started;
        return r;
      }));
    }, EVERY_MS);
  });
  const results = await Promise.all(pending);
  assert.ok(firstRefusalMs !== null, `a sustained refusal came within ${pending.length} requests`);
  assert.ok(firstRefusalMs >= SUSTAINED_AFTER_S * 1000,
    `not before the queue had grown for ${SUSTAINED_AFTER_S} samples a second apart (first at ${firstRefusalMs} ms)`);
  assert.deepEqual(results.filter((r) => r.error), [], 'no request lost: every one answered');
  const statuses = new Set(results.map((r) => r.status));
  assert.deepEqual([...statuses].sort(), [200, 503], 'each served or refused');
  const refused = results.filter((r) => r.status === 503);
  assert.ok(refused.every(refusedAsSustained), `each 503 says why: ${refused[0].body.trim()}`);
  assert.match(refused[0].body, new RegExp(`for ${SUSTAINED_AFTER_S} s or more.*more than ${SUSTAINED_BUDGET_MS} ms of waiting`));
  assert.ok(refused.every((r) => r.retryAfter === String(RETRY_AFTER_S)), 'each carries Retry-After');
  const served = results.filter((r) => r.status === 200).length;
  assert.ok(served > 0, 'requests were served meanwhile');
  const counts = await shed(s);
  assert.equal(counts.sustained, refused.length, 'the runner counted each refusal, reason sustained');
  // The handler ran only for the served ones: the app's own count says so.
  const appCount = Math.max(...results.filter((r) => r.status === 200).map((r) => JSON.parse(r.body).served));
  assert.equal(appCount, served, 'no app code ran for a refused request');
});

test('a burst queued far longer than the short budget is served whole: the queue falls from the first second after it', async (t) => {
  const s = await stack(t);
  // 100 requests at once: 2 s of the worker's time, the last one waits 2 s.
  const BURST = 100;
  const results = await Promise.all(Array.from({ length: BURST }, () => get(`${s.url}burst`)));
  assert.deepEqual(results.filter((r) => r.error), []);
  assert.deepEqual(results.map((r) => r.status), Array(BURST).fill(200), 'none refused');
  assert.equal(Math.max(...results.map((r) => JSON.parse(r.body).served)), BURST);
  assert.deepEqual(await shed(s), { queue_time: 0, sustained: 0 });
});
