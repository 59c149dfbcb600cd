'use strict';
// Where a bench's spread comes from (loadtest/noise.js, cpu.js's scheduler
// record): the correlation of each suspect with the per-round ratio, over
// made-up rounds; and the scheduler's counters read from this process.

const test = require('node:test');
const assert = require('node:assert/strict');
const N = require('../../loadtest/noise');
const cpu = require('../../loadtest/cpu');

// A saturation run record with the fields noise.js reads.
function run(round, scenario, reqPerSec, { wait = 0.2, top = 0.5, nginxTop = 0.5, others = 0, steal = 0 } = {}) {
  return {
    round, scenario, mode: 'saturation', reqPerSec, durationS: 8,
    server: { sched: { waitShare: wait, migrationsPerKReq: 1, involuntaryPerKReq: 2 }, topWorkerCpuShare: { nginx: nginxTop, app: top } },
    workers: { share: { 1: top, 2: 1 - top } },
    generator: { cpuUs: 4e6 },
    machine: { otherCores: others, stealCores: steal, speedProbeUs: [3000, 3000] },
  };
}

test('Pearson r: exact for a line, its sign for a falling one, null when a side does not vary', () => {
  assert.equal(N.pearson([1, 2, 3, 4], [2, 4, 6, 8]).toFixed(9), '1.000000000');
  assert.equal(N.pearson([1, 2, 3, 4], [8, 6, 4, 2]).toFixed(9), '-1.000000000');
  assert.equal(N.pearson([1, 1, 1], [1, 2, 3]), null);
  assert.equal(N.pearson([1, 2], [1, 2]), null, 'two points say nothing');
});

test('the suspect that moves with the ratio is the one named; one that does not is ruled out', () => {
  // aa slower exactly when its busiest worker took more of the requests; the
  // CPU wait differs at random and has nothing to do with it.
  const tops = [0.5, 0.6, 0.52, 0.7, 0.55];
  const waits = [0.3, 0.1, 0.25, 0.2, 0.1];
  const results = [];
  const nginxTops = [0.55, 0.5, 0.6, 0.52, 0.58];
  tops.forEach((top, i) => {
    results.push(run(i + 1, 'uds', 1000, { top: 0.5, wait: 0.2 }));
    results.push(run(i + 1, 'aa', 1000 * Math.exp(-(top - 0.5)), { top, wait: waits[i], nginxTop: nginxTops[i] }));
  });
  const a = N.analyse({ results });
  assert.equal(a.rows.length, 5);
  assert.ok(Math.abs(a.rows[3].ratio - Math.exp(-0.2)) < 1e-9);
  assert.ok(Math.abs(a.rows[3].diffs['top worker'] - 0.2) < 1e-9);
  assert.ok(a.follows['top worker'] < -0.999, `top worker r=${a.follows['top worker']}`);
  assert.ok(Math.abs(a.follows.wait) < 0.5, `wait r=${a.follows.wait}`);
  assert.equal(a.follows.steal, null, 'steal never differed: nothing to read');
  assert.ok(Math.abs(a.rows[2].diffs['nginx top'] - 0.1) < 1e-9, 'the nginx workers\' split is read too');
  const text = N.render(a);
  assert.match(text, /top worker\s+r = -1\.00/);
});

test('the pair adjusted by the in-run probe: a VM that slowed one run is taken out, a real difference stays', () => {
  // The two stacks are the same; in each round the VM ran one of them slower by
  // a factor its in-run probe saw: req/s divided by it, CPU per request times it.
  const slow = [1.0, 1.3, 0.8, 1.15, 0.9];
  const results = [];
  const rec = (round, scenario, factor, work = 1) => {
    const r = run(round, scenario, 1000 / factor / work);
    r.server.cpuUsPerReq = 40 * factor * work;
    r.machine.speedProbeRun = { tries: 30, medianUs: 6000 * factor, meanUs: 6000 * factor, slowShare: 0 };
    return r;
  };
  slow.forEach((f, i) => results.push(rec(i + 1, 'uds', 1), rec(i + 1, 'aa', f)));
  const a = N.analyse({ results });
  assert.equal(a.adjusted.rows.length, 5);
  assert.ok(a.adjusted.reqs.sdLog > 0.1, `as measured the rounds spread: ${a.adjusted.reqs.sdLog}`);
  assert.ok(a.adjusted.reqsAdjusted.sdLog < 1e-9 && Math.abs(a.adjusted.reqsAdjusted.geo - 1) < 1e-9, JSON.stringify(a.adjusted.reqsAdjusted));
  assert.ok(a.adjusted.cpuAdjusted.sdLog < 1e-9 && Math.abs(a.adjusted.cpuAdjusted.geo - 1) < 1e-9);
  // Across the 10 runs: the CPU per request is the probe's, times a constant.
  assert.ok(a.across.rRunProbe > 0.999, `r = ${a.across.rRunProbe}`);
  assert.equal(a.across.rAroundProbe, null, 'the probe around each run never moved: nothing to read');
  assert.ok(a.across.cpuPerProbe.sdLog < 1e-9);
  assert.match(N.render(a), /req\/s 0\.9\d\d, \d+\.\d% → adjusted 1\.000, 0\.0%/);
  assert.match(N.render(a), /across the 10 saturation runs of aa, uds: .*r with the in-run probe 1\.00/s);

  // aa really does 10% more work a request: the adjustment keeps that.
  const real = [];
  slow.forEach((f, i) => real.push(rec(i + 1, 'uds', 1), rec(i + 1, 'aa', f, 1.1)));
  const b = N.analyse({ results: real });
  assert.ok(Math.abs(b.adjusted.reqsAdjusted.geo - 1 / 1.1) < 1e-9, `${b.adjusted.reqsAdjusted.geo}`);
  assert.ok(Math.abs(b.adjusted.cpuAdjusted.geo - 1.1) < 1e-9);
});

