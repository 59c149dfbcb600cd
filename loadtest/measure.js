'use strict';
// One measurement: drive a target with one driver in one mode and account
// for everything around it — server CPU of the nginx and app processes from
// /proc, nginx error.log lines added, per-worker share, the generator's own
// CPU — and turn it into a Result (schema in README.md).
//
// A target is { name, url, socketPath, pids(), appWorkers(), metricsUrl, errorLogPath, describe }:
// pids() returns { nginx: [master, ...workers], app: [primary, ...workers] }
// fresh from /proc (lib/stack.js's stack.pids()), or null for a remote target
// whose CPU cannot be seen from here; appWorkers() (optional) lists the app
// worker pids that should serve requests; metricsUrl (optional) is the runner's
// metrics endpoint, which counts who served (metered.js), for any app.
//
// Who served: the runner's count when the target has its endpoint. Without one
// (the runner's metrics off, a bare node:cluster, a deployment given by --url),
// the generators count the "pid": field of the answers instead, which only an app
// that writes it (the kit's example app) has: no pid in the answers, no count.

const cpu = require('./cpu');
const { allowedCpus } = require('./pin');
const errorlog = require('./errorlog');
const H = require('./histogram');
const { assess } = require('./workershare');
const { aroundRun } = require('./metered');
const { startRunProbe } = require('./speed-probe');
const { runAutocannon } = require('./autocannon');
const { runWrk } = require('./wrk');
const { runH2load } = require('./h2load');
const { runPaced } = require('./pacer');
const { kindsText } = require('./format');
const { UsageError } = require('../lib/errors');

// A generator process at or above this share of one core is itself the limit.
const CLIENT_BOUND_CORE_SHARE = 0.9;
// A generator taking this share of the whole machine leaves the server short.
const CLIENT_MACHINE_SHARE = 0.4;
// Other processes (not server, not generator) using this share of all cores
// during a run make its absolute figures unrepresentative.
const OTHER_LOAD_CORES = 0.25;
// Paced mode: the pacer is late if its p99 send lag exceeds this (µs).
const PACER_LAG_LIMIT_US = 1000;

function allPids(p) {
  return p ? [...(p.nginx || []), ...(p.app || [])] : [];
}

async function drive(target, o) {
  const common = { connections: o.connections, duration: o.duration, timeoutS: o.timeoutS, onProgress: o.onProgress };
  // wrk and h2load do not verify the server's certificate: over HTTPS they
  // run only where the caller says so (the TLS bench, loopback).
  if (target.ca && (o.mode === 'paced' || (o.driver !== 'autocannon' && !o.unverifiedTls))) {
    throw new UsageError(`${target.url}: over HTTPS only the autocannon driver runs here (it trusts the stack's CA); drop --driver wrk and --paced`);
  }
  if (o.mode === 'paced') {
    return runPaced({ ...common, url: target.url, socketPath: target.socketPath, rate: o.rate, precise: o.precise !== false, workerShare: o.workerShare,
      phases: o.phases || null, maxConnections: o.maxConnections || 0, sample: o.sample || null });
  }
  if (o.driver === 'h2load') {
    return runH2load({ ...common, url: target.url, kind: o.h2loadKind, streams: o.streams });
  }
  if (o.driver === 'wrk') {
    if (target.socketPath) throw new UsageError(`wrk cannot connect to a Unix socket (${target.socketPath}); use --driver autocannon for this target`);
    return runWrk({ ...common, url: target.url, threads: o.threads || cpu.cores(), headers: o.headers, paths: o.paths || null });
  }
  // A compressed body hides the example app's "pid":N, so who answered is not counted
  // when the load asks for compression.
  const headers = o.headers || [];
  const compressed = headers.some((h) => /^accept-encoding\s*:/i.test(h));
  return runAutocannon({ ...common, url: target.url, ca: target.ca, socketPath: target.socketPath, rate: o.mode === 'rate' ? o.rate : 0, procs: o.procs || 1,
    paths: o.paths || null, headers, workerShare: o.workerShare && !compressed });
}

