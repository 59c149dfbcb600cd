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

/**
 * Pin a stack's workers; pids: { nginx: [master, ...workers], app: [primary, ...workers] }.
 * Returns [{ pid, role, cpu }]; throws naming taskset and the pid when it fails.
 */
function pinStack(pids, { cores = cpu.cores(), run = spawnSync } = {}) {
  const placed = [];
  for (const role of ['nginx', 'app']) {
    (pids[role] || []).slice(1).forEach((pid, k) => {
      const c = cpuFor(k, cores);
      const r = run('taskset', ['-a', '-p', '-c', String(c), String(pid)], { encoding: 'utf8' });
      if (r.error || r.status !== 0) {
        const why = r.error ? r.error.message : String(r.stderr || '').trim();
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

module.exports = { pinStack, cpuFor, allowedCpus };
