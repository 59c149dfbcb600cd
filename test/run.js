#!/usr/bin/env node
'use strict';
// The suite runner behind `npm test`: node's test runner over each file, in
// its own process group and under a hard time limit; the files of a lane a few
// at a time, the lanes of a chain one after another, the chains of a phase side
// by side, the phases one after another; the seconds of every file in
// test/durations.txt and one closing line with the counts of all lanes.
//
//   node test/run.js                    # every suite (what npm test runs after its set-up)
//   node test/run.js integration faults # some of them
//
// A lane is a set of folders and how many of their files run at once:
// - unit runs two files at a time: pure code and short-lived CLI processes;
// - local (integration and faults) runs two files at a time: many of them put a
//   load through a real stack, each on ports and in directories of its own, and
//   none depends on how fast the machine is (a load ends on the event the test
//   waits for), so a neighbour's load is noise they tolerate, as any CI
//   neighbour's; many spend their time waiting (idle timeouts, held requests);
// - e2e runs two files at a time: each boots its own hosts; most of its time is
//   Ansible's module runs on them (a Python process each: CPU, test/README.md);
// - checks runs two files at a time: real tools over rendered files (nginx -t,
//   gixy, Ansible's own templating, ansible-lint), no load. Those that need a
//   distribution's root filesystem build it, or wait under its lock for the
//   e2e file building it (test/lib/nspawn.js).
// The chain unit, local runs side by side with e2e: what one waits on the
// other does not use; checks starts when the first of the two ends. (Local one
// at a time beside e2e then checks, after unit: 27.4 min with cached root
// filesystems; local two at a time then checks beside e2e, after unit: 24.2 min,
// the machine's 2 cores 1.85 busy on average, e2e the longest by 290 s;
// 2026-12-05. Once the roles wrote their files in one module run, e2e ended
// first: 1,267 s against unit and local's 1,317 s, then checks 160 s on a slower
// VM, 2026-12-07.) A lane starts
// its slowest files first (MEASURED_S), so that no long file starts last and
// runs alone.
// Files print their TAP whole when they end (a file at a time, as it comes,
// when the first chain's lane runs one file at a time), so streams never
// interleave: the first chain's as they end, the others' after it.
//
// No file can hang the suite: each has a hard limit (limitOf below). Past it
// its process group gets SIGTERM (the tests' exit hooks stop what they
// booted), SIGKILL after KILL_GRACE_MS, and the file is reported failed with
// its last output; the lane goes on. After every file, whatever still carries
// its tag (TUNEKIT_TEST_TAG in a process's environment: its processes, and the
// containers test/lib/nspawn.js booted for it, whose init gets it) is reported
// as left behind, a failure, and ended by pid; its hosts' scratch dirs with it.
// Every lane runs even when one before it failed; the exit code is the first
// failing lane's (0 when all passed).

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { taggedProcesses } = require('./lib/tags');
const { alive } = require('../lib/proc');

const ROOT = path.resolve(__dirname, '..');
const PHASES = [
  [[{ name: 'unit', suites: ['unit'], concurrency: 2 }, { name: 'local', suites: ['integration', 'faults'], concurrency: 2 }],
    [{ name: 'e2e', suites: ['e2e'], concurrency: 2 }],
    // Starts when the first of the chains above ends (afterFirst).
    [{ name: 'checks', suites: ['checks'], concurrency: 2, afterFirst: true }]],
];
const SUITES = PHASES.flat(2).flatMap((l) => l.suites);
const DURATIONS = path.join(ROOT, 'test/durations.txt');
// The summary node's TAP reporter ends a run with ("# pass 12").
const COUNTS = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];