function clientWarnings(mode, gen, extra) {
  const w = [];
  if (mode === 'paced') {
    const q = extra.queue;
    const queued = q && q.queued > 0.01 * (extra.requests ? extra.requests.sent : 0);
    if (queued) {
      w.push(`the target did not keep up with ${extra.targetRate} req/s: ${q.queued} requests found all ${q.connections} connections busy ` +
        `(queue up to ${q.max}); the wait is part of their latency. Past capacity, or raise --connections`);
    }
    const asked = extra.plannedRate ?? extra.targetRate;
    if (extra.achievedRate < asked * 0.98) {
      w.push(`the pacer sent ${Math.round(extra.achievedRate)} req/s, short of the ${Math.round(asked)} asked: ` +
        (queued ? 'requests queued for a free connection' : 'the generator is short of CPU; lower --rate'));
    }
    if (extra.sendLagUs && extra.sendLagUs.p99 > PACER_LAG_LIMIT_US) {
      w.push(`the pacer's p99 send lag was ${extra.sendLagUs.p99} µs: late sends count in the latency (measured from the intended time); the generator or the machine is busy`);
    }
    return w;
  }
  // wrk reports its threads' average share; autocannon one share per process.
  const busiest = Math.max(...gen.perProcessCpuShare);
  if (busiest >= CLIENT_BOUND_CORE_SHARE) {
    w.push(`client-bound: a generator ${gen.threads ? 'thread' : 'process'} used ${Math.round(busiest * 100)}% of a core; the load generator, not the server, may be the limit (more --procs, or --driver wrk)`);
  }
  if (gen.machineShare >= CLIENT_MACHINE_SHARE) {
    w.push(`the generator used ${Math.round(gen.machineShare * 100)}% of this machine's ${cpu.cores()} cores: server figures are lower bounds`);
  }
  return w;
}

/**
 * The server's CPU over the run, from the /proc snapshots before and after, split
 * into nginx and app (pids: each side's processes as seen before and after).
 * Null for a target whose pids this machine cannot see.
 */
function serverCpu(pidsBefore, pidsAfter, before, after, d) {
  if (!pidsBefore) return null;
  const split = (names) => {
    const ids = new Set(names);
    return cpu.delta(new Map([...before].filter(([p]) => ids.has(p))), new Map([...after].filter(([p]) => ids.has(p))));
  };
  const total = cpu.delta(before, after);
  const nginxPids = [...(pidsBefore.nginx || []), ...((pidsAfter && pidsAfter.nginx) || [])];
  const appPids = [...(pidsBefore.app || []), ...((pidsAfter && pidsAfter.app) || [])];
  // Each side rounded once; the total is their sum, so the parts add up.
  const nginxUs = split(nginxPids).us;
  const appUs = split(appPids).us;
  const us = nginxUs + appUs;
  // How evenly each side's workers shared the work: the busiest one's share of
  // their CPU (nginx: the workers past the master; app: past the primary).
  // With reuseport the kernel hashes each new connection to a worker, so a run's
  // few generator connections can land unevenly (docs/benchmarks.md).
  const top = (pids) => {
    const us = pids.map((p) => (after.has(p) ? after.get(p) - (before.get(p) || 0) : 0));
    const sum = us.reduce((a, b) => a + b, 0);
    return pids.length > 1 && sum > 0 ? Math.max(...us) / sum : null;
  };
  return {
    cpuUs: us,
    nginxCpuUs: nginxUs,
    appCpuUs: appUs,
    cpuUsPerReq: d.requests.completed ? us / d.requests.completed : null,
    cores: us / 1e6 / d.elapsedS,
    source: cpu.cpuSource(),
    processes: { nginx: (pidsBefore.nginx || []).length, app: (pidsBefore.app || []).length },
    topWorkerCpuShare: { nginx: top((pidsBefore.nginx || []).slice(1)), app: top((pidsBefore.app || []).slice(1)) },
    pids: pidsBefore,
    vanished: total.vanished,
  };
}

/**
 * How the scheduler treated the server's threads over the run (cpu.schedSnapshot):
 * the share of their runnable time spent waiting for a CPU, and per 1,000
 * requests their moves between CPUs and their preemptions. The bench's noise is
 * read against these (docs/benchmarks.md): a stack whose threads wait or move
 * more in one round than its twin's is slower for that, not for its values.
 */
function schedPerRequest(sched, server, d) {
  const n = d.requests.completed;
  const perK = (v) => (v == null || !n ? null : (v * 1000) / n);
  return {
    waitUs: Math.round(sched.waitUs),
    waitShare: sched.waitUs + server.cpuUs > 0 ? sched.waitUs / (sched.waitUs + server.cpuUs) : null,
    migrationsPerKReq: perK(sched.migrations),
    involuntaryPerKReq: perK(sched.involuntary),
  };
}

