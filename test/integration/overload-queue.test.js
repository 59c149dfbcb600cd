'use strict';
// Queue time as the overload signal, through the real stack (nginx in front of
// the cluster on a Unix socket): nginx stamps each request it proxies with
// X-Request-Start ("t=" and its $msec, seconds with millisecond resolution), and
// the runner's worker, before the app's handler, answers 503 with Retry-After to
// a request that already waited longer than tunekit_app_queue_budget_ms.
//
// The wait is made by events, not by the machine's speed: the app's only worker
// blocks while the test's requests queue behind it, and is released once nginx
// has stamped them all and more than the budget has passed (test/lib/queue-wait.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startStack } = require('../../lib/stack');
const { FIXTURE, get, holdDir, seen, queueBehindBlockedWorker } = require('../lib/queue-wait');

const BUDGET_MS = 100;
const QUEUED = 4; // requests through nginx that wait behind the blocked worker
const RETRY_AFTER_S = 7;

async function stack(t, dir, budgetMs) {
  const s = await startStack({
    upstream: 'uds', workers: 1, module: FIXTURE, env: { HOLD_DIR: dir },
    set: ['tunekit_nginx_worker_processes=1', `tunekit_app_queue_budget_ms=${budgetMs}`,
      `tunekit_nginx_overload_retry_after_s=${RETRY_AFTER_S}`],
  });
  t.after(() => s.stop());
  return s;
}

/** The runner's shed requests by reason, summed over its workers. */
async function shed(s) {
  const text = (await get({ url: s.metrics[0].url })).body;
  const out = {};
  for (const m of text.matchAll(/^tunekit_app_shed_total\{[^}]*reason="([^"]+)"[^}]*\} (\d+)$/gm)) out[m[1]] = (out[m[1]] || 0) + Number(m[2]);
  return out;
}

test('past tunekit_app_queue_budget_ms the runner answers 503 with Retry-After before the app\'s handler; a direct request is never shed', async (t) => {
  const dir = holdDir(t);
  const s = await stack(t, dir, BUDGET_MS);
  const r = await queueBehindBlockedWorker(s, dir, { queued: QUEUED, budgetMs: BUDGET_MS, direct: true });

  assert.equal(r.blocker.status, 200, 'the request that blocked the worker is served');
  assert.deepEqual(r.queued.map((q) => q.status), Array(QUEUED).fill(503), 'every request that waited past the budget answered 503');
  assert.deepEqual(r.queued.map((q) => q.retryAfter), Array(QUEUED).fill(String(RETRY_AFTER_S)), 'each 503 carries Retry-After');
  assert.equal(r.direct.status, 200, 'a request without X-Request-Start (straight to the app) is served however long it waited');
  assert.equal(JSON.parse(r.direct.body).requestStart, null);
  assert.equal(seen(dir), 1, 'the app\'s handler ran for the direct request only: none for a shed one');
  assert.deepEqual(await shed(s), { queue_time: QUEUED, sustained: 0 }, 'the runner counted each shed request, reason queue_time');
  // The runner's log says so (one line at most every 10 s: the first shed request's).
  const lines = fs.readFileSync(s.appLogPath, 'utf8').split('\n').filter((l) => l.includes('"shed"')).map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.level, l.reason, l.count, l.budget_ms]), [['warn', 'queue_time', 1, BUDGET_MS]]);
  assert.ok(lines[0].waited_ms > BUDGET_MS, `the line says how long the request waited: ${lines[0].waited_ms} ms`);
});

test('with tunekit_app_queue_budget_ms=0 (the default) every request that waited reaches the app\'s handler', async (t) => {
  const dir = holdDir(t);
  const s = await stack(t, dir, 0);
  const r = await queueBehindBlockedWorker(s, dir, { queued: QUEUED, budgetMs: BUDGET_MS, direct: true });
  assert.deepEqual([r.blocker, ...r.queued, r.direct].map((q) => q.status), Array(QUEUED + 2).fill(200));
  assert.equal(seen(dir), QUEUED + 1, 'the handler ran for every queued request and the direct one');
  assert.deepEqual(await shed(s), { queue_time: 0, sustained: 0 }, 'nothing shed');
});

test('an X-Request-Start sent by the client is replaced by nginx\'s own stamp', async (t) => {
  const dir = holdDir(t, false);
  const s = await stack(t, dir, BUDGET_MS);
  // t=1: the client claims its request waited since 1970; trusted, it would be shed.
  const r = await get({ url: `${s.url}forged`, headers: { 'x-request-start': 't=1' } });
  assert.equal(r.status, 200, 'the forged stamp did not shed the request');
  const stamp = JSON.parse(r.body).requestStart;
  assert.match(stamp, /^t=\d{10}\.\d{3}$/, 'the app got nginx\'s $msec: seconds with millisecond resolution');
  assert.ok(Math.abs(Number(stamp.slice(2)) * 1000 - Date.now()) < 60_000, `nginx's stamp ${stamp} is the time of the request, not the client's`);
});
