'use strict';
// `bench --pin`: each nginx worker and each app worker of a stack on a CPU of
// its own choosing (worker k on CPU k mod cores, nginx's and the app's counted
// separately, as nginx's `worker_cpu_affinity auto` places its workers), every
// thread of the process, by taskset(1) (util-linux: sched_setaffinity(2)). The
// masters, the runner's primary and the load generator stay free. An experiment
// of the bench's noise (docs/benchmarks.md): does a fixed placement make twin
// stacks agree more closely than the scheduler's own? A worker forked later (the
// runner's spare, a replacement) is not pinned.
// https://man7.org/linux/man-pages/man1/taskset.1.html

const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const cpu = require('./cpu');

/** CPU of the k-th worker (0-based) on a machine of n cores. */
function cpuFor(k, n) {
  return k % n;
}

/** The CPUs a pid may run on (Cpus_allowed_list of /proc/PID/status), or null when it is gone. */
function allowedCpus(pid) {
  try {
    return /^Cpus_allowed_list:\s+(\S+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1];
  } catch {
    return null;
  }
}

/** taskset(1) every thread of pid onto the CPU list cpus: its failure text, or null. */
function taskset(pid, cpus, run) {
  const r = run('taskset', ['-a', '-p', '-c', String(cpus), String(pid)], { encoding: 'utf8' });
  if (!r.error && r.status === 0) return null;
  return r.error ? r.error.message : String(r.stderr || '').trim();
}

/**
 * Pin a stack's workers; pids: { nginx: [master, ...workers], app: [primary, ...workers] }.
 * Returns [{ pid, role, cpu }]; throws naming taskset and the pid when it fails.
 */
function pinStack(pids, { cores = cpu.cores(), run = spawnSync } = {}) {
  const placed = [];
  for (const role of ['nginx', 'app']) {
    (pids[role] || []).slice(1).forEach((pid, k) => {
      const c = cpuFor(k, cores);
      const why = taskset(pid, c, run);
      if (why !== null) {
        throw new Error(`taskset could not pin ${role} worker ${pid} to CPU ${c}: ${why}; install util-linux (taskset), or run the bench without --pin`);
      }
      // taskset -a on a pid that is gone pins no thread and still exits 0.
      if (allowedCpus(pid) !== String(c)) {
        throw new Error(`taskset could not pin ${role} worker ${pid} to CPU ${c}: the process is gone or kept its CPUs; run the bench without --pin`);
      }
      placed.push({ pid, role, cpu: c });
    });
  }
  return placed;
}

// `bench --overload --own-core`: the load generator (the bench's own process, and
// what it starts later: wrk, ss) alone on CPU 0, every process of every stack on
// the others. Past capacity the open-loop generator's CPU grows with the load it
// offers; on shared cores it comes out of the server's, and goodput "against the
// capacity" then measures the generator too.

/** The split of a machine of n cores: { generator: '0', stacks: '1' | '1-(n-1)' }, or null under 2 cores. */
function ownCoreSplit(n) {
  if (!(n >= 2)) return null;
  return { generator: '0', stacks: n === 2 ? '1' : `1-${n - 1}` };
}

/** The split for `--own-core` on this machine; throws naming the need when it has under 2 CPUs. */
function ownCoreOrThrow(n) {
  const split = ownCoreSplit(n);
  if (!split) throw new Error(`--own-core needs 2 or more CPUs (one for the generator, the rest for the stacks); this process may use ${n}`);
  return split;
}

/** Every thread of each pid onto the CPU list `cpus` (taskset's -c syntax); throws naming the pid and the fix. */
function placeOn(pids, cpus, { run = spawnSync } = {}) {
  for (const pid of pids) {
    const failed = taskset(pid, cpus, run);
    const now = allowedCpus(pid);
    // A process that exited meanwhile (a worker replaced) has nothing left to place.
    if (now === null) continue;
    if (failed !== null || now !== cpus) {
      const why = failed || `its CPUs are ${now}`;
      throw new Error(`taskset could not place pid ${pid} on CPUs ${cpus}: ${why}; install util-linux (taskset), or run without --own-core`);
    }
  }
}

/**
 * Place a started stack on `cpus`: every process of it (stack.pids(): nginx's master
 * and workers, the runner's primary, workers and spare), read again until no new
 * one appears; a process forked later inherits its parent's CPUs.
 */
function placeStack(stack, cpus, opts) {
  const done = new Set();
  for (let pass = 0; pass < 5; pass++) {
    const { nginx, app } = stack.pids();
    const fresh = [...nginx, ...app].filter((pid) => !done.has(pid));
    if (!fresh.length) return [...done];
    placeOn(fresh, cpus, opts);
    for (const pid of fresh) done.add(pid);
  }
  return [...done];
}

module.exports = { pinStack, cpuFor, allowedCpus, ownCoreSplit, ownCoreOrThrow, placeOn, placeStack };
