'use strict';
// The runner's metrics: what a worker counts (the meter), what it reports when
// asked (a sample, plain JSON so it crosses the cluster IPC), and the Prometheus
// text format (version 0.0.4) of the samples of every worker, one series set per
// worker (labels worker and pid), never summed or averaged here: PromQL sums
// counters and computes histogram quantiles across workers, correctly, which an
// average of per-worker gauges or quantiles cannot give back.
// https://prometheus.io/docs/instrumenting/exposition_formats/
//
// Written here rather than with prom-client: app/ runs on hosts without
// node_modules (node: built-ins only), the exposition is a few counters, gauges
// and one histogram, and prom-client's cluster aggregator averages gauges across
// workers and cannot run under PM2, whose daemon runs no code of ours
// (docs/design.md, "Metrics").

const fs = require('node:fs');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const v8 = require('node:v8');

const CLASSES = ['2xx', '3xx', '4xx', '5xx', 'other'];
const CONNECTIONS = ['new', 'reused'];
// Upper bounds (seconds) of the event-loop delay histogram: a healthy loop sits in
// the first buckets; 0.1 s and above is a loop that holds requests in its queue.
const DELAY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
// perf_hooks samples the loop every loopResolutionMs (tunekit_metrics_loop_resolution_ms)
// and records the interval it measured, the resolution included (an idle loop reads
// about 10.1 ms at 10): the delay is that minus the resolution. Each sample is a
// timer that wakes an idle worker, at about the CPU cost of a request: the period
// is the meter's one cost that is paid by the second, not by the request.
// Without one (a test), Node's own default resolution.
const NODE_RESOLUTION_MS = 10;
const RESTART_REASONS = ['crash', 'start_timeout', 'rolling', 'rebind'];
// When an unplanned death came (app/crashes.js): before the worker listened, within
// tunekit_app_min_uptime_ms of it, or after. No label per error: an error's
// fingerprint changes with every release (its stack's line numbers) and a message
// can carry ids, so such a label would grow series without bound; the log names
// each error once (worker-crash) and counts its repeats (crash-summary).
const CRASH_STAGES = ['starting', 'young', 'serving'];
// Why the runner answered a request itself, before the app's handler (app/shed.js):
// queue_time, it waited longer than tunekit_app_queue_budget_ms; sustained, the
// worker's held queue (app/hold.js) had not drained for tunekit_app_sustained_after_s
// and it waited, or the queue ahead of it, longer than tunekit_app_sustained_budget_ms.
const SHED_REASONS = ['queue_time', 'sustained'];
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const SERVED = Symbol('tunekit.metrics.served');

// ---- the meter: one per worker process ----------------------------------------

/**
 * A worker's meter. Its event-loop monitor starts with watchLoop, once the worker
 * serves: a warm spare waits with no timer of its own.
 */
function createMeter({ loopResolutionMs = NODE_RESOLUTION_MS } = {}) {
  const monitor = monitorEventLoopDelay({ resolution: loopResolutionMs });
  return {
    // Flat counts, index classIndex * 2 + (reused ? 1 : 0): a request costs two
    // integer updates, no string and no object (sample() names them).
    requests: new Array(CLASSES.length * CONNECTIONS.length).fill(0),
    accepted: 0,
    active: 0,
    shed: Object.fromEntries(SHED_REASONS.map((r) => [r, 0])),
    delay: { counts: DELAY_BUCKETS.map(() => 0), sum: 0, count: 0 },
    monitor,
    loopResolutionMs,
  };
}

/** Start sampling the event-loop delay (the worker serves). */
function watchLoop(meter) {
  meter.monitor.enable();
}

/** A connection accepted: counted, and active until it closes. */
function countConnection(meter, socket) {
  meter.accepted += 1;
  meter.active += 1;
  socket[SERVED] = 0;
  socket.once('close', () => { meter.active -= 1; });
}