/** The whole machine over the run: its busy cores, and how many went to neither side. */
function machineLoad(machine0, machine1, gen, server, d) {
  const busyCores = cpu.machineBusyCores(machine0, machine1);
  return {
    cores: cpu.cores(),
    busyCores,
    // The hypervisor's: time this VM's CPUs wanted to run and another guest ran.
    stealCores: machine0 && machine1 ? (machine1.stealUs - machine0.stealUs) / 1e6 / d.elapsedS : null,
    // The speed probe just before and just after the run (cpu.speedProbeUs): the CPU
    // time a fixed piece of work took; more µs, a slower CPU than its other runs had.
    speedProbeUs: machine1 && machine1.probeUs ? machine1.probeUs : null,
    // The same work timed every quarter second during the run (speed-probe.js):
    // { tries, medianUs, meanUs, slowShare (tries ≥ 1.5× the run's quickest) }.
    speedProbeRun: machine1 && machine1.probeRun ? machine1.probeRun : null,
    // Without the server's pids (--url, --socket) its CPU cannot be told
    // apart from other tenants': not measured, rather than counted as theirs.
    otherCores: busyCores == null || !server ? null
      : Math.max(0, busyCores - gen.cpuUs / 1e6 / d.elapsedS - server.cores),
  };
}

/** What a reader of the result must know to trust its figures, one line each. */
function resultWarnings(result, o) {
  const w = [];
  const { server, machine, generator: gen } = result;
  // A generator that got no response spun on errors: its CPU says nothing
  // about the server, so no client-bound warning then.
  if (result.requests.ok > 0) w.push(...clientWarnings(o.mode, gen, result));
  if (server && machine.otherCores != null && machine.otherCores >= OTHER_LOAD_CORES * machine.cores) {
    w.push(`other processes (other tenants, kernel threads) kept ${machine.otherCores.toFixed(1)} of ${machine.cores} cores busy during this run: ` +
      'absolute figures are from a shared machine; compare ratios from the same round');
  }
  if (result.stalled) {
    const st = result.stalled;
    w.push(`the target stopped answering ${st.lastResponseS.toFixed(1)} s into the run (${st.errors} errors and no response after that): ` +
      `the run stopped at ${st.atS.toFixed(1)} s of ${o.duration}; the figures cover the time it answered and the stall`);
  }
  const r = result.requests;
  if (r.errors || r.timeouts || r.non2xx) {
    const kinds = kindsText(r.kinds);
    w.push(`${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx responses${kinds ? `: ${kinds}` : ''}`);
  }
  if (result.errorLog && result.errorLog.unreadable) {
    w.push(`cannot read the error log ${result.errorLog.file} (${result.errorLog.unreadable}): its lines are not counted; ` +
      'pass --error-log with the path nginx writes (error_log in nginx.conf) and make it readable');
  }
  if (result.errorLog && result.errorLog.lines) {
    w.push(`nginx wrote ${result.errorLog.lines} error.log lines, e.g. ${result.errorLog.sample[0]}`);
  }
  if (result.metered && result.metered.requests != null && result.metered.requests < r.completed) {
    w.push(`the runner's meter counted ${result.metered.requests} requests, fewer than the ${r.completed} responses (${result.metered.url})`);
  }
  if (result.metered && result.metered.error) {
    w.push(`the runner's metrics endpoint ${result.metered.url} did not answer around the run (${result.metered.error}): who served is not counted`);
  }
  if (result.workers && result.workers.missing.length) {
    w.push(`app workers ${result.workers.missing.join(', ')} served no request: ` +
      'each connection lands on one worker, so few connections or a greedy accept leave a worker idle');
  }
  if (server && server.vanished) {
    w.push(`${server.vanished} server processes exited during the run; their CPU is missing`);
  }
  return w;
}

// Where the run's processes may run (their CPU affinity lists at its start, as
// /proc/PID/status says): the server's distinct lists, and this process's, which
// the drivers it starts inherit. `bench --own-core` and `--pin` show here.
function cpusAllowed(pids) {
  const lists = allPids(pids).map(allowedCpus).filter((x) => x !== null);
  return { server: pids ? [...new Set(lists)].sort() : null, generator: allowedCpus(process.pid) };
}

