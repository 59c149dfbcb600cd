#!/usr/bin/env node
'use strict';
// The suite runner behind `npm test`: node's test runner over each lane, the
// lanes one after another, and the seconds of every file in test/durations.txt.
//
//   node test/run.js                    # every suite (what npm test runs after its set-up)
//   node test/run.js integration faults # some of them
//
// A lane is a set of folders and how many of their files run at once:
// - unit runs two files at a time: pure code and short-lived CLI processes;
// - integration and faults run one file at a time: many of them put a load
//   through a real stack, and a second file's load would be their neighbour's
//   noise;
// - e2e runs one file at a time: on a fresh machine the first files build the
//   cached root filesystems, and two files building the same one at once is not
//   yet guarded (two at a time is the next step for the suite's time).
// Every lane runs even when one before it failed; the exit code is the first
// lane's that failed (0 when all passed).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const LANES = [
  { name: 'unit', suites: ['unit'], concurrency: 2 },
  { name: 'local', suites: ['integration', 'faults'], concurrency: 1 },
  { name: 'e2e', suites: ['e2e'], concurrency: 1 },
];
const SUITES = LANES.flatMap((l) => l.suites);
const DURATIONS = path.join(ROOT, 'test/durations.txt');

function filesOf(suite) {
  const dir = path.join(ROOT, 'test', suite);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.test.js')).sort().map((f) => path.join('test', suite, f));
}

function runLane(lane, files, table) {
  const args = ['--test', `--test-concurrency=${lane.concurrency}`,
    '--test-reporter=tap', '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(ROOT, 'test/lib/durations.mjs')}`, `--test-reporter-destination=${table}`,
    ...files];
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'inherit' });
    // Ctrl-C reaches the child through the terminal; a SIGTERM to this runner
    // is passed on, so the tests' own clean-up runs.
    const forward = () => child.kill('SIGTERM');
    process.once('SIGTERM', forward);
    child.on('close', (code, signal) => {
      process.removeListener('SIGTERM', forward);
      resolve({ code: code ?? (signal ? 1 : 0), seconds: (Date.now() - started) / 1000 });
    });
  });
}

async function main(argv) {
  const unknown = argv.filter((s) => !SUITES.includes(s));
  if (unknown.length) {
    process.stderr.write(`test/run.js: no suite "${unknown[0]}"; the suites are ${SUITES.join(', ')}\n`);
    return 2;
  }
  const wanted = argv.length ? argv : SUITES;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-durations-'));
  const report = [];
  let exit = 0;
  try {
    for (const lane of LANES) {
      const files = lane.suites.filter((s) => wanted.includes(s)).flatMap(filesOf);
      if (!files.length) continue;
      const table = path.join(tmp, `${lane.name}.txt`);
      const r = await runLane(lane, files, table);
      if (r.code && !exit) exit = r.code;
      const rows = fs.existsSync(table) ? fs.readFileSync(table, 'utf8').trimEnd() : '(no durations: the runner stopped first)';
      report.push(`lane ${lane.name}: ${files.length} files, ${lane.concurrency} at a time, ${r.seconds.toFixed(1)} s wall, exit ${r.code}\n${rows}`);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const text = `${report.join('\n\n')}\n`;
  fs.writeFileSync(DURATIONS, text);
  process.stdout.write(`# seconds per test file (sum of its top-level tests), in ${path.relative(ROOT, DURATIONS)}:\n${text.replace(/^/gm, '# ')}`);
  return exit;
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