/** CLASSES index of a status: 2xx..5xx, else other. */
function classIndex(status) {
  return status >= 200 && status < 600 ? ((status / 100) | 0) - 2 : 4;
}

/**
 * A request the worker handles starts: on a connection that carried one before
 * (reused: the upstream keep-alive pool at work) or on a fresh one. Returns the
 * connection's index (0 new, 1 reused) for countResponse.
 */
function countRequest(meter, req) {
  const served = req.socket[SERVED] || 0;
  req.socket[SERVED] = served + 1;
  return served > 0 ? 1 : 0;
}

/** Its response ended (the caller's close listener): counted by status class. */
function countResponse(meter, status, connection) {
  meter.requests[classIndex(status) * 2 + connection] += 1;
}

/** A request the runner shed (answered 503 before the app's handler), by reason. */
function countShed(meter, reason) {
  meter.shed[reason] += 1;
}

/** How many of the histogram's values are <= ns (the largest percentile at or below it). */
function countAtOrBelow(h, ns) {
  if (h.max <= ns) return h.count;
  if (h.min > ns) return 0;
  let lo = 0;
  let hi = 100;
  for (let i = 0; i < 30; i++) {
    const mid = (lo + hi) / 2;
    if (h.percentile(mid) <= ns) lo = mid;
    else hi = mid;
  }
  return Math.round((h.count * lo) / 100);
}

/** Move what perf_hooks recorded since the last fold into the cumulative buckets. */
function foldDelay(meter) {
  const h = meter.monitor;
  if (!h.count) return;
  const offset = meter.loopResolutionMs * 1e6;
  DELAY_BUCKETS.forEach((b, i) => { meter.delay.counts[i] += countAtOrBelow(h, b * 1e9 + offset); });
  meter.delay.sum += (Math.max(0, h.mean - offset) * h.count) / 1e9;
  meter.delay.count += h.count;
  h.reset();
}

// The last soft limit read: at the limit itself, reading /proc needs a descriptor
// the worker has not got (EMFILE), and that is when the numbers matter most.
let lastMaxFds = null;

/** The soft RLIMIT_NOFILE, as /proc/self/limits reads now (a prlimit is seen); at the limit, the last one read. */
function maxFds() {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    lastMaxFds = m && m[1] !== 'unlimited' ? Number(m[1]) : null;
    return lastMaxFds;
  } catch (err) {
    return err.code === 'EMFILE' ? lastMaxFds : null;
  }
}

/** Open descriptors now; out of them (EMFILE) means every one of the soft limit is open. */
function openFds(limit) {
  try {
    return fs.readdirSync('/proc/self/fd').length - 1; // less the directory's own
  } catch (err) {
    return err.code === 'EMFILE' ? limit : null; // no procfs: not reported
  }
}

/** openFds and maxFds of this worker now. */
function fds() {
  const max = maxFds();
  return { openFds: openFds(max), maxFds: max };
}

/**
 * rss and heapUsed now. process.memoryUsage() reads /proc/self/stat for the rss and
 * throws at the open-files limit (EMFILE, uv_resident_set_memory): a scrape then
 * would kill the worker. There the rss is left out and the heap read from V8.
 */
function memory() {
  try {
    return process.memoryUsage();
  } catch {
    return { rss: null, heapUsed: v8.getHeapStatistics().used_heap_size };
  }
}

/** This worker's numbers now, as JSON; `info`: the values in force. */
function sample(meter, info) {
  foldDelay(meter);
  const mem = memory();
  return {
    requests: Object.fromEntries(CLASSES.flatMap((c, i) => CONNECTIONS.map((k, j) => [`${c}|${k}`, meter.requests[i * 2 + j]]))),
    accepted: meter.accepted,
    active: meter.active,
    shed: { ...meter.shed },
    delay: { counts: [...meter.delay.counts], sum: meter.delay.sum, count: meter.delay.count },
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    ...fds(),
    info,
  };
}

