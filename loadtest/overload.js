'use strict';
// The engine of `tunekit bench --overload`: what each stack does past its
// capacity. The capacity is measured first (the median of CAPACITY_RUNS
// saturation runs on the kit's stack: one 8 s run moved ±10% between runs on a
// quiet machine, and every step's rate and goodput hang on it); then a ladder
// of paced rates, multiples of that capacity (0.8, 1, 1.5, 2, 3× by default),
// each step long enough for the queues to fill (its first quarter is left out
// of its figures), and a last step at 0.5× straight after the
// highest: how fast it recovers. Step by step, the stacks take turns (the order
// rotated per step, stats.roundOrder), so a shared machine's drift spreads over
// all of them; the highest step and the recovery are one pacer run (pacer.js
// `phases`), so the recovery starts with the queue the overload left.
//
// Open loop: a request due while every connection is busy gets a new connection
// (up to --max-connections, within this process's descriptor budget), so the
// generator never waits for the server (pacer.js); latency is from the intended
// send time. Per step: goodput (2xx/s), served latency, refused requests by status
// and how fast they were answered, timeouts, errors; and, sampled once a second,
// where the queue is: connections the generator holds open and busy, nginx's
// listen queue and its active connections (stub_status), the app socket's accept
// queue (sock_diag, as `ss -l` shows it), the app's event-loop delay (the runner's
// meter).

const { execFile } = require('node:child_process');
const fs = require('node:fs');
const { measure } = require('./measure');
const { nginxTarget, loadStack } = require('./targets');
const { SCENARIOS } = require('./scenarios');
const { median, roundOrder } = require('./stats');
const status = require('../lib/status');
const cpu = require('./cpu');
const { ownCoreOrThrow, placeOn, placeStack } = require('./pin');
const { UsageError } = require('../lib/errors');

// The kit with its overload protection on, by the kit's own recipe
// (roles/tunekit/defaults/main/00-app.yml): a latency budget W and the capacity C
// measured first, from which the definition derives the bound nginx lets through
// (tunekit_nginx_upstream_max_conns = C × W / 4; the app's accept queue stays the
// kit's, deeper) and the runner's queue budget (tunekit_app_queue_budget_ms = W). Both, by
// default: the bound refuses at nginx without a connection to the app, so the
// app's accept queue never fills (with the budget alone it did, and nginx answered
// 502 again: docs/overload.md); the budget keeps a served request's wait within W
// when the app serves fewer than C a second (a neighbour, a slow dependency),
// where the bound alone lets the wait grow to N / (the capacity left). --protect
// bound or budget keeps one of the two, for comparison; one protected stack per
// run keeps `bench --overload` within its time (three stacks).
// The queue mode's tunekit_app_sustained_after_s: longer than a 10x burst of 1 s
// plus the sample it can straddle (app/hold.js).
const SUSTAINED_AFTER_S = 3;
// The kit's tunekit_listen_backlog and tunekit_nginx_worker_connections.
const KIT_BACKLOG = 4096;
const PROTECT = {
  both: { name: 'kit+bound+budget', set: (c, w) => [`tunekit_latency_budget_ms=${w}`, `tunekit_app_capacity_rps=${c}`] },
  bound: { name: 'kit+bound', set: (c, w) => [`tunekit_latency_budget_ms=${w}`, `tunekit_app_capacity_rps=${c}`, 'tunekit_app_queue_budget_ms=0'] },
  budget: { name: 'kit+budget', set: (c, w) => [`tunekit_app_queue_budget_ms=${w}`] },
  // Both, and the queue each worker holds (app/hold.js), which turns a short budget
  // on once its queue has not drained for SUSTAINED_AFTER_S: the long latency budget
  // rides out a burst, the short one holds a sustained overload.
  // A budget long enough for a burst makes a deep bound (C × W / 4: 3,700 for
  // 370 req/s and 40 s), so the accept queue and nginx's connections are raised
  // to what the kit's rules ask for it (overload-bound, overload-connections).
  queue: {
    name: 'kit+queue',
    set: (c, w) => [`tunekit_latency_budget_ms=${w}`, `tunekit_app_capacity_rps=${c}`, `tunekit_app_sustained_after_s=${SUSTAINED_AFTER_S}`,
      ...deepBound(c, w)],
  },
};

