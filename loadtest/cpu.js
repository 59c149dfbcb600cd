'use strict';
// CPU accounting from /proc: the server's time (nginx + app processes) and the
// load generator's own.
//
// Source: the scheduler's own runtime of every thread, the first field of
// /proc/PID/task/TID/schedstat, in nanoseconds. The classic utime + stime of
// /proc/PID/stat (fields 14, 15) are tick-sampled (CONFIG_TICK_CPU_ACCOUNTING:
// at each timer tick, HZ=250 here, the running task is charged a whole tick)
// and shown in 10 ms units, too coarse for a 1-second run at 200 req/s and
// biased for processes that wake briefly. stat is the fallback when schedstat
// is missing (kernels without CONFIG_SCHED_INFO). Processes or threads that
// exit during a run lose their time; the result says how many pids vanished.
// https://docs.kernel.org/scheduler/sched-stats.html
// https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html

const fs = require('node:fs');
const os = require('node:os');
const { spawnSync } = require('node:child_process');

let ticksPerSecond = null;
function clockTicks() {
  if (ticksPerSecond === null) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(String(r.stdout || '').trim());
    ticksPerSecond = Number.isInteger(n) && n > 0 ? n : 100;
  }
  return ticksPerSecond;
}

// Parse the text of /proc/PID/stat: the command name (field 2) may contain
// spaces and parentheses, so split after the last ')'.
function parseStat(text) {
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); field N is rest[N - 3].
  return {
    utime: Number(rest[11]),
    stime: Number(rest[12]),
    cutime: Number(rest[13]),
    cstime: Number(rest[14]),
  };
}

function readStat(pid) {
  try {
    return parseStat(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

// Runtime (µs) of all threads of pid from schedstat, or null.
function readSchedstatUs(pid) {
  let tids;
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let ns = 0;
  let seen = 0;
  for (const tid of tids) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      seen++;
    } catch {
      // thread exited while we looked
    }
  }
  return seen ? ns / 1000 : null;
}

let source = null;
// 'schedstat' when this kernel has per-thread runtime, else 'stat'.
function cpuSource() {
  if (source === null) source = fs.existsSync('/proc/self/schedstat') ? 'schedstat' : 'stat';
  return source;
}

// CPU time (µs) of each pid still alive: Map pid -> µs.
function snapshot(pids) {
  const usPerTick = 1e6 / clockTicks();
  const useSchedstat = cpuSource() === 'schedstat';
  const out = new Map();
  for (const pid of pids) {
    if (useSchedstat) {
      const us = readSchedstatUs(pid);
      if (us !== null) out.set(pid, us);
      continue;
    }
    const s = readStat(pid);
    if (s) out.set(pid, (s.utime + s.stime) * usPerTick);
  }
  return out;
}

// Sum of CPU µs spent between two snapshots. A pid that appears only in
// `after` started during the run and counts in full; one only in `before`
// exited and is reported in `vanished` (its last ticks are lost).
function delta(before, after) {
  let us = 0;
  let vanished = 0;
  for (const [pid, end] of after) us += end - (before.get(pid) || 0);
  for (const pid of before.keys()) if (!after.has(pid)) vanished++;
  return { us: Math.round(us), vanished };
}

// CPU µs of this process's reaped children (cutime + cstime): the delta across
// a child's life is that child's CPU (used for wrk, which exits when done).
function reapedChildrenUs() {
  const s = readStat('self');
  return s ? (s.cutime + s.cstime) * (1e6 / clockTicks()) : 0;
}

// The CPUs this process may use when it loaded (its affinity: a container's cpuset
// counts, not the host's), read once: `bench --overload --own-core` later narrows this
// process to one CPU, and every figure "of the machine's cores" must not follow it.
const CORES_AT_LOAD = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
function cores() {
  return CORES_AT_LOAD;
}

module.exports = { clockTicks, parseStat, readStat, readSchedstatUs, cpuSource, snapshot, delta, reapedChildrenUs, cores };



// The whole machine's busy and total CPU time (µs, all cores) from the first
// line of /proc/stat: user nice system idle iowait irq softirq steal …
function machineSnapshot() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const usPerTick = 1e6 / clockTicks();
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = f[3] + f[4];
    return { busyUs: (total - idle) * usPerTick, totalUs: total * usPerTick, stealUs: f[7] * usPerTick, at: process.hrtime.bigint() };
  } catch {
    return null;
  }
}