// A file's hard limit: LIMIT_FACTOR times its slowest measured wall time, and
// never less than its lane's floor nor more than LIMIT_CAP_S. The measured
// seconds are `npm test` on a 2-core machine of this kind: a fresh clone with
// empty caches (root filesystems and the frameworks cache built by the suite),
// beside four other jobs (load average 10-17), 2026-12-04, the slowest run
// seen. A file not listed has its lane's floor, which is above every test
// timeout its files set (run-limits.test.js checks it: a test that times out
// fails and cleans up before its file is killed). The factor covers a machine
// 2-3x slower; the cap keeps a hung file from holding the suite past CI's 90
// minutes (the e2e lane starts a few minutes in, the checks lane follows it).
// A limit is a bound for a hung file, not a budget.
const LIMIT_FACTOR = 3;
const LIMIT_CAP_S = 4200;
const LANE_FLOOR_S = { unit: 180, local: 900, e2e: 3000, checks: 1200 };
const MEASURED_S = {
  'test/e2e/ansible-site.test.js': 2145,
  'test/e2e/distros.test.js': 931,
  'test/e2e/apps.test.js': 848,
  'test/e2e/shared-host.test.js': 260,
  'test/e2e/https.test.js': 187,
  'test/e2e/host-systemd.test.js': 110,
  'test/e2e/boot-failure.test.js': 50,
  'test/checks/nginx-render-parity.test.js': 194,
  // The slowest local and checks files, one at a time beside e2e (fresh clone,
  // empty caches, 2026-12-05): below their lane's floor, listed for the order.
  'test/checks/keepalive-defaults.test.js': 133,
  'test/integration/tune.test.js': 141,
  'test/integration/frameworks.test.js': 98,
  'test/integration/profile.test.js': 83,
  'test/faults/alerts.test.js': 81,
  'test/integration/loadtest-bench.test.js': 80,
  'test/integration/package.test.js': 75,
  'test/integration/loadtest-cli.test.js': 72,
  'test/faults/crash-storm.test.js': 63,
  'test/integration/handshakes.test.js': 66,
  'test/integration/doc-commands.test.js': 63,
  'test/integration/loadtest-openloop.test.js': 54,
  'test/integration/host-pm2.test.js': 50,
  'test/faults/held.test.js': 40,
};
// Files whose own bounds add up past their lane's floor: the sum of their tests'
// timeouts, so that each test ends on its own bound before the file is killed.
// held.test.js: two idle-client tests of 720 s each (20 chunks x a client's 30 s
// timeout + 120 s) and one of 180 s.
const BOUNDED_S = { 'test/faults/held.test.js': 2 * 720 + 180 };
const KILL_GRACE_MS = 60000; // SIGTERM -> SIGKILL: a test's exit hooks stop its hosts in seconds
const LEAK_WAIT_MS = 10000; // processes killed by a file's exit hooks are reaped within this
const TAIL_CHARS = 4096;

function limitOf(lane, file) {
  return Math.min(LIMIT_CAP_S, Math.max(LANE_FLOOR_S[lane.name], Math.ceil(LIMIT_FACTOR * (MEASURED_S[file] || 0)), BOUNDED_S[file] || 0));
}

function filesOf(suite) {
  const dir = path.join(ROOT, 'test', suite);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.test.js')).sort().map((f) => path.join('test', suite, f));
}

const running = new Set(); // process groups of the files running now
let stopping = null; // the signal that stopped the run: no file starts after it

/**
 * Stop the run: every running file's group gets `sig`, so the tests' own
 * clean-up runs, and no lane starts another file (before, the lanes went on
 * starting files in the moments before this runner died, and those ran on
 * without it: seen stopping a run with SIGTERM, 2026-12-05).
 */
function stopRun(sig) {
  stopping = sig;
  for (const pid of running) { try { process.kill(-pid, sig); } catch { /* gone */ } }
}

// A SIGTERM or Ctrl-C to this runner: the run stops; then this runner dies of it.
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    stopRun(sig);
    setTimeout(() => process.kill(process.pid, sig), 2000).unref();
  });
}

/**
 * Whatever still carries a file's tag once its process group ended: waits
 * (bounded) for what its exit hooks killed to be reaped, then ends the rest by
 * pid and removes its hosts' scratch dirs (overlay mounts first). Returns a
 * line per thing found, [] when nothing was left.
 */
function sweep(tag, waitMs = LEAK_WAIT_MS) {
  const end = Date.now() + waitMs;
  let pids = taggedProcesses('TUNEKIT_TEST_TAG', tag);
  while (pids.length && Date.now() < end) {
    spawnSync('sleep', ['0.2']);
    pids = taggedProcesses('TUNEKIT_TEST_TAG', tag);
  }
  const found = pids.map((pid) => `process ${pid} (${cmdOf(pid)})`);
  for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
  const killedBy = Date.now() + LEAK_WAIT_MS;
  while (pids.some(alive) && Date.now() < killedBy) spawnSync('sleep', ['0.2']);
  const prefix = path.join(os.tmpdir(), `tunekit-nspawn-${tag}-`);
  const mounts = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')
    .map((l) => (l.split(' ')[1] || '').replace(/\\040/g, ' ')).filter((m) => m.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    found.push(`mount ${m}`);
    spawnSync('umount', ['-l', m]);
  }
  for (const d of fs.readdirSync(os.tmpdir()).map((n) => path.join(os.tmpdir(), n)).filter((p) => p.startsWith(prefix))) {
    found.push(`dir ${d}`);
    fs.rmSync(d, { recursive: true, force: true });
  }
  return found;
}

function cmdOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 120);
  } catch {
    return 'gone';
  }
}