/** The backlog and worker_connections a bound of C × W / 4 needs, where above the kit's 4096. */
function deepBound(c, w) {
  if (typeof c !== 'number') return [];
  const bound = Math.ceil((c * w) / 4000);
  const connections = bound * 2 + 8 + Math.floor((bound * 2 + 7) / 15);
  return [
    ...(bound > KIT_BACKLOG ? [`tunekit_listen_backlog=${bound}`] : []),
    ...(connections > KIT_BACKLOG ? [`tunekit_nginx_worker_connections=${connections}`] : []),
  ];
}
const PROTECT_MODES = Object.keys(PROTECT);
const DEFAULT_LATENCY_BUDGET_MS = 500;
const STACKS = {
  stock: { describe: SCENARIOS.stock.describe, stack: SCENARIOS.stock.stack },
  kit: { describe: 'the kit\'s current values (uds), no overload protection', stack: SCENARIOS.uds.stack },
};

/**
 * The stacks of a run: stock, kit and the protected one, whose values need the
 * capacity (`setFor(capacity)`), so it starts once the capacity is known.
 */
function stacksFor({ protect = 'both', latencyBudgetMs = DEFAULT_LATENCY_BUDGET_MS } = {}) {
  const p = PROTECT[protect];
  return {
    ...STACKS,
    [p.name]: {
      describe: `the kit's values with overload protection (${p.set('C', latencyBudgetMs).join(', ')}; C: the capacity)`,
      stack: SCENARIOS.uds.stack,
      setFor: (capacity) => p.set(Math.max(1, Math.round(capacity)), latencyBudgetMs),
    },
  };
}
const DEFAULT_MULTIPLES = [0.8, 1, 1.5, 2, 3];
const RECOVERY_MULTIPLE = 0.5;
// Descriptors this process keeps for itself (the clock thread, stdio, ss, scrapes).
const RESERVED_FDS = 256;
const CAPACITY_RUNS = 3;

/** The soft open-files limit of this process (Infinity without one or without /proc). */
function fdLimit() {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return m && m[1] !== 'unlimited' ? Number(m[1]) : Infinity;
  } catch {
    return Infinity;
  }
}

/** The connection cap: the one asked for, within the descriptor budget. */
function connectionCap(asked, limit = fdLimit()) {
  return Math.max(1, Math.min(asked, limit - RESERVED_FDS));
}

/** The ladder: [{ multiple, rate, durationS }], the recovery step last. */
// A step's figures leave out its first quarter, while the queues fill (the recovery
// step counts from the drop: how fast it recovers is its point).
function ladder(capacity, multiples, stepS, recoveryS) {
  const steps = multiples.map((m) => ({ multiple: m, rate: Math.round(capacity * m), durationS: stepS, settleS: Math.floor(stepS / 4) }));
  steps.push({ multiple: RECOVERY_MULTIPLE, rate: Math.round(capacity * RECOVERY_MULTIPLE), durationS: recoveryS, settleS: 0, recovery: true });
  return steps;
}

function run(cmd, args) {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 2000 }, (err, stdout) => resolve(err ? '' : stdout));
  });
}

/** Listening sockets' accept queues, { local: queued }, from `ss -l` (sock_diag). */
async function acceptQueues() {
  const out = {};
  for (const args of [['-Hlxn'], ['-Hltn']]) {
    for (const line of (await run('ss', args)).split('\n')) {
      const f = line.trim().split(/\s+/);
      // unix: Netid State Recv-Q Send-Q Local …; tcp: State Recv-Q Send-Q Local …
      const [queued, local] = f[0] === 'u_str' ? [f[2], f[4]] : [f[1], f[3]];
      if (local) out[local] = (out[local] || 0) + Number(queued);
    }
  }
  return out;
}

/** The runner's meter: event-loop delay so far per worker pid ({ pid: { sum, count } }), connections open now. */
async function appMeter(url) {
  const delays = {};
  let connections = 0;
  for (const s of status.parseExposition(await status.get(url))) {
    if (!s.labels.pid) continue;
    const w = delays[s.labels.pid] || (delays[s.labels.pid] = { sum: 0, count: 0 });
    if (s.name === 'tunekit_app_event_loop_delay_seconds_sum') w.sum = s.value;
    if (s.name === 'tunekit_app_event_loop_delay_seconds_count') w.count = s.value;
    if (s.name === 'tunekit_app_connections_active') connections += s.value;
  }
  return { delays, connections };
}

/** The stack's nginx stub_status page (null: the stack has none). */
function stubStatusUrl(stack) {
  const v = stack.vars;
  return v.tunekit_nginx_status ? `http://127.0.0.1:${v.tunekit_nginx_status_port}${v.tunekit_nginx_status_path}` : null;
}

