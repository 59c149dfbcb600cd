'use strict';
// The speed probe during a run: a child process that times one try of the probe's
// fixed work (cpu.probeOnceUs, about 3.5 ms of CPU) every PERIOD_MS while the
// load runs, and prints each try's CPU µs on a line of its own. The probe before
// and after a run (cpu.speedProbeUs) misses what the VM does in between: on a
// VM whose vCPUs slow down for seconds at a time (docs/benchmarks.md), the tries
// during the run say which share of it ran slow. It costs 1.5–2.5% of one core
// (a try takes longer on a loaded machine). It ends with its run, and on its own
// when the process that started it is gone (its stdout closed, or a new parent).
//
//   const p = await startRunProbe(); ...the run...; const s = await p.stop();
//   // s: { tries, medianUs, meanUs, slowShare }

const { spawn } = require('node:child_process');
const { probeOnceUs } = require('./cpu');

const PERIOD_MS = 250;
// A try that took this much more CPU than the run's quickest ran on a slow vCPU.
const SLOW_FACTOR = 1.5;

function loop() {
  const parent = process.ppid;
  const tick = () => {
    if (process.ppid !== parent) process.exit(0);
    process.stdout.write(`${probeOnceUs()}\n`);
    setTimeout(tick, PERIOD_MS);
  };
  process.stdout.on('error', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
  tick();
}

/** The tries' summary; null when none came (a run shorter than one period). */
function summariseTries(tries) {
  if (!tries.length) return null;
  const sorted = [...tries].sort((a, b) => a - b);
  const quickest = sorted[0];
  return {
    tries: tries.length,
    medianUs: sorted[sorted.length >> 1],
    meanUs: Math.round(tries.reduce((a, b) => a + b, 0) / tries.length),
    slowShare: tries.filter((t) => t >= SLOW_FACTOR * quickest).length / tries.length,
  };
}

/** Start the probe child; resolves once its first try is in (the run then starts). */
function startRunProbe() {
  const child = spawn(process.execPath, [__filename], { stdio: ['ignore', 'pipe', 'inherit'] });
  const tries = [];
  let rest = '';
  let first;
  const firstIn = new Promise((done) => { first = done; });
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    for (const l of lines) if (l) tries.push(Number(l));
    if (tries.length) first();
  });
  // A child that could not start or died early: the run goes on without its tries.
  const exited = new Promise((done) => {
    child.on('exit', done);
    child.on('error', done);
  });
  exited.then(() => first());
  return firstIn.then(() => {
    // The tries so far came before the run began: they are not the run's.
    const skip = tries.length;
    return {
      pid: child.pid,
      /** The tries timed since the run began. */
      tries: () => tries.length - skip,
      async stop() {
        child.kill('SIGTERM');
        await exited;
        return summariseTries(tries.slice(skip));
      },
    };
  });
}

if (require.main === module) loop();

module.exports = { startRunProbe, summariseTries, PERIOD_MS, SLOW_FACTOR };
