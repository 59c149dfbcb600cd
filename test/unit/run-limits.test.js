'use strict';
// test/run.js holds each test file to a hard limit and sweeps what a file
// leaves: a file that never ends (and ignores SIGTERM) is killed with its whole
// process group, reported failed with its last output, and the run goes on; a
// file that passes but leaves a process carrying its tag is reported failed and
// the process ended. Fixtures in test/fixtures/run/.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runFile } = require('../run');
const { alive } = require('../../lib/proc');
const { taggedProcesses } = require('../lib/tags');
const { until } = require('../lib/util');

const LANE = { name: 'unit', concurrency: 1 };

async function run(t, fixture, opts = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-run-limits-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  process.env.FIXTURE_PIDS = path.join(dir, 'pids');
  const tag = `u${crypto.randomBytes(4).toString('hex')}`;
  const chunks = [];
  const result = await runFile(`test/fixtures/run/${fixture}`, { lane: LANE, tag, out: (c) => chunks.push(String(c)), live: false, ...opts });
  const pids = fs.readFileSync(process.env.FIXTURE_PIDS, 'utf8').trim().split('\n').map(Number);
  return { result, out: chunks.join(''), pids, tag };
}

test('a file past its limit: its process group killed (SIGTERM ignored, then SIGKILL), reported failed with its last output', async (t) => {
  const { result, out, pids, tag } = await run(t, 'hang.js', { limitS: 2, killGraceMs: 500 });
  assert.notEqual(result.code, 0);
  assert.equal(result.counts.fail, 1);
  assert.match(out, /^not ok - test\/fixtures\/run\/hang\.js exceeded its limit of 2 s/m);
  assert.match(out, /its last output:[\s\S]*hang\.js: started \d+, waiting forever/);
  // SIGTERM first: from the group's signal, and again from node's runner, which
  // passes it on to the file's process as it exits (once or twice, both right).
  assert.match(fs.readFileSync(`${process.env.FIXTURE_PIDS}.signals`, 'utf8'), /^(SIGTERM\n){1,2}$/, 'the file did not get SIGTERM before SIGKILL');
  for (const pid of pids) assert.equal(alive(pid), false, `process ${pid} of the hung file still runs`);
  assert.deepEqual(taggedProcesses('TUNEKIT_TEST_TAG', tag), []);
});

test('a file that passes but leaves a process behind: reported failed, the process ended', async (t) => {
  const { result, out, pids, tag } = await run(t, 'leak.js', { leakWaitMs: 300 });
  t.after(() => { for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch { /* ended by the sweep */ } } });
  assert.equal(result.counts.pass, 1);
  assert.equal(result.counts.fail, 1);
  assert.notEqual(result.code, 0);
  assert.match(out, new RegExp(`^not ok - test/fixtures/run/leak\\.js left behind \\(now ended and removed\\): process ${pids[0]} \\(sleep 600\\)`, 'm'));
  assert.equal(alive(pids[0]), false);
  assert.deepEqual(taggedProcesses('TUNEKIT_TEST_TAG', tag), []);
});

test('a file that passes and leaves nothing: passed, exit 0, no report', async (t) => {
  const { result, out } = await run(t, 'pass.js');
  assert.equal(result.code, 0);
  assert.deepEqual([result.counts.pass, result.counts.fail], [1, 0]);
  assert.doesNotMatch(out, /^not ok/m);
});

test("every test timeout a file sets is shorter than the file's limit: the test fails and cleans up before its file is killed", () => {
  const { PHASES, filesOf, limitOf } = require('../run');
  const ROOT = path.join(__dirname, '../..');
  const over = [];
  for (const lane of PHASES.flat(2)) {
    for (const file of lane.suites.flatMap(filesOf)) {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      // Literal timeouts in ms (`timeout: 45 * 60 * 1000`, `180_000`); smaller
      // ones of other kinds (a client's, in seconds) only make this stricter.
      for (const [, expr] of text.matchAll(/\btimeout: ([\d_][\d_ *]*)[,}\s]/g)) {
        const ms = expr.replace(/_/g, '').split('*').reduce((p, f) => p * Number(f.trim()), 1);
        if (ms >= limitOf(lane, file) * 1000) over.push(`${file}: timeout ${expr.trim()} (${ms / 1000} s) >= its limit ${limitOf(lane, file)} s`);
      }
    }
  }
  assert.deepEqual(over, []);
});

// Last in the file: a stopped run stays stopped (no lane of this process starts a file after it).
test('a stopped run (SIGTERM to test/run.js) signals the file that runs and starts no other', async (t) => {
  const { runLane, stopRun } = require('../run');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-run-limits-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  process.env.FIXTURE_PIDS = path.join(dir, 'pids');
  const lane = runLane(LANE, ['test/fixtures/run/wait.js', 'test/fixtures/run/pass.js'], { runId: `s${crypto.randomBytes(3).toString('hex')}`, out: () => {}, live: false });
  await until('wait.js running', () => fs.existsSync(process.env.FIXTURE_PIDS), 60000, 50);
  const [waiting] = fs.readFileSync(process.env.FIXTURE_PIDS, 'utf8').trim().split('\n').map(Number);
  stopRun('SIGTERM');
  const result = await lane;
  assert.deepEqual(result.results.map((r) => r.file), ['test/fixtures/run/wait.js'], 'pass.js was started after the stop');
  assert.equal(alive(waiting), false, 'the running file did not end on the signal');
});