/**
 * Resolves true once nginx holds no request but the status request itself
 * (stub_status "Writing: 1"), polled every IDLE_POLL_MS; false if that has not
 * happened within limitMs; null if the stack has no stub_status to ask.
 */
const IDLE_POLL_MS = 50;
async function untilIdle(stack, limitMs) {
  const url = stubStatusUrl(stack);
  if (!url) return null;
  const end = Date.now() + limitMs;
  while (Date.now() < end) {
    const s = await status.get(url, 900).then(status.parseStubStatus, () => null);
    if (s && s.writing <= 1) return true;
    await new Promise((resolve) => setTimeout(resolve, IDLE_POLL_MS));
  }
  return false;
}

/**
 * A sampler of where the queue of one stack is, called once a second by the pacer:
 * nginx's listen queue and connections, the app socket's accept queue, the
 * connections the app holds open (accepted, their requests maybe not yet read), the
 * app's mean event-loop delay over the last second (the worst worker).
 */
function queueSampler(stack) {
  const v = stack.vars;
  const nginxListen = `127.0.0.1:${v.tunekit_nginx_listen_port}`;
  const appListen = v.tunekit_upstream_kind === 'tcp' ? v.tunekit_nginx_app_tcp_address : v.tunekit_socket_path;
  const statusUrl = stubStatusUrl(stack);
  const metricsUrl = stack.metrics && stack.metrics.length ? stack.metrics[0].url : null;
  let lastDelays = null;
  return async () => {
    const [queues, stubStatus, meter] = await Promise.all([
      acceptQueues(),
      statusUrl ? status.get(statusUrl, 900).then(status.parseStubStatus, () => null) : null,
      metricsUrl ? appMeter(metricsUrl).catch(() => null) : null,
    ]);
    const delays = meter && meter.delays;
    let loopMs = null;
    if (delays && lastDelays) {
      for (const [pid, d] of Object.entries(delays)) {
        const before = lastDelays[pid];
        const n = before ? d.count - before.count : 0;
        if (n > 0) loopMs = Math.max(loopMs || 0, ((d.sum - before.sum) / n) * 1000);
      }
    }
    lastDelays = delays || lastDelays;
    return {
      nginxQueue: queues[nginxListen] ?? null,
      appQueue: Object.entries(queues).filter(([k]) => served(k, appListen)).reduce((a, [, n]) => a + n, 0),
      nginxActive: stubStatus ? stubStatus.active : null,
      nginxWriting: stubStatus ? stubStatus.writing : null,
      appConnections: meter ? meter.connections : null,
      loopMs,
    };
  };
}

// A listening socket of the app: its address, one worker's socket (per-worker:
// PATH.N), or the runner's bound name before its rename into place (PATH~PID, which
// is what sock_diag reports for a path bound that way).
const served = (local, listen) => local === listen || local.startsWith(`${listen}.`) || local.startsWith(`${listen}~`);

const maxOf = (xs) => (xs.length ? Math.max(...xs) : null);

/** Each step's figures, with the peaks of the samples taken during it. */
function steps(result, capacity) {
  let startS = 0;
  return result.phases.map((p) => {
    const seconds = result.timeline.slice(Math.floor(startS), Math.ceil(startS + p.durationS));
    startS += p.durationS;
    const samples = seconds.map((s) => s.sample).filter(Boolean);
    const peak = (k) => maxOf(samples.map((s) => s[k]).filter((x) => x != null));
    return {
      ...p,
      goodputShare: p.goodput / capacity,
      queue: {
        connections: peak('connections'), busy: peak('busy'), waiting: peak('waiting'),
        nginxQueue: peak('nginxQueue'), nginxActive: peak('nginxActive'), appQueue: peak('appQueue'),
        appConnections: peak('appConnections'), loopMs: peak('loopMs'),
      },
    };
  });
}

/**
 * Recovery: after the load drops to 0.5× (the last step of `result`), the first
 * second whose served p99 is within `factor` of `baseP99Us` (the lowest step's),
 * counted from the drop (null: never in the step).
 */
