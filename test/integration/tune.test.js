'use strict';
// `tunekit tune` end to end on the real local stack (rendered nginx + the cluster on
// loopback, one stack per candidate, driven by the harness), from deliberately poor
// values, with a tiny budget. Invariants only, never a speed: it ends within its
// budget plus the time to stop its stacks, writes a vars file `tunekit render --vars`
// takes, and a report that lists every candidate with its rounds, each one passing
// the kit's rules. Bad input that needs the stack to show itself (an app that does
// not load, a p99 bound no run meets): one line, exit 2, nothing written.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { runCommand, until } = require('../lib/util');
const { refusals } = require('../../loadtest/tune-run');
const { readStat } = require('../../lib/proc');
const { heldRequests } = require('../../loadtest/tune');
const { allInFlight, oneWorker } = require('../../loadtest/held-requests');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'bin/tunekit.js');
const BUDGET_S = 50;
// Beyond the budget: the CLI's own start, and stopping the stacks (each drains its app).
const AFTER_BUDGET_S = 45;

const tunekit = (args, timeoutMs = 240000) => runCommand(process.execPath, [CLI, ...args], { cwd: ROOT, timeoutMs });

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-tune-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('tune from poor values with a tiny budget: ends in time, a vars file render takes, every candidate with its rounds and the rules passed', async (t) => {
  const dir = tempDir(t);
  const poor = path.join(ROOT, 'test/fixtures/tune/poor.yml');
  const out = path.join(dir, 'tuned.yml');
  const started = Date.now();
  // --other-load 1: this shared machine would otherwise reject most rounds; the rejection
  // itself is tested with a fake measure (test/unit/tune.test.js).
  const r = await tunekit(['tune', '--from', poor, '--budget', `${BUDGET_S}s`, '--duration', '1', '--connections', '16',
    '--other-load', '1', '--out', out, '--report', dir, '--no-progress']);
  const wallS = (Date.now() - started) / 1000;
  assert.equal(r.code, 0, r.out);
  assert.ok(wallS <= BUDGET_S + AFTER_BUDGET_S, `${wallS.toFixed(0)} s for a ${BUDGET_S} s budget`);
  // Both answers are right here: which one depends on what this shared machine measured.
  assert.match(r.stdout.split('\n')[0], /^(Recommended: .* — against the start values, (won all 3 rounds|met the objective in all 3 rounds)|Keep what you have: )/);

  const doc = JSON.parse(fs.readFileSync(path.join(dir, 'tune-report.json'), 'utf8'));
  assert.equal(doc.kind, 'tune');
  assert.ok(doc.tune.elapsedS <= BUDGET_S, `the search and confirmation took ${doc.tune.elapsedS} s`);
  const measured = doc.tune.candidates.filter((c) => c.rules === 'passed' && !c.failed);
  assert.ok(measured.length >= 2, 'the start values and at least one challenger');
  const md = fs.readFileSync(path.join(dir, 'tune-report.md'), 'utf8');
  for (const c of doc.tune.candidates) {
    // Every candidate started passes the kit's rules as render applies them.
    if (c.rules === 'passed') assert.deepEqual(refusals(c.values, poor), [], c.label);
    const runs = doc.tune.trials.filter((x) => x.candidate === c.id);
    assert.equal(runs.length, c.rounds + c.rejectedRounds, c.label);
    assert.ok(md.includes(`| ${c.label} | `), `the report lists ${c.label}`);
  }
  for (const c of measured) assert.ok(c.rounds + c.rejectedRounds >= 1, `${c.label} was measured`);
  // Every run reached a live stack: a stack stopped too early (say, the winner's,
  // the next step's incumbent) answers nothing, and its runs measure 0 req/s.
  for (const x of doc.tune.trials) assert.ok(x.result.errors === 0 && x.value > 0, `step ${x.step} round ${x.round}, ${x.label}: ${JSON.stringify(x.result)}`);

  // The vars file: what render takes, with the values the report recommends.
  const text = fs.readFileSync(out, 'utf8');
  for (const [k, v] of Object.entries(doc.tune.recommended)) if (k !== 'tunekit_nginx_gzip') assert.match(text, new RegExp(`^${k}: ${v}$`, 'm'));
  const rendered = await tunekit(['render', '--out', path.join(dir, 'tree'), '--vars', poor, '--vars', out], 60000);
  assert.equal(rendered.code, 0, rendered.out);
});

test('an app that does not load: one line naming --app, exit 2, nothing written', async (t) => {
  const dir = tempDir(t);
  const app = path.join(dir, 'broken.js');
  fs.writeFileSync(app, "throw new Error('the database URL is not set');\n");
  const out = path.join(dir, 'out');
  fs.mkdirSync(out);
  const r = await tunekit(['tune', '--app', app, '--budget', '50s', '--duration', '1', '--out', path.join(out, 't.yml'), '--report', out, '--no-progress']);
  assert.equal(r.code, 2, r.out);
  assert.match(r.stderr, /^tunekit: --app .*broken\.js: the app did not start behind the stack \(.*\); run it alone to see why: tunekit run /);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.deepEqual(fs.readdirSync(out), []);
});