// Cores kept busy between two machine snapshots (by anything at all).
function machineBusyCores(before, after) {
  if (!before || !after) return null;
  const seconds = Number(after.at - before.at) / 1e9;
  return seconds > 0 ? (after.busyUs - before.busyUs) / 1e6 / seconds : null;
}

// How the scheduler treated each pid's threads (summed): the time they were
// runnable but waiting for a CPU (the second field of schedstat, ns), their
// moves between CPUs (se.nr_migrations of /proc/PID/task/TID/sched, present
// when the kernel has CONFIG_SCHED_DEBUG) and the times they were taken off a
// CPU while still runnable (nonvoluntary_ctxt_switches of status). Map pid ->
// { waitUs, migrations, involuntary }; a field the kernel does not show is null.
// https://docs.kernel.org/scheduler/sched-stats.html
function schedSnapshot(pids) {
  const out = new Map();
  const field = (text, re) => { const m = re.exec(text); return m ? Number(m[1]) : null; };
  const add = (a, b) => (a == null || b == null ? null : a + b);
  for (const pid of pids) {
    let tids;
    try {
      tids = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    let acc = null;
    for (const tid of tids) {
      const dir = `/proc/${pid}/task/${tid}`;
      let t;
      try {
        t = {
          waitUs: Number(fs.readFileSync(`${dir}/schedstat`, 'utf8').split(' ')[1]) / 1000,
          involuntary: field(fs.readFileSync(`${dir}/status`, 'utf8'), /^nonvoluntary_ctxt_switches:\s+(\d+)/m),
        };
      } catch {
        continue; // thread exited while we looked
      }
      try {
        t.migrations = field(fs.readFileSync(`${dir}/sched`, 'utf8'), /^se\.nr_migrations\s+:\s+(\d+)/m);
      } catch {
        t.migrations = null;
      }
      acc = acc ? { waitUs: acc.waitUs + t.waitUs, involuntary: add(acc.involuntary, t.involuntary), migrations: add(acc.migrations, t.migrations) } : t;
    }
    if (acc) out.set(pid, acc);
  }
  return out;
}

// The growth of each schedSnapshot field between two snapshots, over the pids
// alive at both (a pid that came or went has no baseline).
function schedDelta(before, after) {
  const sum = { waitUs: 0, migrations: 0, involuntary: 0 };
  for (const [pid, b] of before) {
    const a = after.get(pid);
    if (!a) continue;
    for (const k of Object.keys(sum)) sum[k] = sum[k] == null || a[k] == null || b[k] == null ? null : sum[k] + a[k] - b[k];
  }
  return sum;
}

// How fast this machine's CPU is right now: the CPU time (getrusage, µs) a fixed
// piece of work takes in this process — a chain of SHA-256 digests — the least of
// five tries (a try that was preempted or migrated only takes longer). Other
// guests of a VM's host can slow a vCPU without any steal time showing (a shared
// core's sibling thread, the last-level cache, memory bandwidth): the same work
// then takes more CPU time, for the stacks under test as for this probe.
const PROBE_ROUNDS = 4000;
function speedProbeUs() {
  let best = Infinity;
  for (let t = 0; t < 5; t++) best = Math.min(best, probeOnceUs());
  return best;
}

/** One try of the probe's work: its CPU time in µs. */
function probeOnceUs() {
  const crypto = require('node:crypto');
  const u0 = process.cpuUsage();
  let h = Buffer.alloc(32);
  for (let i = 0; i < PROBE_ROUNDS; i++) h = crypto.createHash('sha256').update(h).digest();
  const u = process.cpuUsage(u0);
  return u.user + u.system;
}

module.exports.speedProbeUs = speedProbeUs;
module.exports.probeOnceUs = probeOnceUs;
module.exports.machineSnapshot = machineSnapshot;
module.exports.machineBusyCores = machineBusyCores;
module.exports.schedSnapshot = schedSnapshot;
module.exports.schedDelta = schedDelta;