function recovery(result, stepsOut, baseP99Us, factor = 1.5) {
  const rec = stepsOut[stepsOut.length - 1];
  const startS = stepsOut.slice(0, -1).reduce((a, s) => a + s.durationS, 0);
  const seconds = result.timeline.slice(Math.round(startS));
  const back = seconds.findIndex((s) => s.ok > 0 && s.latencyUs.p99 <= factor * baseP99Us);
  return { baseP99Us, factor, secondsToRecover: back === -1 ? null : back, recoveryP99Us: rec.latencyUs.p99 };
}

/** The runs of a ladder: each step alone, but the highest with the recovery after it. */
function runsOf(phases) {
  return [...phases.slice(0, -2).map((p) => [p]), phases.slice(-2)];
}

// The burst (--burst): BURST_MULTIPLE × the capacity for BURST_S, between two
// steps at the recovery's 0.5×, one pacer run per stack, so what the burst queued
// is still there after it. A burst absorbed is one with no request refused and the
// queue drained (p99 back) soon after.
const BURST_MULTIPLE = 10;
const BURST_S = 1;

/** The burst's steps: 0.5× for stepS (its first quarter left out), the burst, 0.5× for recoveryS. */
function burstSteps(capacity, stepS, recoveryS) {
  const at = (multiple) => Math.round(capacity * multiple);
  return [
    { multiple: RECOVERY_MULTIPLE, rate: at(RECOVERY_MULTIPLE), durationS: stepS, settleS: Math.floor(stepS / 4) },
    { multiple: BURST_MULTIPLE, rate: at(BURST_MULTIPLE), durationS: BURST_S, settleS: 0, burst: true },
    { multiple: RECOVERY_MULTIPLE, rate: at(RECOVERY_MULTIPLE), durationS: recoveryS, settleS: 0, recovery: true },
  ];
}

/** What a burst did to one stack: its requests refused, served p99, refusals after it. */
function burstSummary(stepsOut) {
  const [, b, after] = stepsOut;
  const refused = (p) => p.non2xx + p.errors + p.timeouts;
  return {
    requests: Math.round(b.rate * b.durationS), refused: refused(b), kinds: b.kinds, servedP99Us: b.latencyUs.p99,
    refusedAfter: refused(after),
  };
}

/** The capacity: the median of CAPACITY_RUNS saturation runs on `target` (each kept in `results`). */
async function measureCapacity(target, o, results) {
  const runs = [];
  for (let i = 1; i <= CAPACITY_RUNS; i++) {
    o.progress.start(`capacity of kit (${o.driver}, saturation, run ${i} of ${CAPACITY_RUNS})`, o.capacityS);
    const r = await measure(target, { mode: 'saturation', driver: o.driver, duration: o.capacityS, connections: o.connections, procs: o.procs, timeoutS: o.timeoutS });
    o.progress.done();
    results.push({ ...r, role: 'capacity' });
    runs.push(r);
  }
  return { reqPerSec: median(runs.map((r) => r.reqPerSec)), runs: runs.map((r) => r.reqPerSec), driver: runs[0].driver, stack: runs[0].scenario };
}

// --capacity paced: what an open-loop load can get from the kit's stack, not
// what wrk's closed loop gets (it waits for its answers, so it never queues past
// its connections: 859 req/s by wrk where a paced 880 grew a queue all minute and
// 800 did not, docs/overload.md "What the paced load could get"). From the
// saturation figure S, paced probes of --duration on the kit's stack climb from
// PACED_FROM × S in steps of PACED_STEP × S, until one is not served: every
// request of its counted part (the first quarter left out, as in the ladder)
// answered 2xx, no timeout, and its p99 within the latency budget. A queue that
// grows shows in the p99 within seconds, so the first probe past the knee fails
// and the climb stops there; the capacity is the last probe served.
const PACED_FROM = 0.7;
const PACED_STEP = 0.05;
const PACED_TO = 1.2;

/** The probes' rates: PACED_FROM × saturation up to PACED_TO ×, PACED_STEP × apart. */
function pacedProbeRates(saturation) {
  const out = [];
  for (let k = 0; PACED_FROM + k * PACED_STEP <= PACED_TO + 1e-9; k++) {
    const ofSaturation = Math.round((PACED_FROM + k * PACED_STEP) * 100) / 100;
    out.push({ ofSaturation, rate: Math.max(1, Math.round(saturation * ofSaturation)) });
  }
  return out;
}

// A probe served with p99 past this is queueing, whatever budget the protected
// stack has: a budget sized for a burst (40 s) let every probe pass, and the
// climb ended at 672 req/s where 448 had p99 767 ms (docs/overload.md, "A queue
// that tells a burst from a sustained overload").
const PACED_P99_CAP_MS = 100;

