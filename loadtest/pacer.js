'use strict';
// Open-loop, evenly paced load: request i is due at t0 + i/rate, whatever
// happened to earlier requests (wrk2's model). autocannon's -R instead gives
// each connection a per-second budget that it spends back to back, so its
// arrivals come in bursts and its latencies start when a request is finally
// written (coordinated omission: a stalled server delays the next send, and
// the stall is never measured).
//
// Latency here is taken from the INTENDED send time, so queueing in the
// generator or the server counts; the service time (from the actual write)
// and the generator's own lag (actual - intended) are recorded too, so a
// report can show when the generator itself fell behind.
//
// Scheduling: Node's timers have 1 ms granularity and busy-polling the event
// loop burns a core a small machine needs for the server (and falls behind
// when it does not get it). Instead a clock thread (worker_threads) sleeps
// with Atomics.wait, whose timeout has sub-millisecond resolution (a futex
// with a timeout), and posts "requests due so far" to the main thread, which
// writes them. Its cost is a wake-up per due time, and the send lag it leaves
// (~0.02–0.1 ms when the machine is idle) is measured and reported.
// `precise: false` uses 1 ms timer ticks instead: each request may leave up
// to ~1 ms late, and that lag is part of its latency.

const { Worker } = require('node:worker_threads');
const H = require('./histogram');
const { countPids } = require('./autocannon-child');
const { PacerConn } = require('./pacer-conn');

