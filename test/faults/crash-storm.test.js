'use strict';
// A crash storm: an app whose /crash route kills the worker that takes it (an
// exception thrown outside the request, the shape of a missing await), two
// crash requests a second for a minute beside a steady load of good requests,
// through the kit's nginx on the Unix socket, the kit's defaults otherwise.
// Once a worker has stayed up tunekit_app_min_uptime_ms, the runner replaces
// every dead worker and never stops (app/crashes.js): the good requests are
// answered, the runner is still running at the end, and its log names the one
// error once in full (worker-crash) and then only counts it (crash-summary, also
// at the stop), in step with the restarts metric. Figures recorded (report.js),
// timings never asserted.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { startStack } = require('../../lib/stack');
const { alive } = require('../../lib/proc');
const client = require('./client');
const { record } = require('./report');
const { stopAfter, doctor, errorLog } = require('./stack');
const { sleep, until } = require('../lib/util');
const { CRASH_MESSAGE } = require('../fixtures/runner/crash-route');

const CRASH_APP = path.resolve(__dirname, '../fixtures/runner/crash-route.js');
const STORM_S = 60;
const CRASHES_PER_S = 2;
// The good load: keep-alive loops, each pausing between its requests, so that it
// stays a steady load beside the storm rather than saturating the machine.
const CONNECTIONS = 4;
const GAP_MS = 5;
const MIN_GOOD_SHARE = 0.99;

/** The runner's log lines, parsed. */
const appEvents = (stack) => fs.readFileSync(stack.appLogPath, 'utf8').split('\n')
  .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));

/** The value of one series in a Prometheus text exposition (0 when absent). */
function valueOf(text, series) {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** One crash request on a new connection: its status, or its error's code. */
async function crashOnce(url) {
  const r = await client.once(false, url, { method: 'GET' });
  return r.err ? (r.err.code || r.err.message) : String(r.status);
}

test(`crash storm: ${CRASHES_PER_S} requests a second that kill their worker, for ${STORM_S} s, beside a steady load: the good requests answered, the runner never stops, the error logged once and counted`, { timeout: 300_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2, module: CRASH_APP });
  stopAfter(t, stack);
  let exited = null;
  stack.appExited.then((e) => { exited = e; });
  const primary = stack.pids().app[0];
  // The app has proved it serves: a crash from now on is a crash under traffic.
  await until('the runner to log "stable"', () => appEvents(stack).some((e) => e.event === 'stable'), 30_000, 50);

  let done = false;
  const started = Date.now();
  const good = client.run({ url: stack.url, connections: CONNECTIONS, stop: () => done, gapMs: () => GAP_MS });
  const crashUrl = new URL('/crash', stack.url).href;
  const crashes = [];
  for (let i = 0; i < STORM_S * CRASHES_PER_S; i++) {
    await sleep(1000 / CRASHES_PER_S); // the scenario's pace
    crashes.push(crashOnce(crashUrl));
  }
  done = true;
  const counts = await good;
  const outcomes = {};
  for (const o of await Promise.all(crashes)) outcomes[o] = (outcomes[o] || 0) + 1;
  const seconds = (Date.now() - started) / 1000;
  t.diagnostic(`${seconds.toFixed(1)} s; good: ${JSON.stringify(counts)}; crash requests: ${JSON.stringify(outcomes)}`);

  assert.equal(exited, null, `the runner is still running (${JSON.stringify(exited)})`);
  // Each killing request is answered: 500 by the worker it killed, on its way out,
  // or 502 by nginx when the worker died before it read the request. None waited
  // out the client's 30 s for a worker to take it.
  assert.deepEqual(Object.keys(outcomes).filter((o) => o !== '500' && o !== '502'), [], JSON.stringify(outcomes));
  assert.ok(alive(primary), 'the runner\'s primary is the one that started');
  assert.ok(counts.requests > 0);
  const share = counts.ok / counts.requests;
  assert.ok(share >= MIN_GOOD_SHARE, `${counts.ok} of ${counts.requests} good requests answered 2xx (${(100 * share).toFixed(2)}%), at least ${100 * MIN_GOOD_SHARE}% (${JSON.stringify(counts)})`);

  // The metric and the log agree: every unplanned exit is a crash restart.
  const unplanned = () => appEvents(stack).filter((e) => e.event === 'worker-exit' && e.level === 'warn');
  const metricsUrl = stack.metrics[0].url;
  const scraped = await until('the restarts metric to count every exit logged', async () => {
    const text = await (await fetch(metricsUrl)).text();
    return valueOf(text, 'tunekit_app_worker_restarts_total{reason="crash"}') === unplanned().length && text;
  }, 10_000, 100);
  const stages = Object.fromEntries(['starting', 'young', 'serving'].map((s) => [s, valueOf(scraped, `tunekit_app_worker_crashes_total{stage="${s}"}`)]));
  const fails = doctor(stack).filter((f) => f.level === 'fail').map((f) => f.id);
  const nginxLines = errorLog(stack);

  // The stop sums up the repeats not yet said; the runner drains and exits 0.
  process.kill(primary, 'SIGTERM');
  const exit = await stack.appExited;
  assert.deepEqual(exit, { code: 0, signal: null });
  const events = appEvents(stack);
  const deaths = events.filter((e) => e.event === 'worker-exit' && e.level === 'warn');
  const firsts = events.filter((e) => e.event === 'worker-crash');
  assert.equal(firsts.length, 1, `one distinct error, logged in full once: ${JSON.stringify(firsts.map((e) => e.error && e.error.message))}`);
  const [first] = firsts;
  assert.equal(first.error.message, CRASH_MESSAGE);
  assert.ok(deaths.length >= 1 && deaths.every((e) => e.crash === first.crash), 'every death names that error');
  const summaries = events.filter((e) => e.event === 'crash-summary');
  assert.deepEqual(summaries.map((e) => e.crash), summaries.map(() => first.crash));
  assert.equal(1 + summaries.reduce((n, e) => n + e.count, 0), deaths.length, 'the first line and the summaries count every death');
  assert.equal(summaries.at(-1).total, deaths.length);
  assert.deepEqual(events.filter((e) => e.event === 'crash-loop'), []);

  const respawns = events.filter((e) => e.event === 'respawn');
  const nginxErrors = {};
  for (const l of nginxLines) {
    const m = /\[(\w+)\] \d+#\d+: \*\d+ (.+?) while /.exec(l);
    if (m) nginxErrors[`${m[1]}: ${m[2]}`] = (nginxErrors[`${m[1]}: ${m[2]}`] || 0) + 1;
  }
  record('crash-storm', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/crash-storm.test.js',
    seconds: Number(seconds.toFixed(1)),
    crashesPerSecond: CRASHES_PER_S,
    crashRequests: crashes.length,
    crashOutcomes: outcomes,
    connections: CONNECTIONS,
    gapMs: GAP_MS,
    good: { requests: counts.requests, ok: counts.ok, failed: counts.failed, status: counts.status, errors: counts.errors },
    deaths: deaths.length,
    stages,
    sparePromotions: events.filter((e) => e.event === 'spare-promoted').length,
    respawns: respawns.length,
    longestRespawnMs: Math.max(0, ...respawns.map((e) => e.in_ms)),
    summaries: summaries.length,
    crashLine: first.message,
    nginxErrors,
    nginxSample: nginxLines.find((l) => /prematurely closed/.test(l)) || nginxLines[0] || '',
    doctorFails: fails,
    exitCode: exit.code,
    minUptimeMs: stack.vars.tunekit_app_min_uptime_ms,
  });
});