/** The p99 a probe must keep: the latency budget, at most PACED_P99_CAP_MS. */
const probeP99Ms = (latencyBudgetMs) => Math.min(latencyBudgetMs, PACED_P99_CAP_MS);

/** A probe's verdict: served (every request of its counted part 2xx, p99 within probeP99Ms) and its figures. */
function probeVerdict(step, latencyBudgetMs) {
  const refused = step.non2xx + step.errors + step.timeouts;
  const p99Us = step.latencyUs.p99;
  return { rate: step.rate, ok: step.ok, refused, p99Us, goodput: step.goodput, served: refused === 0 && step.ok > 0 && p99Us != null && p99Us <= probeP99Ms(latencyBudgetMs) * 1000 };
}

/**
 * The climb: `probe({ ofSaturation, rate })` resolves to one step's figures
 * (pacer.js phases), called for each rate in turn until one is not served. The
 * capacity is the last served; none served is an error that says what to change.
 */
async function pacedClimb(saturation, latencyBudgetMs, probe) {
  const probes = [];
  for (const at of pacedProbeRates(saturation)) {
    const v = { ofSaturation: at.ofSaturation, ...probeVerdict(await probe(at), latencyBudgetMs) };
    probes.push(v);
    if (!v.served) break;
  }
  const served = probes.filter((p) => p.served);
  if (!served.length) {
    const first = probes[0];
    throw new UsageError(`--capacity paced: the kit's stack did not serve ${first.rate} req/s paced (${PACED_FROM}× its saturation figure ${Math.round(saturation)}): ` +
      `p99 ${first.p99Us == null ? '– (none served)' : `${(first.p99Us / 1000).toFixed(1)} ms`} against ${probeP99Ms(latencyBudgetMs)} ms (the latency budget, at most ${PACED_P99_CAP_MS}), ${first.refused} not answered 2xx; ` +
      'give a larger --latency-budget, or the capacity itself (--capacity R)');
  }
  return { reqPerSec: served[served.length - 1].rate, saturation, probes, topped: served.length === probes.length };
}

/**
 * The paced capacity of `stack` (see PACED_FROM), each probe's run kept in
 * `results`. wrk's last saturation run left the requests it had in flight when it
 * stopped: the climb starts when nginx holds none (within the client timeout), so
 * the first probe does not wait behind them.
 */
async function measurePacedCapacity(stack, target, o, results, saturation) {
  if ((await untilIdle(stack, o.timeoutS * 1000)) === false) o.progress.note('bench --overload: the kit\'s stack still held requests from the saturation runs; the paced probes start anyway');
  return pacedClimb(saturation, o.latencyBudgetMs, async ({ ofSaturation, rate }) => {
    const phase = { multiple: ofSaturation, rate, durationS: o.capacityS, settleS: Math.floor(o.capacityS / 4) };
    o.progress.start(`paced capacity of kit: ${rate} req/s (${ofSaturation}× the saturation figure)`, o.capacityS);
    const r = await measure(target, {
      mode: 'paced', rate, duration: o.capacityS, phases: [phase], connections: o.connections, maxConnections: o.maxConnections, timeoutS: o.timeoutS,
    });
    o.progress.done();
    results.push({ ...r, role: 'capacity-paced' });
    return r.phases[0];
  });
}

// Every stack as warm as the one the capacity was measured on: the same
// saturation load, unrecorded, right before the ladder. Started cold, stock's p99
// at 0.8x was 289-538 ms for its first 7 s (227 ms over the step, 33 ms warm).
async function warmUp(targets, o) {
  const warmS = CAPACITY_RUNS * o.capacityS;
  for (const target of targets) {
    o.progress.start(`warm-up ${target.name} (${o.driver}, saturation, ${warmS} s, unrecorded)`, warmS);
    await measure(target, { mode: 'saturation', driver: o.driver, duration: warmS, connections: o.connections, procs: o.procs, timeoutS: o.timeoutS });
    o.progress.done();
  }
}