function target(url, socketPath) {
  const u = new URL(url || 'http://localhost/');
  const path = u.pathname + u.search;
  const host = socketPath ? 'localhost' : u.host;
  return {
    conn: socketPath ? { socketPath } : { host: u.hostname, port: Number(u.port) || 80 },
    request: Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: tunekit-pacer\r\n\r\n`),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Unmeasured requests per connection before the clock starts.
const WARM_REQUESTS = 50;

// The timetable of a run: phases of a rate each ([{ rate, durationS, settleS }], one
// for a plain run), request i due at(i) ns after t0. dueBy(t): how many are due by
// t ns. A phase's first settleS seconds fill its queues: inPhase(i) is the phase
// whose figures request i counts in, null while its phase settles.
// Written without closures over this module: the clock thread evaluates its source.
function makeSchedule(phases) {
  const ps = [];
  let startNs = 0;
  let first = 0;
  for (const p of phases) {
    const count = Math.max(1, Math.round(p.rate * p.durationS));
    const intervalNs = 1e9 / p.rate;
    ps.push({ startNs, first, count, intervalNs, settleNs: (p.settleS || 0) * 1e9 });
    startNs += count * intervalNs;
    first += count;
  }
  const phaseOf = (i) => {
    let k = ps.length - 1;
    while (k > 0 && ps[k].first > i) k--;
    return k;
  };
  const at = (i) => {
    const p = ps[phaseOf(i)];
    return p.startNs + (i - p.first) * p.intervalNs;
  };
  const dueBy = (t) => {
    if (t < 0) return 0;
    let k = ps.length - 1;
    while (k > 0 && ps[k].startNs > t) k--;
    const p = ps[k];
    return Math.min(p.first + p.count, p.first + Math.floor((t - p.startNs) / p.intervalNs) + 1);
  };
  const inPhase = (i) => {
    const k = phaseOf(i);
    return at(i) - ps[k].startNs >= ps[k].settleNs ? k : null;
  };
  return { total: first, endNs: startNs, phases: ps, phaseOf, inPhase, at, dueBy };
}

// The clock thread: for request i due at t0 + at(i), sleep until then
// (Atomics.wait on a private cell nobody notifies: a pure sleep), then post
// the count of requests due by now.
const CLOCK_SOURCE = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
${makeSchedule.toString()}
parentPort.once('message', ({ t0: t0Text, phases }) => {
  const t0 = BigInt(t0Text);
  const { total, at, dueBy } = makeSchedule(phases);
  let i = 0;
  while (i < total) {
    const elapsed = Number(process.hrtime.bigint() - t0);
    const next = at(i);
    if (elapsed >= next) {
      i = dueBy(elapsed);
      parentPort.postMessage(i);
    } else {
      Atomics.wait(cell, 0, 0, (next - elapsed) / 1e6);
    }
  }
});
parentPort.postMessage('ready');
`;

// The figures of one slice of a run (a phase, or one second of it): served
// requests and their latency, refused ones (non-2xx) and how fast they were answered.
function createSlice() {
  return { ok: 0, non2xx: 0, errors: 0, timeouts: 0, kinds: {}, latency: H.createHistogram(), rejected: H.createHistogram() };
}

function countIn(slice, kind) {
  slice.kinds[kind] = (slice.kinds[kind] || 0) + 1;
}

// One run's bookkeeping: its histograms and counts, the idle connections and
// the requests waiting for one, and `finished`, resolved once every measured
// request has settled (answered, failed or timed out) or the clock failed.
class PacedRun {
  constructor(total, workerShare, { phases = 0, seconds = 0 } = {}) {
    this.total = total;
    this.workerShare = workerShare;
    // Per phase and per second of intended time, when the caller asked for them.
    this.phases = Array.from({ length: phases }, createSlice);
    this.seconds = Array.from({ length: seconds }, createSlice);
    // Open loop: a due request that finds every connection busy gets a new one
    // (open()), up to maxConnections; only past that cap does it wait.
    this.conns = [];
    this.warmUntil = 0; // no warm request starts after this (Date.now() ms; warmUp)
    this.warm = { sent: 0, answered: 0, failed: 0, givenUp: 0 };
    this.open = null;
    this.maxConnections = 0;
    this.opened = 0;
    this.samples = [];
    // 2xx answers by the second they came in (goodput), from t0.
    this.served = [];
    this.t0 = 0n;
    this.latency = H.createHistogram();
    this.service = H.createHistogram();
    this.lag = H.createHistogram();
    this.byPid = {};
    this.counts = { sent: 0, completed: 0, ok: 0, non2xx: 0, errors: 0, timeouts: 0, sampled: 0, queued: 0, maxQueue: 0 };
    this.kinds = {};
    this.lastSendNs = 0n;
    this.lastDoneNs = 0n;
    this.settled = 0;
    this.free = [];
    this.pending = [];
    this.clockError = null;
    this.finished = new Promise((r) => { this.resolveAll = r; });
  }

  count(kind, job) {
    this.kinds[kind] = (this.kinds[kind] || 0) + 1;
    for (const slice of this.slicesOf(job)) countIn(slice, kind);
  }

  // The slices a measured request counts in: its phase and its second.
  slicesOf(job) {
    const out = [];
    if (job && job.phase != null && this.phases.length) out.push(this.phases[job.phase]);
    if (job && job.second != null && this.seconds[job.second]) out.push(this.seconds[job.second]);
    return out;
  }

  settle() {
    if (++this.settled === this.total) this.resolveAll();
  }

  // Write a job on a connection; its lag is actual write - intended time.
  sendOn(c, job) {
    c.send(job);
    if (!job.warm) {
      H.recordNs(this.lag, job.sentNs - job.intendedNs);
      this.lastSendNs = job.sentNs;
    }
  }

  release(c) {
    if (this.pending.length) this.sendOn(c, this.pending.shift());
    else this.free.push(c);
  }

  // A due request: on an idle connection, else queued (the wait is part of its latency).
  dispatch(job) {
    const c = this.free.shift();
    if (c) {
      this.sendOn(c, job);
    } else if (this.open && this.conns.length < this.maxConnections) {
      this.opened++;
      this.sendOn(this.open(), job);
    } else {
      this.pending.push(job);
      this.counts.queued++;
      if (this.pending.length > this.counts.maxQueue) this.counts.maxQueue = this.pending.length;
    }
  }

  onDone(c, job, res) {
    if (job.warm) {
      this.warm.answered++;
      if (--job.left > 0 && Date.now() < this.warmUntil) {
        this.warm.sent++;
        c.send(job);
      } else {
        this.release(c);
      }
      return;
    }
    const doneNs = process.hrtime.bigint();
    this.lastDoneNs = doneNs;
    this.counts.completed++;
    const slices = this.slicesOf(job);
    if (res.status >= 200 && res.status < 300) {
      this.counts.ok++;
      H.recordNs(this.latency, doneNs - job.intendedNs);
      H.recordNs(this.service, doneNs - job.sentNs);
      if (this.seconds.length) {
        const at = Number(doneNs - this.t0) / 1e9;
        if (at >= 0) this.served[Math.floor(at)] = (this.served[Math.floor(at)] || 0) + 1;
      }
      for (const slice of slices) {
        slice.ok++;
        H.recordNs(slice.latency, doneNs - job.intendedNs);
      }
    } else {
      this.counts.non2xx++;
      this.count(`HTTP ${res.status}`, job);
      for (const slice of slices) {
        slice.non2xx++;
        H.recordNs(slice.rejected, doneNs - job.intendedNs);
      }
    }
    if (this.workerShare) this.counts.sampled += countPids(res.body, this.byPid);
    this.release(c);
    this.settle();
  }

  onFail(c, job, err) {
    if (job.warm) {
      this.warm.failed++;
    } else {
      this.counts.errors++;
      for (const slice of this.slicesOf(job)) slice.errors++;
      this.count((err && err.code) || (err && err.message) || 'error', job);
      this.settle();
    }
    this.release(c);
  }

  // Requests stuck longer than the timeout: drop their connection.
  sweep(timeoutNs) {
    const now = process.hrtime.bigint();
    for (const c of this.conns) {
      if (c.job && !c.job.warm && now - c.job.sentNs > timeoutNs) {
        const job = c.timeout();
        this.counts.timeouts++;
        for (const slice of this.slicesOf(job)) slice.timeouts++;
        this.count('timeout', job);
        this.settle();
        this.release(c);
      }
    }
  }
}

// The clock thread, booting (a new V8 isolate, tens of ms); `ready` resolves on its first message.
function startClock(run) {
  const clock = new Worker(CLOCK_SOURCE, { eval: true });
  clock.on('error', (err) => {
    run.clockError = err;
    run.resolveAll();
  });
  return { clock, ready: new Promise((resolve) => clock.once('message', resolve)) };
}

// Open the connections and send a few unmeasured requests on each, so
// neither side starts cold (JIT, connection set-up) inside the window: up to
// WARM_REQUESTS each, none started after WARM_MS. The window starts when every
// warm request is answered: one still out then would hold the server while the
// measured ones arrive (50 connections × 50 against an app of 100 req/s is 25 s
// of work: measured requests of a 20 req/s run waited 600 ms behind it). One
// still out after timeoutS more is given up with its connection, which reconnects.
const WARM_MS = 2000;
async function warmUp(run, conns, clockReady, timeoutS) {
  run.warmUntil = Date.now() + WARM_MS;
  for (const c of conns) c.send({ warm: true, left: WARM_REQUESTS, intendedNs: 0n });
  run.warm.sent += conns.length;
  const giveUpAt = run.warmUntil + timeoutS * 1000;
  while (run.free.length < conns.length && Date.now() < giveUpAt) await sleep(5);
  for (const c of conns) {
    if (c.job && c.job.warm) {
      run.warm.givenUp++;
      c.timeout();
      run.release(c);
    }
  }
  if (clockReady) await Promise.race([clockReady, sleep(10000)]);
  if (run.clockError) throw new Error(`the pacer's clock thread failed: ${run.clockError.message}`);
}

// Dispatch request i at t0 + i × interval: on the clock thread's messages, with
// a 1 ms timer tick as the whole schedule in timer mode and as a backstop for a
// late clock message in precise mode.
function schedule(run, clock, t0, phases) {
  const { total, at, dueBy, inPhase } = makeSchedule(phases);
  let i = 0;
  // Dispatch every request due by `due` (a count from the clock).
  const issue = (due) => {
    for (; i < due; i++) {
      const atNs = at(i);
      run.dispatch({ intendedNs: t0 + BigInt(Math.round(atNs)), sentNs: null, phase: inPhase(i), second: Math.floor(atNs / 1e9) });
      run.counts.sent++;
    }
  };
  if (clock) {
    clock.on('message', issue);
    clock.postMessage({ t0: String(t0), phases });
  }
  const tick = () => {
    issue(dueBy(Number(process.hrtime.bigint() - t0)));
    if (i < total) setTimeout(tick, 1);
  };
  setTimeout(tick, 2);
}

// A slice's figures: the requests due in it, answered 2xx (ok) or not (non2xx),
// failed or timed out; goodput (2xx answers that came in during it, per second);
// the latency of the 2xx ones from the intended send time; how fast the refused
// (non-2xx) ones were answered.
function sliceResult(slice, servedPerS) {
  return {
    ok: slice.ok, non2xx: slice.non2xx, errors: slice.errors, timeouts: slice.timeouts, kinds: slice.kinds,
    goodput: servedPerS,
    latencyUs: H.summarize(slice.latency),
    rejectedUs: slice.non2xx ? H.summarize(slice.rejected) : null,
  };
}

// The driver result of a finished run (see README.md, "Result").
function pacedResult(run, { t0, cpu, rate, precise, connections, phases }) {
  const { counts } = run;
  const sendWindowS = Number(run.lastSendNs - t0) / 1e9 + 1 / rate;
  const elapsedS = Number((run.lastDoneNs > run.lastSendNs ? run.lastDoneNs : run.lastSendNs) - t0) / 1e9;
  // Goodput of a window [fromS, toS): the 2xx answers of its whole seconds.
  const servedIn = (fromS, toS) => {
    let n = 0;
    for (let k = Math.ceil(fromS); k < Math.floor(toS); k++) n += run.served[k] || 0;
    return n / Math.max(1, Math.floor(toS) - Math.ceil(fromS));
  };
  let startS = 0;
  const detail = run.phases.length ? {
    phases: run.phases.map((slice, k) => {
      const from = startS + (phases[k].settleS || 0);
      startS += phases[k].durationS;
      return { ...phases[k], ...sliceResult(slice, servedIn(from, startS)) };
    }),
    timeline: run.seconds.map((slice, k) => ({ second: k, ...sliceResult(slice, run.served[k] || 0), sample: run.samples[k] || null })),
  } : {};
  return {
    driver: 'pacer',
    generator: { processes: 1, cpuUs: cpu.user + cpu.system, perProcessCpuShare: [(cpu.user + cpu.system) / 1e6 / elapsedS], clock: precise ? 'thread' : 'timer' },
    elapsedS,
    targetRate: rate,
    // What the timetable asked, on average: with phases (a ladder), not the first phase's rate.
    plannedRate: phases.reduce((a, p) => a + p.rate * p.durationS, 0) / phases.reduce((a, p) => a + p.durationS, 0),
    achievedRate: counts.sent / sendWindowS,
    reqPerSec: counts.completed / elapsedS,
    requests: { sent: counts.sent, completed: counts.completed, ok: counts.ok, non2xx: counts.non2xx, errors: counts.errors, timeouts: counts.timeouts, kinds: run.kinds },
    histogram: run.latency,
    serviceUs: H.summarize(run.service),
    sendLagUs: H.summarize(run.lag),
    // Requests that found every connection busy (and, open loop, the cap reached) and waited for one.
    queue: { queued: counts.queued, max: counts.maxQueue, connections, opened: run.opened, peak: run.conns.length },
    // The unmeasured warm-up before t0 (warmUp): every one sent was answered, failed or given up by then.
    warm: { ...run.warm },
    workers: run.workerShare ? { sampled: counts.sampled, byPid: run.byPid } : null,
    ...detail,
  };
}

// Send `rate` req/s for `duration` s over `connections` keep-alive
// connections (pacer-conn.js). A request due while every connection is busy
// waits in a queue, and that wait is part of its latency; with maxConnections
// above connections it gets a new connection instead (open loop: arrivals never
// wait for the server), and waits only once maxConnections are open.
// `phases` ([{ rate, durationS }]) replaces rate and duration with a ladder of
// rates in one run; the result then has per-phase figures and a per-second
// timeline (with `sample()`'s value, taken once a second, where given).
// Returns a driver result (see README.md, "Result").
async function runPaced({ url, socketPath = null, rate, duration, phases = null, connections = 32, maxConnections = 0, timeoutS = 10,
  workerShare = true, precise = true, sample = null, onProgress = () => {} }) {
  const plan = phases || [{ rate, durationS: duration }];
  for (const p of plan) if (!(p.rate > 0)) throw new Error(`paced mode needs a rate > 0 req/s (got ${p.rate})`);
  const t = target(url, socketPath);
  const timeoutNs = BigInt(Math.round(timeoutS * 1e9));
  const { total, endNs } = makeSchedule(plan);
  const totalS = endNs / 1e9;
  const run = new PacedRun(total, workerShare, phases ? { phases: plan.length, seconds: Math.ceil(totalS) } : {});
  const open = () => {
    const c = new PacerConn(t.conn, t.request, (conn, job, res) => run.onDone(conn, job, res), (conn, job, err) => run.onFail(conn, job, err));
    run.conns.push(c);
    return c;
  };
  for (let k = 0; k < connections; k++) open();
  if (maxConnections > connections) {
    run.open = open;
    run.maxConnections = maxConnections;
  }
  let clock = null;
  let sampler = null;

  try {
    // The clock thread boots during warm-up.
    const started = precise ? startClock(run) : null;
    clock = started && started.clock;
    await warmUp(run, run.conns, started && started.ready, timeoutS);
    const sweep = setInterval(() => run.sweep(timeoutNs), 100);

    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint() + 2000000n;
    run.t0 = t0;
    const progress = setInterval(() => onProgress(run.counts.completed), 1000);
    if (phases) {
      // Once a second: what the generator holds, and the caller's sample of the server.
      sampler = setInterval(async () => {
        const second = Math.floor(Number(process.hrtime.bigint() - t0) / 1e9);
        if (second < 0 || second >= run.seconds.length) return;
        const at = { connections: run.conns.length, busy: run.conns.length - run.free.length, waiting: run.pending.length };
        run.samples[second] = sample ? { ...at, ...(await sample().catch((err) => ({ error: err.message }))) } : at;
      }, 1000);
    }
    schedule(run, clock, t0, plan);

    // Bounded: give up on stragglers `timeoutS` after the last request is due.
    let guard;
    await Promise.race([run.finished, new Promise((r) => { guard = setTimeout(r, (totalS + timeoutS + 5) * 1000); })]);
    clearTimeout(guard);
    clearInterval(sweep);
    clearInterval(progress);
    clearInterval(sampler);
    if (run.clockError) throw new Error(`the pacer's clock thread failed: ${run.clockError.message}`);
    return pacedResult(run, { t0, cpu: process.cpuUsage(cpu0), rate: plan[0].rate, precise, connections, phases: plan });
  } finally {
    clearInterval(sampler);
    for (const c of run.conns) c.close();
    if (clock) await clock.terminate();
  }
}

module.exports = { runPaced, makeSchedule };