const countsOf = (tap) => Object.fromEntries(COUNTS.map((k) => [k, Number((new RegExp(`^# ${k} (\\d+)$`, 'm').exec(tap) || [])[1] || 0)]));

/**
 * Runs one file in a process group of its own, under its limit. Its TAP goes to
 * `out` as it comes (`live`) or whole at its end. Resolves its result.
 */
function runFile(file, { lane, tag, out, live, limitS = limitOf(lane, file), killGraceMs = KILL_GRACE_MS, leakWaitMs = LEAK_WAIT_MS }) {
  const started = Date.now();
  return new Promise((resolve) => {
    // NODE_TEST_CONTEXT: set when this runs inside a test (run-limits.test.js);
    // node's runner would then refuse to run the file.
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const child = spawn(process.execPath, ['--test', '--test-reporter=tap', file], {
      cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, TUNEKIT_TEST_TAG: tag },
    });
    running.add(child.pid);
    const kept = [];
    let tail = '';
    const keep = (chunk) => { tail = (tail + chunk.toString()).slice(-TAIL_CHARS); };
    child.stdout.on('data', (chunk) => {
      keep(chunk);
      if (live) out(chunk);
      else kept.push(chunk);
    });
    child.stderr.on('data', (chunk) => {
      keep(chunk);
      process.stderr.write(chunk);
    });
    let timedOut = false;
    let killer = null;
    const limit = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
      killer = setTimeout(() => {
        killer = null;
        try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
      }, killGraceMs);
    }, limitS * 1000);
    // Done when its output is all read; a process that left the group but
    // holds its stdout (a daemon) gets LEAK_WAIT_MS, then the pipes are closed.
    let done = false;
    let drained = null;
    const groupAlive = () => { try { process.kill(-child.pid, 0); return true; } catch { return false; } };
    const finish = async (code, signal) => {
      if (done) return;
      done = true;
      clearTimeout(drained);
      clearTimeout(limit);
      // Past the limit, the group's processes get their grace to clean up after
      // SIGTERM (node's runner itself exits on it at once); then the SIGKILL.
      while (timedOut && groupAlive() && killer) await new Promise((r) => setTimeout(r, 100));
      clearTimeout(killer);
      // What is left of the group now is stray (a grandchild that ignored SIGTERM).
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* none left */ }
      running.delete(child.pid);
      const seconds = (Date.now() - started) / 1000;
      if (!live) out(Buffer.concat(kept));
      const counts = countsOf(tail);
      const problems = [];
      if (timedOut) {
        problems.push(`${file} exceeded its limit of ${limitS} s (test/run.js limitOf): its process group got SIGTERM, then SIGKILL after ${killGraceMs / 1000} s`);
      }
      const left = sweep(tag, leakWaitMs);
      if (left.length) problems.push(`${file} left behind (now ended and removed): ${left.join('; ')}`);
      if (problems.length) {
        counts.fail += 1;
        const last = tail.split('\n').slice(-40).join('\n# ');
        out(`not ok - ${problems.join('\n# ')}\n# its last output:\n# ${last}\n`);
      }
      resolve({ file, limitS, seconds, code: problems.length ? (code || 1) : (code ?? (signal ? 1 : 0)), counts });
    };
    child.on('close', finish);
    child.on('exit', (code, signal) => {
      drained = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish(code, signal);
      }, LEAK_WAIT_MS);
    });
  });
}

/** The machine's CPU time so far, busy and in all, in clock ticks (/proc/stat's first line). */
function cpuTicks() {
  const [user, nice, system, idle, iowait, ...rest] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1, 9).map(Number);
  const all = user + nice + system + idle + iowait + rest.reduce((a, b) => a + b, 0);
  return { busy: all - idle - iowait, all };
}

/** Cores busy on average between two cpuTicks() readings: how much of the machine a span used. */
function coresBusy(a, b) {
  return b.all > a.all ? ((b.busy - a.busy) / (b.all - a.all)) * os.cpus().length : 0;
}

// Runs one lane's files, lane.concurrency at a time.
async function runLane(lane, files, { runId, out, live }) {
  const started = Date.now();
  const ticks = cpuTicks();
  const queue = files.map((file, i) => ({ file, tag: `${runId}${lane.name[0]}${i}` }));
  const results = [];
  const worker = async () => {
    for (let job = queue.shift(); job && !stopping; job = queue.shift()) {
      results.push(await runFile(job.file, { lane, tag: job.tag, out, live: live && lane.concurrency === 1 }));
    }
  };
  await Promise.all(Array.from({ length: Math.min(lane.concurrency, files.length) }, worker));
  const counts = Object.fromEntries(COUNTS.map((k) => [k, results.reduce((s, r) => s + r.counts[k], 0)]));
  const code = (results.find((r) => r.code) || { code: 0 }).code;
  return { lane, files, started, seconds: (Date.now() - started) / 1000, cores: coresBusy(ticks, cpuTicks()), code, counts, results };
}