/** The info labels of a settings object and a release (null: none deployed). */
function infoOf(s, release) {
  return {
    strategy: s.strategy,
    listen: s.listen,
    backlog: String(s.backlog),
    keep_alive_timeout_ms: String(s.keepAliveTimeoutMs),
    headers_timeout_ms: String(s.headersTimeoutMs),
    release: release || '',
  };
}

// ---- the primary's counters ------------------------------------------------------

function createPrimaryCounters() {
  return {
    restarts: Object.fromEntries(RESTART_REASONS.map((r) => [r, 0])),
    crashes: Object.fromEntries(CRASH_STAGES.map((st) => [st, 0])),
    slotRestarts: {}, rebinds: 0, drains: 0, startTimeouts: 0,
    shedShare: 0, // a gauge, set by app/shed-share.js at each update
  };
}

/**
 * Count what the primary logs, so a metric and its log line cannot disagree:
 * an unplanned worker exit is a restart (crash, or start_timeout when the
 * worker was killed for not starting) and a crash by its stage, a rolling restart's replaced workers
 * (rolling, or rebind after a re-bind), a planned exit a drain.
 */
function countEvent(c, level, event, fields = {}) {
  // Per slot (worker="N" in the workers' series): its worker replaced, for any reason.
  const slotRestart = event === 'worker-exit' && fields.slot != null && (level !== 'info' || fields.replaced);
  if (slotRestart) c.slotRestarts[fields.slot] = (c.slotRestarts[fields.slot] || 0) + 1;
  if (event === 'worker-exit' && level === 'info') c.drains += 1;
  else if (event === 'worker-exit') {
    c.restarts[fields.start_timeout ? 'start_timeout' : 'crash'] += 1;
    if (CRASH_STAGES.includes(fields.stage)) c.crashes[fields.stage] += 1;
  }
  else if (event === 'reload-done') c.restarts[fields.reason === 'socket-rebound' ? 'rebind' : 'rolling'] += (fields.replaced || []).length;
  else if (event === 'socket-rebound') c.rebinds += 1;
  else if (event === 'worker-start-timeout') c.startTimeouts += 1;
}

// ---- the text format ---------------------------------------------------------------

function escapeLabel(value) {
  return String(value).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatValue(v) {
  if (v === Infinity) return '+Inf';
  return Number.isFinite(v) ? String(v) : 'NaN';
}

function line(name, labels, value) {
  const text = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',');
  return `${name}${text ? `{${text}}` : ''} ${formatValue(value)}`;
}

// Each family: name, type, help, and the samples of one worker as [suffix, extra labels, value].
const WORKER_FAMILIES = [
  ['tunekit_app_requests_total', 'counter', 'Requests answered, by status class and by whether their connection had carried a request before (reused) or not (new).',
    (w) => Object.entries(w.requests).map(([key, v]) => {
      const [cls, connection] = key.split('|');
      return ['', { class: cls, connection }, v];
    })],
  ['tunekit_app_shed_total', 'counter', 'Requests the runner answered 503 with Retry-After before the app\'s handler, by reason: queue_time (waited longer than tunekit_app_queue_budget_ms), sustained (a sustained overload: the queue ahead of it held more than tunekit_app_sustained_budget_ms). Counted in tunekit_app_requests_total too.',
    (w) => SHED_REASONS.map((r) => ['', { reason: r }, w.shed[r]])],
  ['tunekit_app_connections_accepted_total', 'counter', 'Connections the worker accepted.', (w) => [['', {}, w.accepted]]],
  ['tunekit_app_connections_active', 'gauge', 'Connections the worker holds open now.', (w) => [['', {}, w.active]]],
  ['tunekit_app_event_loop_delay_seconds', 'histogram', 'Event-loop delay beyond the sampling interval (perf_hooks.monitorEventLoopDelay).',
    (w) => [
      ...DELAY_BUCKETS.map((b, i) => ['_bucket', { le: String(b) }, w.delay.counts[i]]),
      ['_bucket', { le: '+Inf' }, w.delay.count],
      ['_sum', {}, w.delay.sum],
      ['_count', {}, w.delay.count],
    ]],
  ['process_resident_memory_bytes', 'gauge', 'Resident set size of the worker process.', (w) => (w.rss == null ? [] : [['', {}, w.rss]])],
  ['nodejs_heap_size_used_bytes', 'gauge', 'V8 heap in use in the worker.', (w) => [['', {}, w.heapUsed]]],
  ['process_open_fds', 'gauge', 'Open file descriptors of the worker.', (w) => (w.openFds == null ? [] : [['', {}, w.openFds]])],
  ['process_max_fds', 'gauge', 'The worker\'s soft limit on open file descriptors (RLIMIT_NOFILE).', (w) => (w.maxFds == null ? [] : [['', {}, w.maxFds]])],
  ['tunekit_app_info', 'gauge', 'The values in force in the worker: strategy, listen, backlog, timeouts, release.', (w) => [['', w.info, 1]]],
];

