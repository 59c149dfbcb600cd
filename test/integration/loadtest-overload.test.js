'use strict';
// `tunekit bench --overload`, short: the three stacks (stock, kit, kit+bound+budget)
// each through a two-step ladder and the recovery step, the stacks taking turns,
// reports written, everything torn down; and --burst, one run per stack. Invariants
// only: every request due in a step's counted part is accounted for in that step,
// the protected stack refuses only with 503, the queue sampler read every stack. The speed figures of a 2-second step on a
// shared machine mean nothing, and no test asserts them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const ROOT = path.resolve(__dirname, '../..');
const LIMIT_MS = 300000;

/** Run `tunekit bench --overload ARGS` with its reports in a folder of the test's: the JSON report. */
async function bench(t, args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lt-overload-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = (ext) => path.join(dir, `bench-overload.${ext}`);
  const all = ['bench', '--overload', ...args, '--no-progress', '--json', out('json'), '--md', out('md'), '--html', out('html')];
  const r = await new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), ...all], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stdout.resume();
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
  assert.equal(r.code, 0, r.stderr);
  return { doc: JSON.parse(fs.readFileSync(out('json'), 'utf8')), md: fs.readFileSync(out('md'), 'utf8'), html: fs.readFileSync(out('html'), 'utf8') };
}

const PROTECTED = 'kit+bound+budget';