test('a p99 bound no run meets: one line with the lowest p99 measured, exit 2, nothing written', async (t) => {
  const dir = tempDir(t);
  const r = await tunekit(['tune', '--p99', '1us', '--budget', '50s', '--duration', '1', '--connections', '8', '--other-load', '1',
    '--out', path.join(dir, 't.yml'), '--report', dir, '--no-progress']);
  assert.equal(r.code, 2, r.out);
  assert.match(r.stderr, /^tunekit: no candidate met the objective in any run \(p99 <= 1 µs with zero errors; the lowest p99 measured was \d+ µs\); raise --p99/);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('Ctrl-C mid-run: exit 130, every process it started ended, nothing written', async (t) => {
  const dir = tempDir(t);
  const child = spawn(process.execPath, [CLI, 'tune', '--budget', '5m', '--duration', '2', '--connections', '8', '--other-load', '1',
    '--out', path.join(dir, 't.yml'), '--report', dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  // Every process below it (nginx, the runners and their workers, the load
  // generators), by pid and start time, so a pid reused later is not it.
  const stat = readStat;
  const descendants = (root) => {
    const all = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map((p) => ({ pid: Number(p), ...stat(p) })).filter((x) => x.ppid);
    const out = [];
    for (let frontier = [root]; frontier.length;) {
      const next = all.filter((x) => frontier.includes(x.ppid));
      out.push(...next);
      frontier = next.map((x) => x.pid);
    }
    return out;
  };
  const running = (procs) => procs.filter((x) => {
    const now = stat(x.pid);
    return now && now.start === x.start && now.state !== 'Z';
  });
  let seen = [];
  t.after(() => {
    for (const x of running(seen)) try { process.kill(x.pid, 'SIGKILL'); } catch { /* gone */ }
  });
  let err = '';
  let end = null;
  child.stdout.resume();
  child.stderr.on('data', (d) => { err += d; });
  child.on('exit', (code, sig) => { end = { code, sig }; });
  // Interrupted while it measures: two stacks up (the start values and a challenger).
  await until('tune measuring its first challenger', () => /step 1 .*round 1/.test(err), 120000, 100);
  seen = descendants(child.pid);
  assert.ok(seen.length >= 6, `two stacks of nginx and the runner with their workers: ${seen.length} processes`);
  process.kill(child.pid, 'SIGINT');
  await until('tune to leave after SIGINT', () => end, 60000, 100);
  assert.deepEqual(end, { code: 130, sig: null }, err);
  assert.match(err, /SIGINT: stopping the local stacks this command started/);
  // Killed by its exit hook; gone once the kernel has delivered the SIGKILLs (and
  // the load generators leave when their channel to it closes).
  await until('its processes to end', () => running(seen).length === 0, 30000, 100).catch(() => {
    assert.deepEqual(running(seen).map((x) => fs.readFileSync(`/proc/${x.pid}/cmdline`, 'utf8').replace(/\0/g, ' ')), [], 'processes it started outlived it');
  });
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('the grid script on two combinations: each measured, the best again in a round, JSON written', async (t) => {
  const dir = tempDir(t);
  const json = path.join(dir, 'grid.json');
  const r = await runCommand(process.execPath, [path.join(ROOT, 'loadtest/tune-grid.js'), '--vary', 'tunekit_app_workers,tunekit_nginx_upstream_keepalive',
    '--limit', '2', '--top', '1', '--rounds', '1', '--duration', '1', '--connections', '8', '--json', json], { cwd: ROOT, timeoutMs: 240000 });
  assert.equal(r.code, 0, r.out);
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.equal(doc.measured, 2);
  assert.equal(doc.runs.length, 2);
  for (const run of doc.runs) assert.deepEqual(refusals(run.values, null), [], run.label);
  assert.equal(doc.top.length, 1);
  assert.equal(doc.top[0].reqPerSec.n, 1);
  assert.match(r.stdout, /^grid: \d+ combinations, 2 measured/m);

  // A vars file (tune's output, here the poor start) beside that best, in the same rounds.
  const poor = path.join(ROOT, 'test/fixtures/tune/poor.yml');
  const cmp = await runCommand(process.execPath, [path.join(ROOT, 'loadtest/tune-grid.js'), '--compare', json, '--also', poor,
    '--rounds', '1', '--duration', '1', '--connections', '8', '--json', path.join(dir, 'cmp.json')], { cwd: ROOT, timeoutMs: 240000 });
  assert.equal(cmp.code, 0, cmp.out);
  const c = JSON.parse(fs.readFileSync(path.join(dir, 'cmp.json'), 'utf8'));
  assert.deepEqual([c.kind, c.measured, c.best.values], ['tune-grid-compare', 0, doc.best.values]);
  assert.deepEqual(c.also.map((a) => [a.file, a.reqPerSec.n, a.ratioToBest.n]), [[poor, 1, 1]]);
  assert.match(cmp.stdout, /poor\.yml over the grid's best, per round: median \d+\.\d\d/);
  // It says what it compared, not a grid of combinations it did not measure.
  assert.match(cmp.stdout, /^compared: the best of \S+grid\.json \(\d{4}-\d\d-\d\dT[^)]+\) beside 1 vars file\(s\), in 1 interleaved rounds$/m);
  assert.doesNotMatch(cmp.stdout, /combinations/);
});

test('what tune assumes of nginx: one worker with 64 worker_connections holds the requests tune counts, and resets some of 64 at once', async (t) => {
  // tune refuses candidates whose worker_connections cannot hold the load on one worker
  // (loadtest/tune.js loadRefusal); this is the nginx behaviour that rule counts on.
  const stack = await oneWorker(64);
  t.after(() => stack.stop());
  const within = await allInFlight(stack.url, heldRequests(64));
  assert.deepEqual(within.codes, { 200: heldRequests(64) }, `${heldRequests(64)} requests at once`);
  assert.doesNotMatch(fs.readFileSync(stack.errorLogPath, 'utf8'), /worker_connections are not enough/);
  const beyond = await allInFlight(stack.url, 64);
  assert.ok((beyond.codes[200] || 0) < 64 && (beyond.codes[200] || 0) >= heldRequests(64), `64 at once: ${JSON.stringify(beyond.codes)}`);
  assert.match(fs.readFileSync(stack.errorLogPath, 'utf8'), /64 worker_connections are not enough, reusing connections/);
});