test('a round missing one scenario is left out, and fewer than 3 rounds say so', () => {
  const results = [run(1, 'uds', 1000), run(1, 'aa', 900), run(2, 'uds', 1000)];
  const a = N.analyse({ results });
  assert.equal(a.rows.length, 1);
  assert.match(N.render(a), /fewer than 3 rounds/);
});

test('the scheduler counters of a live process: wait and preemptions grow, never shrink', () => {
  const before = cpu.schedSnapshot([process.pid]);
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += i;
  assert.ok(x > 0);
  const after = cpu.schedSnapshot([process.pid]);
  const d = cpu.schedDelta(before, after);
  assert.ok(d.waitUs >= 0 && Number.isFinite(d.waitUs));
  assert.ok(d.involuntary >= 0);
  assert.ok(d.migrations === null || d.migrations >= 0);
  assert.equal(cpu.schedSnapshot([2 ** 22 + 7]).size, 0, 'a pid that does not exist is left out');
  const m = cpu.machineSnapshot();
  assert.ok(m.stealUs >= 0);
  // The speed probe: CPU time of a fixed piece of work, µs (the least of five tries).
  const p = cpu.speedProbeUs();
  assert.ok(Number.isFinite(p) && p > 0, String(p));
});

test('the probe during a run: its tries summarised, the slow ones counted against the run\'s quickest', () => {
  const { summariseTries, SLOW_FACTOR } = require('../../loadtest/speed-probe');
  assert.equal(summariseTries([]), null, 'no try, no figure (a run shorter than one period)');
  const s = summariseTries([3500, 3600, 7200, 3550, 7000]);
  assert.equal(s.tries, 5);
  assert.equal(s.medianUs, 3600);
  assert.equal(s.meanUs, 4970);
  assert.equal(SLOW_FACTOR, 1.5);
  assert.equal(s.slowShare, 2 / 5, 'two tries at ≥ 1.5× the quickest: two fifths of the run on a slow vCPU');
});

test('the probe child: tries while the run lasts, none of those before it; stopped, it is gone', async () => {
  const { startRunProbe } = require('../../loadtest/speed-probe');
  const { until } = require('../lib/util');
  const p = await startRunProbe();
  // The run: until the child has timed at least two tries of its own (bounded wait).
  await until('two tries of the probe during the run', () => p.tries() >= 2, 30000, 20);
  const pid = p.pid;
  const s = await p.stop();
  assert.ok(s.tries >= 2 && s.medianUs > 0 && s.slowShare >= 0 && s.slowShare <= 1, JSON.stringify(s));
  assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, 'the probe child outlived its run');
});

test('the probe child ends on its own when the process that started it is killed', async () => {
  const { spawn } = require('node:child_process');
  const { until } = require('../lib/util');
  const path = require('node:path');
  // A parent that starts the probe, says its pid, and is then SIGKILLed (no stop(), no exit hook).
  const script = `require(${JSON.stringify(path.join(__dirname, '../../loadtest/speed-probe.js'))}).startRunProbe()` +
    '.then((p) => { console.log(p.pid); setInterval(() => {}, 1000); });';
  const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  parent.stdout.on('data', (d) => { out += d; });
  const pid = Number(await until('the probe child\'s pid from its parent', () => /^\d+\n/.test(out) && out.trim(), 30000, 20));
  process.kill(pid, 0); // running
  parent.kill('SIGKILL');
  const alive = () => { try { process.kill(pid, 0); return true; } catch { return false; } };
  try {
    await until('the orphaned probe child to exit', () => !alive(), 30000, 50);
  } finally {
    if (alive()) process.kill(pid, 'SIGKILL');
  }
});