// The run itself with what is read around it from /proc: CPU, the machine, the error log.
async function accounted(target, o) {
  const pidsBefore = target.pids ? target.pids() : null;
  const cpus = cpusAllowed(pidsBefore);
  const before = cpu.snapshot(allPids(pidsBefore));
  const sched0 = cpu.schedSnapshot(allPids(pidsBefore));
  const mark = errorlog.mark(target.errorLogPath);
  const startedAt = new Date().toISOString();
  const probe0 = cpu.speedProbeUs();
  const during = await startRunProbe();
  const machine0 = cpu.machineSnapshot();

  let d;
  let probeRun;
  try {
    d = await drive(target, o);
  } finally {
    probeRun = await during.stop();
  }

  const machine1 = cpu.machineSnapshot();
  if (machine1) {
    machine1.probeUs = [probe0, cpu.speedProbeUs()];
    machine1.probeRun = probeRun;
  }
  const pidsAfter = target.pids ? target.pids() : null;
  const seen = [...new Set([...allPids(pidsBefore), ...allPids(pidsAfter)])];
  const after = cpu.snapshot(seen);
  const sched = cpu.schedDelta(sched0, cpu.schedSnapshot(seen));
  return { d, pidsBefore, pidsAfter, before, after, sched, mark, startedAt, machine0, machine1, cpus };
}

// Run one measurement. `o`: { mode: 'saturation'|'paced'|'rate', driver,
// duration, connections, rate, procs, timeoutS, onProgress }.
async function measure(target, o) {
  // The runner's endpoint is read outside the CPU snapshots: the scrapes are not the run's.
  const meterUrl = target.metricsUrl || null;
  const { value: run, counts, error: meterError } = meterUrl
    ? await aroundRun(meterUrl, () => accounted(target, { ...o, workerShare: false }))
    : { value: await accounted(target, { ...o, workerShare: true }), counts: null, error: null };
  const { d, pidsBefore, pidsAfter, before, after, sched, mark, startedAt, machine0, machine1, cpus } = run;
  const server = serverCpu(pidsBefore, pidsAfter, before, after, d);
  if (server) {
    server.sched = schedPerRequest(sched, server, d);
    server.cpus = cpus.server;
  }

  const gen = { ...d.generator, cpus: cpus.generator };
  gen.machineShare = gen.cpuUs / 1e6 / d.elapsedS / cpu.cores();
  // Everything else that ran meanwhile: other tenants of a shared machine.
  const machine = machineLoad(machine0, machine1, gen, server, d);
  const latencyUs = d.latencyUs || H.summarize(d.histogram);
  // The workers expected to serve: the target's list (the runner's "ready"
  // line; it also keeps an idle spare child) or every child of the primary.
  const appWorkers = target.appWorkers ? target.appWorkers() : pidsBefore && pidsBefore.app ? pidsBefore.app.slice(1) : null;
  const result = {
    scenario: target.name,
    target: { url: target.url, socketPath: target.socketPath || null, describe: target.describe || null },
    driver: d.driver,
    mode: o.mode,
    startedAt,
    durationS: d.elapsedS,
    connections: o.connections,
    targetRate: o.mode === 'saturation' ? null : o.rate,
    ...(d.plannedRate != null && { plannedRate: d.plannedRate }),
    achievedRate: d.achievedRate != null ? d.achievedRate : null,
    reqPerSec: d.reqPerSec,
    requests: d.requests,
    latencyUs,
    serviceUs: d.serviceUs || null,
    sendLagUs: d.sendLagUs || null,
    queue: d.queue || null,
    // A ladder of rates (pacer phases): per-step figures and a per-second timeline.
    ...(d.phases && { phases: d.phases, timeline: d.timeline }),
    errorLog: errorlog.linesSince(mark),
    server,
    generator: gen,
    machine,
    workers: counts ? assess(counts, appWorkers, 'runner') : assess(d.workers, appWorkers, 'body'),
    // The runner's meter around the run: the requests it counted (every worker, every class).
    metered: meterUrl ? { url: meterUrl, requests: counts ? counts.sampled : null, ...(meterError && { error: meterError }) } : null,
    // What only this driver reports (wrk: bytes read; h2load: the protocol).
    raw: d.raw || null,
    // The target stopped answering mid-run and the generator stopped early.
    stalled: d.stalled || null,
    warnings: [],
  };
  result.warnings.push(...resultWarnings(result, o));
  // Keep the merged histogram for callers that merge rounds; not serialised.
  Object.defineProperty(result, 'histogram', { value: d.histogram || null, enumerable: false });
  return result;
}

module.exports = { measure, clientWarnings, CLIENT_BOUND_CORE_SHARE, OTHER_LOAD_CORES };