const PRIMARY_FAMILIES = [
  ['tunekit_app_worker_restarts_total', 'counter', 'Workers replaced, by reason: crash, start_timeout, rolling (SIGHUP), rebind (after the socket was bound again).',
    (c) => RESTART_REASONS.map((r) => ['', { reason: r }, c.restarts[r]])],
  ['tunekit_app_worker_crashes_total', 'counter', 'Unplanned worker deaths by stage: starting (before it listened), young (within tunekit_app_min_uptime_ms of listening), serving (after).',
    (c) => CRASH_STAGES.map((st) => ['', { stage: st }, c.crashes[st]])],
  ['tunekit_app_slot_restarts_total', 'counter', 'Times the worker of a slot (worker="N", as in the workers\' series) was replaced: crash, start timeout, rolling restart, re-bind.',
    (c) => Object.entries(c.slotRestarts).map(([slot, n]) => ['', { worker: slot }, n])],
  ['tunekit_app_socket_rebinds_total', 'counter', 'Times the primary bound its socket path again after the file was deleted.', (c) => [['', {}, c.rebinds]]],
  ['tunekit_app_drains_total', 'counter', 'Workers that left by a drain (rolling restart, re-bind, stop).', (c) => [['', {}, c.drains]]],
  ['tunekit_app_worker_start_timeouts_total', 'counter', 'Workers killed for not listening within tunekit_app_start_timeout_ms.', (c) => [['', {}, c.startTimeouts]]],
  ['tunekit_app_shed_share', 'gauge', 'The share of the app\'s requests nginx refuses now (503 with Retry-After, before any connection to the app) because the workers\' overload counts as sustained: the files in tunekit_app_shed_dir over 256. 0: none.',
    (c) => [['', {}, c.shedShare]]],
];

function family([name, type, help, rows], sources) {
  const out = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const { labels, data } of sources) {
    for (const [suffix, extra, value] of rows(data)) out.push(line(name + suffix, { ...labels, ...extra }, value));
  }
  return out;
}

/**
 * The exposition: `workers` [{ worker, pid, sample }], `primary` the primary's
 * counters (null under PM2 or on its own, where no primary of ours runs).
 */
function render({ workers, primary = null }) {
  const sources = workers.map((w) => ({ labels: { worker: String(w.worker), pid: String(w.pid) }, data: w.sample }));
  const lines = [];
  for (const f of WORKER_FAMILIES) lines.push(...family(f, sources));
  if (primary) for (const f of PRIMARY_FAMILIES) lines.push(...family(f, [{ labels: {}, data: primary }]));
  return `${lines.join('\n')}\n`;
}

module.exports = {
  CLASSES, CONNECTIONS, DELAY_BUCKETS, RESTART_REASONS, CRASH_STAGES, SHED_REASONS, CONTENT_TYPE,
  createMeter, watchLoop, countConnection, countRequest, countResponse, countShed, sample, infoOf, createPrimaryCounters, countEvent, render,
};