// The lanes of one chain one after another; `out` takes their TAP.
async function runChain(chain, wanted, ctx) {
  const results = [];
  for (const lane of chain) {
    if (stopping) break;
    const files = lane.suites.filter((s) => wanted.includes(s)).flatMap(filesOf)
      .sort((a, b) => (MEASURED_S[b] || 0) - (MEASURED_S[a] || 0) || a.localeCompare(b));
    if (files.length) results.push(await runLane(lane, files, ctx));
  }
  return results;
}

// The chains of one phase side by side: the first printed as it comes, the
// others kept in memory and printed after it, each whole.
// A chain whose first lane is afterFirst starts when the first of the others
// ends: it takes the cores that chain no longer uses.
async function runPhase(chains, wanted, runId) {
  // A chain's TAP: the first one's printed as it comes, the others' kept.
  const start = (chain, live, after = Promise.resolve()) => {
    const kept = [];
    const out = live ? (c) => process.stdout.write(c) : (c) => kept.push(Buffer.from(c));
    return { kept, done: after.then(() => runChain(chain, wanted, { runId, out, live })) };
  };
  const started = chains.filter((chain) => !chain[0].afterFirst).map((chain, i) => start(chain, i === 0));
  const firstEnd = Promise.race(started.map((r) => r.done));
  const runs = [...started, ...chains.filter((chain) => chain[0].afterFirst).map((chain) => start(chain, false, firstEnd))];
  const results = [];
  for (const r of runs) {
    results.push(...await r.done);
    if (r.kept.length) process.stdout.write(Buffer.concat(r.kept));
  }
  return results;
}

// A lane's line (when it started, after the first lane's start, and its wall
// time) and its files' seconds, slowest first, each with its limit.
function laneReport(r, t0) {
  const rows = [...r.results].sort((a, b) => b.seconds - a.seconds)
    .map((f) => `${f.seconds.toFixed(1).padStart(8)} s  ${f.file}  (limit ${f.limitS} s${f.code ? `, exit ${f.code}` : ''})`);
  const from = ((r.started - t0) / 1000).toFixed(0);
  return `lane ${r.lane.name}: ${r.files.length} files, ${r.lane.concurrency} at a time, from +${from} s, ${r.seconds.toFixed(1)} s wall, ` +
    `${r.cores.toFixed(2)} of ${os.cpus().length} cores busy (the whole machine's), exit ${r.code}\n${rows.join('\n')}`;
}

async function main(argv) {
  const unknown = argv.filter((s) => !SUITES.includes(s));
  if (unknown.length) {
    process.stderr.write(`test/run.js: no suite "${unknown[0]}"; the suites are ${SUITES.join(', ')}\n`);
    return 2;
  }
  const wanted = argv.length ? argv : SUITES;
  // Every file's tag starts with this run's id: short, as it names dirs.
  const runId = `t${crypto.randomBytes(3).toString('hex')}`;
  const started = Date.now();
  const ticks = cpuTicks();
  const report = [];
  const total = Object.fromEntries(COUNTS.map((k) => [k, 0]));
  let exit = 0;
  for (const lanes of PHASES) {
    const results = await runPhase(lanes, wanted, runId);
    for (const r of results) {
      if (r.code && !exit) exit = r.code;
      for (const k of COUNTS) total[k] += r.counts[k];
      report.push(laneReport(r, started));
    }
  }
  const text = `${report.join('\n\n')}\n\nall lanes: ${((Date.now() - started) / 1000).toFixed(1)} s wall, ` +
    `${coresBusy(ticks, cpuTicks()).toFixed(2)} of ${os.cpus().length} cores busy on average\n`;
  fs.writeFileSync(DURATIONS, text);
  process.stdout.write(`# seconds per test file (wall), in ${path.relative(ROOT, DURATIONS)}:\n${text.trimEnd().replace(/^/gm, '# ')}\n`);
  // One closing line over every lane (each file's TAP ends with its own counts).
  const failed = total.fail + total.cancelled;
  process.stdout.write(`tests: ${total.pass} passed, ${failed} failed, ${total.skipped} skipped\n`);
  if (!exit && failed) exit = 1;
  return exit;
}

if (require.main === module) main(process.argv.slice(2)).then((code) => { process.exitCode = code; });

module.exports = { runFile, runLane, stopRun, limitOf, sweep, filesOf, PHASES };
