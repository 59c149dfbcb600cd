#!/usr/bin/env node
'use strict';
// The suite runner behind `npm test`: node's test runner over each lane, the
// lanes of a chain one after another, the chains of a phase side by side, the
// phases one after another; the seconds of every file in test/durations.txt and
// one closing line with the counts of all lanes.
//
//   node test/run.js                    # every suite (what npm test runs after its set-up)
//   node test/run.js integration faults # some of them
//
// A lane is a set of folders and how many of their files run at once:
// - unit runs two files at a time: pure code and short-lived CLI processes;
// - local (integration and faults) runs one file at a time: many of them put a
//   load through a real stack, and a second local file's load would be their
//   neighbour's noise;
// - e2e runs two files at a time: each boots its own hosts and spends most of
//   its time in Ansible waiting on SSH and on the hosts' systemd;
// - checks runs two files at a time: real tools over rendered files (nginx -t,
//   gixy, Ansible's own templating, ansible-lint), no load.
// After unit, the local lane runs side by side with e2e then checks: what one
// waits on the other does not use, and no test in either depends on how fast
// the machine is (a load ends on the event the test waits for), so the other
// chain's work is noise they tolerate, as any CI neighbour's.
// The first chain of a phase prints live; the others' output is kept and
// printed whole after it, so TAP streams never interleave.
// Every lane runs even when one before it failed; the exit code is the first
// failing lane's (0 when all passed).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const PHASES = [
  [[{ name: 'unit', suites: ['unit'], concurrency: 2 }]],
  [[{ name: 'local', suites: ['integration', 'faults'], concurrency: 1 }],
    [{ name: 'e2e', suites: ['e2e'], concurrency: 2 }, { name: 'checks', suites: ['checks'], concurrency: 2 }]],
];
const SUITES = PHASES.flat(2).flatMap((l) => l.suites);
const DURATIONS = path.join(ROOT, 'test/durations.txt');
// The summary node's TAP reporter ends a run with ("# pass 12").
const COUNTS = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];

function filesOf(suite) {
  const dir = path.join(ROOT, 'test', suite);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.test.js')).sort().map((f) => path.join('test', suite, f));
}

// Runs one lane; its TAP goes to `out` (a write function) as it comes.
function runLane(lane, files, table, out) {
  const args = ['--test', `--test-concurrency=${lane.concurrency}`,
    '--test-reporter=tap', '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(ROOT, 'test/lib/durations.mjs')}`, `--test-reporter-destination=${table}`,
    ...files];
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit'] });
    let tail = '';
    child.stdout.on('data', (chunk) => {
      out(chunk);
      tail = (tail + chunk.toString()).slice(-4096);
    });
    // Ctrl-C reaches the child through the terminal; a SIGTERM to this runner
    // is passed on, so the tests' own clean-up runs.
    const forward = () => child.kill('SIGTERM');
    process.once('SIGTERM', forward);
    child.on('close', (code, signal) => {
      process.removeListener('SIGTERM', forward);
      const counts = Object.fromEntries(COUNTS.map((k) => [k, Number((new RegExp(`^# ${k} (\\d+)$`, 'm').exec(tail) || [])[1] || 0)]));
      resolve({ code: code ?? (signal ? 1 : 0), started, seconds: (Date.now() - started) / 1000, counts });
    });
  });
}

// The lanes of one chain one after another; `out` takes their TAP.
async function runChain(chain, wanted, tmp, out) {
  const results = [];
  for (const lane of chain) {
    const files = lane.suites.filter((s) => wanted.includes(s)).flatMap(filesOf);
    if (!files.length) continue;
    const table = path.join(tmp, `${lane.name}.txt`);
    results.push({ lane, files, table, ...await runLane(lane, files, table, out) });
  }
  return results;
}

// The chains of one phase side by side: the first printed live, the others
// kept in memory and printed after it, each whole.
async function runPhase(chains, wanted, tmp) {
  const runs = chains.map((chain, i) => {
    const kept = [];
    const out = i === 0 ? (c) => process.stdout.write(c) : (c) => kept.push(c);
    return { kept, done: runChain(chain, wanted, tmp, out) };
  });
  const results = [];
  for (const r of runs) {
    results.push(...await r.done);
    if (r.kept.length) process.stdout.write(Buffer.concat(r.kept));
  }
  return results;
}

// A lane's line (when it started, after the first lane's start, and its wall
// time) and its files' seconds.
function laneReport(r, t0) {
  const rows = fs.existsSync(r.table) ? fs.readFileSync(r.table, 'utf8').trimEnd() : '(no durations: the runner stopped first)';
  const from = ((r.started - t0) / 1000).toFixed(0);
  return `lane ${r.lane.name}: ${r.files.length} files, ${r.lane.concurrency} at a time, from +${from} s, ${r.seconds.toFixed(1)} s wall, exit ${r.code}\n${rows}`;
}

async function main(argv) {
  const unknown = argv.filter((s) => !SUITES.includes(s));
  if (unknown.length) {
    process.stderr.write(`test/run.js: no suite "${unknown[0]}"; the suites are ${SUITES.join(', ')}\n`);
    return 2;
  }
  const wanted = argv.length ? argv : SUITES;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-durations-'));
  const started = Date.now();
  const report = [];
  const total = Object.fromEntries(COUNTS.map((k) => [k, 0]));
  let exit = 0;
  try {
    for (const lanes of PHASES) {
      const results = await runPhase(lanes, wanted, tmp);
      for (const r of results) {
        if (r.code && !exit) exit = r.code;
        for (const k of COUNTS) total[k] += r.counts[k];
        report.push(laneReport(r, started));
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const text = `${report.join('\n\n')}\n\nall lanes: ${((Date.now() - started) / 1000).toFixed(1)} s wall\n`;
  fs.writeFileSync(DURATIONS, text);
  process.stdout.write(`# seconds per test file (sum of its top-level tests), in ${path.relative(ROOT, DURATIONS)}:\n${text.trimEnd().replace(/^/gm, '# ')}\n`);
  // One closing line over every lane (each lane's TAP ends with its own counts).
  const failed = total.fail + total.cancelled;
  process.stdout.write(`tests: ${total.pass} passed, ${failed} failed, ${total.skipped} skipped\n`);
  if (!exit && failed) exit = 1;
  return exit;
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
