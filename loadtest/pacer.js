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

// The clock thread: for request i due at t0 + i × interval, sleep until then
// (Atomics.wait on a private cell nobody notifies: a pure sleep), then post
// the count of requests due by now.
const CLOCK_SOURCE = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
parentPort.once('message', ({ t0: t0Text, intervalNs, total }) => {
  const t0 = BigInt(t0Text);
  let i = 0;
  while (i < total) {
    const elapsed = Number(process.hrtime.bigint() - t0);
    const next = i * intervalNs;
    if (elapsed >= next) {
      i = Math.min(total, Math.floor(elapsed / intervalNs) + 1);
      parentPort.postMessage(i);
    } else {
      Atomics.wait(cell, 0, 0, (next - elapsed) / 1e6);
    }
  }
});
parentPort.postMessage('ready');
`;

// One run's bookkeeping: its histograms and counts, the idle connections and
// the requests waiting for one, and `finished`, resolved once every measured
// request has settled (answered, failed or timed out) or the clock failed.
class PacedRun {
  constructor(total, workerShare) {
    this.total = total;
    this.workerShare = workerShare;
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

  count(kind) { this.kinds[kind] = (this.kinds[kind] || 0) + 1; }

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
    } else {
      this.pending.push(job);
      this.counts.queued++;
      if (this.pending.length > this.counts.maxQueue) this.counts.maxQueue = this.pending.length;
    }
  }

  onDone(c, job, res) {
    if (job.warm) {
      if (--job.left > 0) c.send(job);
      else this.release(c);
      return;
    }
    const doneNs = process.hrtime.bigint();
    this.lastDoneNs = doneNs;
    this.counts.completed++;
    if (res.status >= 200 && res.status < 300) {
      this.counts.ok++;
      H.recordNs(this.latency, doneNs - job.intendedNs);
      H.recordNs(this.service, doneNs - job.sentNs);
    } else {
      this.counts.non2xx++;
      this.count(`HTTP ${res.status}`);
    }
    if (this.workerShare) this.counts.sampled += countPids(res.body, this.byPid);
    this.release(c);
    this.settle();
  }

  onFail(c, job, err) {
    if (!job.warm) {
      this.counts.errors++;
      this.count((err && err.code) || (err && err.message) || 'error');
      this.settle();
    }
    this.release(c);
  }

  // Requests stuck longer than the timeout: drop their connection.
  sweep(conns, timeoutNs) {
    const now = process.hrtime.bigint();
    for (const c of conns) {
      if (c.job && !c.job.warm && now - c.job.sentNs > timeoutNs) {
        c.timeout();
        this.counts.timeouts++;
        this.count('timeout');
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
// neither side starts cold (JIT, connection set-up) inside the window.
async function warmUp(run, conns, clockReady) {
  const warmDeadline = Date.now() + 5000;
  for (const c of conns) c.send({ warm: true, left: WARM_REQUESTS, intendedNs: 0n });
  while (run.free.length < conns.length && Date.now() < warmDeadline) await sleep(5);
  if (clockReady) await Promise.race([clockReady, sleep(10000)]);
  if (run.clockError) throw new Error(`the pacer's clock thread failed: ${run.clockError.message}`);
}

// Dispatch request i at t0 + i × interval: on the clock thread's messages, with
// a 1 ms timer tick as the whole schedule in timer mode and as a backstop for a
// late clock message in precise mode.
function schedule(run, clock, t0, intervalNs) {
  const { total } = run;
  let i = 0;
  // Dispatch every request due by `due` (a count from the clock).
  const issue = (due) => {
    for (; i < due; i++) {
      run.dispatch({ intendedNs: t0 + BigInt(Math.round(i * intervalNs)), sentNs: null });
      run.counts.sent++;
    }
  };
  if (clock) {
    clock.on('message', issue);
    clock.postMessage({ t0: String(t0), intervalNs, total });
  }
  const tick = () => {
    const elapsedNs = Number(process.hrtime.bigint() - t0);
    issue(Math.min(total, elapsedNs < 0 ? 0 : Math.floor(elapsedNs / intervalNs) + 1));
    if (i < total) setTimeout(tick, 1);
  };
  setTimeout(tick, 2);
}

// The driver result of a finished run (see README.md, "Result").
function pacedResult(run, { t0, cpu, rate, precise, connections }) {
  const { counts } = run;
  const sendWindowS = Number(run.lastSendNs - t0) / 1e9 + 1 / rate;
  const elapsedS = Number((run.lastDoneNs > run.lastSendNs ? run.lastDoneNs : run.lastSendNs) - t0) / 1e9;
  return {
    driver: 'pacer',
    generator: { processes: 1, cpuUs: cpu.user + cpu.system, perProcessCpuShare: [(cpu.user + cpu.system) / 1e6 / elapsedS], clock: precise ? 'thread' : 'timer' },
    elapsedS,
    targetRate: rate,
    achievedRate: counts.sent / sendWindowS,
    reqPerSec: counts.completed / elapsedS,
    requests: { sent: counts.sent, completed: counts.completed, ok: counts.ok, non2xx: counts.non2xx, errors: counts.errors, timeouts: counts.timeouts, kinds: run.kinds },
    histogram: run.latency,
    serviceUs: H.summarize(run.service),
    sendLagUs: H.summarize(run.lag),
    // Requests that found every connection busy and waited for one.
    queue: { queued: counts.queued, max: counts.maxQueue, connections },
    workers: run.workerShare ? { sampled: counts.sampled, byPid: run.byPid } : null,
  };
}

// Send `rate` req/s for `duration` s over `connections` keep-alive
// connections (pacer-conn.js). A request due while every connection is busy
// waits in a queue, and that wait is part of its latency. Returns a driver
// result (see README.md, "Result").
async function runPaced({ url, socketPath = null, rate, duration, connections = 32, timeoutS = 10, workerShare = true, precise = true, onProgress = () => {} }) {
  if (!(rate > 0)) throw new Error(`paced mode needs a rate > 0 req/s (got ${rate})`);
  const t = target(url, socketPath);
  const timeoutNs = BigInt(Math.round(timeoutS * 1e9));
  const total = Math.max(1, Math.round(rate * duration));
  const intervalNs = 1e9 / rate;
  const run = new PacedRun(total, workerShare);
  const conns = Array.from({ length: connections }, () => new PacerConn(t.conn, t.request,
    (c, job, res) => run.onDone(c, job, res), (c, job, err) => run.onFail(c, job, err)));
  let clock = null;

  try {
    // The clock thread boots during warm-up.
    const started = precise ? startClock(run) : null;
    clock = started && started.clock;
    await warmUp(run, conns, started && started.ready);
    const sweep = setInterval(() => run.sweep(conns, timeoutNs), 100);

    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint() + 2000000n;
    const progress = setInterval(() => onProgress(run.counts.completed), 1000);
    schedule(run, clock, t0, intervalNs);

    // Bounded: give up on stragglers `timeoutS` after the last request is due.
    let guard;
    await Promise.race([run.finished, new Promise((r) => { guard = setTimeout(r, (duration + timeoutS + 5) * 1000); })]);
    clearTimeout(guard);
    clearInterval(sweep);
    clearInterval(progress);
    if (run.clockError) throw new Error(`the pacer's clock thread failed: ${run.clockError.message}`);
    return pacedResult(run, { t0, cpu: process.cpuUsage(cpu0), rate, precise, connections });
  } finally {
    for (const c of conns) c.close();
    if (clock) await clock.terminate();
  }
}

module.exports = { runPaced };