test('bench --overload: stock, kit and kit+bound+budget through the ladder in turns, every request accounted for, reports written', async (t) => {
  // A given capacity: no saturation run, and rates the generator keeps on any machine.
  const { doc, md, html } = await bench(t, ['--capacity', '100', '--duration', '1', '--multiples', '0.5,2', '--step', '2', '--recovery', '2', '--max-connections', '200']);
  assert.equal(doc.kind, 'bench-overload');
  assert.equal(doc.overload.capacity, 100);
  assert.deepEqual(doc.overload.ladder.map((p) => [p.multiple, p.rate]), [[0.5, 50], [2, 200], [0.5, 50]]);
  assert.deepEqual(doc.overload.stacks.map((s) => s.stack), ['stock', 'kit', PROTECTED]);
  assert.deepEqual(doc.overload.stacks.find((s) => s.stack === PROTECTED).set, ['tunekit_latency_budget_ms=500', 'tunekit_app_capacity_rps=100']);
  // Two runs per stack (the first step; the second with the recovery), in turns: the order differs between them.
  const order = (step) => doc.results.filter((x) => x.step === step).map((x) => x.scenario);
  assert.deepEqual([...order(0)].sort(), ['kit', PROTECTED, 'stock']);
  assert.deepEqual([...order(1)].sort(), ['kit', PROTECTED, 'stock']);
  assert.notDeepEqual(order(0), order(1));
  for (const s of doc.overload.stacks) {
    assert.equal(s.steps.length, 3, s.stack);
    for (const p of s.steps) {
      const due = Math.round(p.rate * (p.durationS - p.settleS));
      assert.equal(p.ok + p.non2xx + p.errors + p.timeouts, due, `${s.stack} ${p.multiple}×: every request due in the step accounted for`);
      if (s.stack === PROTECTED) assert.deepEqual(Object.keys(p.kinds).filter((k) => k.startsWith('HTTP ')).filter((k) => k !== 'HTTP 503'), [], 'refusals are 503');
    }
    assert.ok(s.steps.some((p) => p.queue.connections >= 50), `${s.stack}: the queue sampler read the generator`);
  }
  // The last run is 2x (200/s) then 0.5x (50/s) for 2 s each: what it was asked is their mean, 125/s, never the first step's 200.
  for (const x of doc.results.filter((r) => r.step === 1)) {
    assert.equal(x.plannedRate, 125, x.scenario);
    assert.ok(!x.warnings.some((w) => /short of the 200 asked/.test(w)), `${x.scenario}: ${x.warnings.join('; ')}`);
  }
  const protectedRuns = doc.results.filter((x) => x.scenario === PROTECTED);
  assert.ok(protectedRuns.every((x) => x.timeline.some((sec) => sec.sample && sec.sample.nginxActive != null)), 'stub_status sampled');
  assert.match(md, /## Steps/);
  assert.match(md, /kit\+bound\+budget: tunekit_latency_budget_ms=500/);
  assert.match(html, /Goodput against offered load/);
  assert.match(html, /Served p99 against offered load/);
});

test('bench --overload --burst --own-core: 0.5x, 10x for 1 s, 0.5x in one run per stack, the generator on CPU 0 and the stacks on the rest; the burst\'s requests accounted for, what it did said per stack', async (t) => {
  // --own-core refuses a machine of one CPU with its own line (loadtest/overload.js); this one has more.
  const cpus = os.availableParallelism();
  const ownCore = cpus >= 2 ? ['--own-core'] : [];
  const { doc, md } = await bench(t, ['--burst', ...ownCore, '--capacity', '20', '--duration', '1', '--step', '2', '--recovery', '3', '--max-connections', '300']);
  if (ownCore.length) {
    // Each stack was placed by taskset and its CPUs read back (a mismatch stops the bench).
    assert.deepEqual(doc.overload.placement, { generator: '0', stacks: cpus === 2 ? '1' : `1-${cpus - 1}` });
    assert.match(md, /--own-core: the generator on CPU 0, every stack on CPU 1/);
  }
  assert.equal(doc.overload.burst, true);
  assert.deepEqual(doc.overload.ladder.map((p) => [p.multiple, p.rate, p.durationS]), [[0.5, 10, 2], [10, 200, 1], [0.5, 10, 3]]);
  assert.deepEqual(doc.results.map((x) => x.step), [0, 0, 0], 'one run per stack');
  for (const s of doc.overload.stacks) {
    const burst = s.steps[1];
    assert.equal(burst.ok + burst.non2xx + burst.errors + burst.timeouts, 200, `${s.stack}: every request of the burst accounted for`);
    assert.equal(s.burst.requests, 200);
    assert.equal(s.burst.refused, burst.non2xx + burst.errors + burst.timeouts);
    assert.match(md, new RegExp(`${s.stack.replace(/\+/g, '\\+')}: 10× for 1 s \\(200 requests\\)`));
  }
});

test('bench --overload without --capacity: the capacity is the median of three saturation runs on the kit\'s stack, each kept, and the ladder is paced from it', async (t) => {
  // The example's default cost (a few thousand req/s here): half of it for 2 s is a rate the pacer keeps.
  const { doc, md } = await bench(t, ['--app', 'examples/cpu-bound.js', '--duration', '1', '--multiples', '0.5', '--step', '2', '--recovery', '1', '--max-connections', '200']);
  const { capacity, capacityRun } = doc.overload;
  assert.equal(capacityRun.runs.length, 3);
  assert.ok(capacityRun.runs.every((r) => r > 0), `saturation runs: ${capacityRun.runs.join(', ')}`);
  assert.equal(capacity, [...capacityRun.runs].sort((a, b) => a - b)[1], 'the median of the three');
  assert.deepEqual(doc.results.filter((x) => x.role === 'capacity').map((x) => [x.scenario, x.reqPerSec]), capacityRun.runs.map((r) => ['kit', r]));
  assert.equal(doc.overload.ladder[0].rate, Math.round(capacity * 0.5));
  assert.match(md, /measured on kit \(the median of 3 runs: [\d,]+, [\d,]+, [\d,]+; wrk, saturation, 50 connections\)/);
});

test('bench --overload --capacity paced: paced probes on the kit\'s stack climb from 0.7x the saturation figure and stop at the first not served; the ladder is paced from the last served', async (t) => {
  // An app whose capacity is a timer's (one worker, 10 ms a request: 100 a second at most on any machine),
  // so the climb has a knee to find; a budget of 100 ms is ten requests' wait.
  const { doc, md } = await bench(t, ['--app', 'test/fixtures/overload/slots-app.js', '--workers', '1', '--capacity', 'paced', '--latency-budget', '100',
    '--duration', '2', '--multiples', '0.5', '--step', '2', '--recovery', '1', '--max-connections', '200']);
  const { capacity, capacityRun } = doc.overload;
  const { paced } = capacityRun;
  const saturation = [...capacityRun.runs].sort((a, b) => a - b)[1];
  assert.equal(paced.saturation, saturation);
  assert.ok(saturation > 0 && saturation <= 105, `one worker of 10 ms a request: ${saturation} req/s`);
  // Ascending from 0.7x, 0.05x apart; every probe but the last served; the capacity is the last served.
  assert.deepEqual(paced.probes.map((p) => p.ofSaturation), [0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1, 1.05, 1.1, 1.15, 1.2].slice(0, paced.probes.length));
  assert.deepEqual(paced.probes.map((p) => p.rate), paced.probes.map((p) => Math.round(saturation * p.ofSaturation)));
  assert.deepEqual(paced.probes.slice(0, -1).map((p) => p.served), paced.probes.slice(0, -1).map(() => true));
  const last = paced.probes[paced.probes.length - 1];
  assert.equal(paced.topped, last.served);
  assert.ok(last.served || last.refused > 0 || last.p99Us > 100000, 'the probe not served had a request not answered 2xx or a p99 past the budget');
  assert.equal(capacity, paced.probes.filter((p) => p.served).pop().rate);
  // One run per probe on the kit's stack, after the three saturation runs.
  assert.deepEqual(doc.results.filter((x) => x.role === 'capacity-paced').map((x) => [x.scenario, x.targetRate]), paced.probes.map((p) => ['kit', p.rate]));
  assert.equal(doc.overload.ladder[0].rate, Math.round(capacity * 0.5));
  assert.match(md, new RegExp(`capacity ${capacity} req/s, the highest paced rate served by kit \\(p99 ≤ 100 ms, every request 2xx\\)`));
});