// Run the overload bench. `o`: { multiples, stepS, recoveryS, capacity
// (req/s, or 0: measure it), pacedCapacity (with 0: the paced capacity), capacityS, connections, maxConnections, timeoutS,
// workers, app, set, varsFiles, driver, progress, protect, latencyBudgetMs, burst }.
async function runOverload(o) {
  const progress = o.progress;
  const { startStack } = loadStack();
  const defs = stacksFor(o);
  const names = Object.keys(defs);
  const started = {};
  const results = [];
  const split = o.ownCore ? ownCoreOrThrow(cpu.cores()) : null;
  const start = async (name, capacity) => {
    const { stack, describe, setFor } = defs[name];
    progress.note(`bench --overload: starting the ${name} stack (${describe})`);
    const set = [...(stack.set || []), ...(setFor ? setFor(capacity) : []), ...o.set];
    started[name] = await startStack({ ...stack, set, workers: o.workers, module: o.app || null, varsFiles: o.varsFiles, port: 0 });
    if (split) placeStack(started[name], split.stacks);
    return set;
  };
  try {
    for (const name of names) if (!defs[name].setFor) await start(name);
    // The generator from here on: this process, and what it starts (wrk, ss).
    if (split) placeOn([process.pid], split.generator);
    const targetOf = (name) => nginxTarget(name, started[name], defs[name].describe);
    let capacity = o.capacity;
    let capacityRun = null;
    if (!capacity) {
      capacityRun = await measureCapacity(targetOf('kit'), o, results);
      capacity = capacityRun.reqPerSec;
      if (o.pacedCapacity) {
        capacityRun.paced = await measurePacedCapacity(started.kit, targetOf('kit'), o, results, capacity);
        capacity = capacityRun.paced.reqPerSec;
      }
    }
    const protectedSet = {};
    for (const name of names) if (defs[name].setFor) protectedSet[name] = await start(name, capacity);
    await warmUp(names.filter((name) => !(capacityRun && name === 'kit')).map(targetOf), o);
    const phases = o.burst ? burstSteps(capacity, o.stepS, o.recoveryS) : ladder(capacity, o.multiples, o.stepS, o.recoveryS);
    const samplers = Object.fromEntries(names.map((name) => [name, queueSampler(started[name])]));
    const per = Object.fromEntries(names.map((name) => [name, { steps: [], last: null }]));
    const groups = o.burst ? [phases] : runsOf(phases);
    for (let k = 0; k < groups.length; k++) {
      const group = groups[k];
      const durationS = group.reduce((a, p) => a + p.durationS, 0);
      for (const name of roundOrder(names, k)) {
        progress.start(`${name}: ${group.map((p) => `${p.multiple}×`).join(' then ')} of ${Math.round(capacity)} req/s`, durationS);
        const r = await measure(targetOf(name), {
          mode: 'paced', rate: group[0].rate, duration: durationS, phases: group, connections: o.connections, maxConnections: o.maxConnections,
          timeoutS: o.timeoutS, sample: samplers[name], onProgress: (n) => progress.update(n),
        });
        progress.done();
        results.push({ ...r, role: 'ladder', step: k });
        // Server CPU per request and other load are the run's (the last run: its two steps together).
        const stepsOut = steps(r, capacity).map((st) => ({ ...st, cpuUsPerReq: r.server ? r.server.cpuUsPerReq : null, otherCores: r.machine.otherCores }));
        per[name].steps.push(...stepsOut);
        if (k === groups.length - 1) per[name].last = { r, stepsOut };
      }
    }
    const out = names.map((name) => {
      const { steps: all, last } = per[name];
      const others = all.map((st) => st.otherCores).filter((x) => x != null);
      return {
        stack: name, describe: defs[name].describe, ...(protectedSet[name] && { set: protectedSet[name] }), steps: all,
        recovery: recovery(last.r, last.stepsOut, all[0].latencyUs.p99),
        ...(o.burst && { burst: burstSummary(last.stepsOut) }),
        otherCores: others.length ? Math.max(...others) : null,
      };
    });
    return {
      ...(split && { placement: split }),
      capacity, capacityRun,
      ladder: phases, burst: Boolean(o.burst), stacks: out, results,
    };
  } finally {
    for (const name of Object.keys(started).reverse()) {
      try {
        await started[name].stop();
      } catch (err) {
        progress.note(`bench --overload: stopping ${name} failed: ${err.message}`);
      }
    }
  }
}

module.exports = {
  runOverload, ladder, runsOf, pacedProbeRates, probeVerdict, probeP99Ms, pacedClimb, burstSteps, burstSummary, connectionCap, steps, recovery, STACKS, stacksFor,
  PROTECT_MODES, DEFAULT_LATENCY_BUDGET_MS, CAPACITY_RUNS, DEFAULT_MULTIPLES, RECOVERY_MULTIPLE, BURST_MULTIPLE, BURST_S,
};
