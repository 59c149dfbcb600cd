'use strict';
// The runner's metrics, read by a real Prometheus (Debian's package) scraping a
// local stack (nginx in front of the runner) every second while a bounded load
// runs through nginx: the requests Prometheus counts at the app are the load
// generator's, the upstream keep-alive reuse shows (tuned) or does not (stock),
// and every worker has its own series.

const test = require('node:test');
const assert = require('node:assert/strict');
const autocannon = require('autocannon');
const { startStack } = require('../../lib/stack');
const { startPrometheus } = require('../lib/prometheus');
const { until } = require('../lib/util');

const JOB = 'tunekit_app';
const REQUESTS = 3000;
const LOAD_BOUND_MS = 120000; // the load stops by itself at REQUESTS, or at this bound

/** autocannon through nginx, bounded by count and by time. */
function load(url) {
  return new Promise((resolve, reject) => {
    const run = autocannon({ url, connections: 10, amount: REQUESTS, timeout: 30 }, (err, result) => {
      clearTimeout(bound);
      if (err) reject(err);
      else resolve(result);
    });
    const bound = setTimeout(() => run.stop(), LOAD_BOUND_MS);
  });
}

/**
 * Requests the app counted, by connection (new | reused), from a scrape that
 * began after now and holds every worker in `pids`. The primary leaves a worker
 * out of a scrape when it takes over a second to answer (a starved machine): its
 * series then goes stale, and the sum would lack its count; the next scrape has
 * it again.
 */
async function counted(prom, pids) {
  const since = Date.now();
  return until('a scrape after now in which every worker answered', async () => {
    await prom.scrapedAfter(JOB, since);
    const rows = await prom.query(`sum by (connection, pid) (tunekit_app_requests_total{job="${JOB}"})`);
    const seen = new Set(rows.map((r) => Number(r.labels.pid)));
    if (!pids.every((pid) => seen.has(pid))) return null;
    const sum = (c) => rows.filter((r) => r.labels.connection === c).reduce((n, r) => n + r.value, 0);
    return { new: sum('new'), reused: sum('reused'), all: sum('new') + sum('reused') };
  }, 60000, 200);
}

async function scrapedStack(t, profile) {
  const stack = await startStack({ profile, workers: 2 });
  t.after(() => stack.stop());
  assert.equal(stack.metrics.length, 1, 'the stack names its app metrics endpoint');
  const target = new URL(stack.metrics[0].url).host;
  const prom = await startPrometheus(t, { jobs: { [JOB]: [target] } });
  return { stack, prom };
}

for (const [profile, reuse] of [['tuned', (r) => r >= 0.99], ['stock', (r) => r <= 0.01]]) {
  test(`${profile}: Prometheus counts every request of the load at the app, per worker; reuse ratio ${profile === 'tuned' ? '>= 0.99' : '<= 0.01'}`, async (t) => {
    const { stack, prom } = await scrapedStack(t, profile);
    // The stack is idle now (nginx answered its readiness request): a scrape that
    // began after this moment is the count before the load.
    const workers = [...stack.ready.workers];
    const before = await counted(prom, workers);

    const result = await load(stack.url);
    assert.equal(result.errors, 0, 'no connection errors');
    assert.equal(result.non2xx, 0, 'every answer 2xx');
    const answered = result['2xx'];
    assert.equal(answered, REQUESTS, 'the load ran to its count, not to its time bound');

    // A scrape that began after the last response: nothing is in flight at it, so
    // the difference is exact. A worker starved of CPU may count a response's end a
    // little after the client has it (seen once under two suites' load: 2378 of
    // 3000 at the first such scrape): the counters only grow, so later scrapes are
    // read until they reach the load's count, 30 s at most; more is wrong too.
    let after = await counted(prom, workers);
    const deadline = Date.now() + 30000;
    while (after.all - before.all < answered && Date.now() < deadline) after = await counted(prom, workers);
    assert.equal(after.all - before.all, answered, `the app counted ${after.all - before.all} requests, autocannon ${answered}`);
    const ratio = (after.reused - before.reused) / (after.all - before.all);
    t.diagnostic(`${profile}: app counted ${after.all - before.all}, autocannon ${answered}, reuse ratio ${ratio.toFixed(4)}`);
    assert.ok(reuse(ratio), `reuse ratio ${ratio.toFixed(4)} (reused ${after.reused - before.reused} of ${after.all - before.all})`);

    // Every worker of the stack has its own series, labelled with its slot and pid.
    const rows = await prom.query(`tunekit_app_connections_accepted_total{job="${JOB}",worker!="spare"}`);
    assert.deepEqual(rows.map((r) => r.labels.worker).sort(), ['1', '2'], 'one series per slot');
    assert.deepEqual(rows.map((r) => Number(r.labels.pid)).sort(), [...stack.ready.workers].sort(), 'each with its worker\'s pid');
    for (const name of ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'process_open_fds', 'process_max_fds']) {
      const pids = (await prom.query(`${name}{job="${JOB}",worker!="spare"}`)).map((r) => Number(r.labels.pid)).sort();
      assert.deepEqual(pids, [...stack.ready.workers].sort(), `${name}: one series per worker`);
    }

    // The values in force, as the rendered definition has them.
    const info = await prom.query(`tunekit_app_info{job="${JOB}",worker="1"}`);
    assert.equal(info.length, 1);
    assert.equal(info[0].labels.keep_alive_timeout_ms, String(stack.vars.tunekit_app_keepalive_timeout_ms));
    assert.equal(info[0].labels.listen, stack.appListen);
    assert.equal(info[0].labels.strategy, stack.vars.tunekit_app_strategy);

    // PromQL computes the event-loop delay's quantile across workers from the buckets.
    const q = await prom.query(`histogram_quantile(0.99, sum by (le) (tunekit_app_event_loop_delay_seconds_bucket{job="${JOB}"}))`);
    assert.equal(q.length, 1);
    assert.ok(Number.isFinite(q[0].value) && q[0].value >= 0, `p99 event-loop delay across workers: ${q[0].value}`);
  });
}
