#!/usr/bin/env node
'use strict';
// Where a bench's round-to-round spread comes from: for two scenarios of one
// bench report (an A/A run: aa and uds, the same values twice), each round's
// req/s ratio beside the difference of every suspect between the two stacks in
// that round: how long the server's threads waited for a CPU, how often they
// moved between CPUs or were preempted, how unevenly the app workers shared
// the requests, what else the machine ran (other processes, the hypervisor's
// steal). Then, over the rounds, how strongly each suspect follows the ratio
// (Pearson's r of the suspect's difference against log(ratio)): a cause moves
// with the ratio, a suspect with |r| near 0 is ruled out by the run.
//
// Then the pair as measured and adjusted by the VM's speed during each run (the
// in-run probe), and, over every run of --across (default: the pair's two
// scenarios), how closely the server's CPU per request follows that probe.
//
//   node loadtest/noise.js loadtest/results/bench.json [--a aa] [--b uds] [--mode saturation] [--across uds,aa,bare,metrics-off]
//
// Read-only: it measures nothing, it reads the per-run records `tunekit bench`
// writes (loadtest/README.md: server.sched, machine.stealCores, workers.share).

const fs = require('node:fs');
const { parseArgs } = require('node:util');

const SUSPECTS = [
  ['wait', 'share of the server threads\' runnable time spent waiting for a CPU', (r) => r.server && r.server.sched && r.server.sched.waitShare],
  ['migr/kreq', 'server threads\' moves between CPUs per 1,000 requests', (r) => r.server && r.server.sched && r.server.sched.migrationsPerKReq],
  ['preempt/kreq', 'server threads taken off a CPU while runnable, per 1,000 requests', (r) => r.server && r.server.sched && r.server.sched.involuntaryPerKReq],
  ['nginx top', 'the busiest nginx worker\'s share of nginx\'s worker CPU', (r) => r.server && r.server.topWorkerCpuShare && r.server.topWorkerCpuShare.nginx],
  ['top worker', 'the busiest app worker\'s share of the requests', (r) => (r.workers && r.workers.share ? Math.max(...Object.values(r.workers.share)) : null)],
  ['gen cores', 'cores the load generator used', (r) => (r.generator && r.generator.cpuUs != null ? r.generator.cpuUs / 1e6 / r.durationS : null)],
  ['cpu probe', 'µs of CPU a fixed piece of work took around the run (its mean before and after): the CPU\'s own speed', (r) => (r.machine && r.machine.speedProbeUs ? (r.machine.speedProbeUs[0] + r.machine.speedProbeUs[1]) / 2 : null)],
  ['run probe', 'µs of CPU the same work took during the run (the mean of its tries every quarter second)', (r) => r.machine && r.machine.speedProbeRun && r.machine.speedProbeRun.meanUs],
  ['srv µs/req', 'the server\'s CPU per request', (r) => r.server && r.server.cpuUsPerReq],
  ['others', 'cores other processes used', (r) => r.machine && r.machine.otherCores],
  ['steal', 'cores the hypervisor gave another guest', (r) => r.machine && r.machine.stealCores],
];

function pearson(xs, ys) {
  const n = xs.length;
  if (n < 3) return null;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
    syy += (ys[i] - my) ** 2;
  }
  return sxx && syy ? sxy / Math.sqrt(sxx * syy) : null;
}

/**
 * Per round: { round, ratio, diffs: {suspect: a - b} }; then { suspect: r } over rounds.
 * A round that lacks either scenario's run, or a suspect's value, leaves it out.
 */
function analyse(report, { a = 'aa', b = 'uds', mode = 'saturation', across = null } = {}) {
  const runs = report.results.filter((r) => r.mode === mode);
  const rounds = [...new Set(runs.map((r) => r.round))].sort((x, y) => x - y);
  const rows = [];
  for (const round of rounds) {
    const ra = runs.find((r) => r.round === round && r.scenario === a);
    const rb = runs.find((r) => r.round === round && r.scenario === b);
    if (!ra || !rb || !ra.reqPerSec || !rb.reqPerSec) continue;
    const diffs = {};
    for (const [name, , get] of SUSPECTS) {
      const va = get(ra);
      const vb = get(rb);
      diffs[name] = va == null || vb == null ? null : va - vb;
    }
    rows.push({ round, ratio: ra.reqPerSec / rb.reqPerSec, diffs });
  }
  const follows = {};
  for (const [name] of SUSPECTS) {
    const pts = rows.filter((row) => row.diffs[name] != null);
    follows[name] = pearson(pts.map((row) => row.diffs[name]), pts.map((row) => Math.log(row.ratio)));
  }
  return { a, b, mode, rows, follows, adjusted: adjustedPairs(runs, rounds, a, b), across: acrossRuns(runs, across || [a, b]) };
}

const runProbe = (r) => (r.machine && r.machine.speedProbeRun && r.machine.speedProbeRun.meanUs) || null;
const cpuPerReq = (r) => (r.server && r.server.cpuUsPerReq) || null;

/** Geometric mean and the standard deviation of the logs (n - 1), or nulls below 2 values. */
function logSpread(xs) {
  if (xs.length < 2) return { geo: null, sdLog: null };
  const logs = xs.map(Math.log);
  const m = logs.reduce((s, x) => s + x, 0) / logs.length;
  return { geo: Math.exp(m), sdLog: Math.sqrt(logs.reduce((s, x) => s + (x - m) ** 2, 0) / (logs.length - 1)) };
}

/**
 * Each round's pair as measured and as the VM's speed during the two runs would
 * have it (loadtest/speed-probe.js: the in-run probe's mean): req/s ratio times
 * probe(a)/probe(b) — a run on a slower VM served less and its probe took longer
 * — and the CPU-per-request ratio divided by it. A correction that works narrows
 * the spread (sdLog) of the adjusted ratios; the bench itself does not apply it.
 */
function adjustedPairs(runs, rounds, a, b) {
  const rows = [];
  for (const round of rounds) {
    const ra = runs.find((r) => r.round === round && r.scenario === a);
    const rb = runs.find((r) => r.round === round && r.scenario === b);
    if (!ra || !rb || !ra.reqPerSec || !rb.reqPerSec || !runProbe(ra) || !runProbe(rb) || !cpuPerReq(ra) || !cpuPerReq(rb)) continue;
    const probe = runProbe(ra) / runProbe(rb);
    const reqs = ra.reqPerSec / rb.reqPerSec;
    const cpu = cpuPerReq(ra) / cpuPerReq(rb);
    rows.push({ round, reqs, cpu, probe, reqsAdjusted: reqs * probe, cpuAdjusted: cpu / probe });
  }
  const col = (k) => logSpread(rows.map((row) => row[k]));
  return { rows, reqs: col('reqs'), reqsAdjusted: col('reqsAdjusted'), cpu: col('cpu'), cpuAdjusted: col('cpuAdjusted') };
}

/**
 * Over every run of the named scenarios (stacks that do nearly the same work per
 * request): how closely the server's CPU per request follows the in-run probe
 * (Pearson's r) and the probe around the run (before/after), and the spread of
 * the CPU per request as measured and divided by the in-run probe.
 */
function acrossRuns(runs, scenarios) {
  const pts = runs.filter((r) => scenarios.includes(r.scenario) && runProbe(r) && cpuPerReq(r));
  const cpu = pts.map(cpuPerReq);
  const around = pts.map((r) => (r.machine.speedProbeUs ? (r.machine.speedProbeUs[0] + r.machine.speedProbeUs[1]) / 2 : null));
  return {
    scenarios,
    runs: pts.length,
    rRunProbe: pearson(cpu, pts.map(runProbe)),
    rAroundProbe: around.every((v) => v != null) ? pearson(cpu, around) : null,
    cpu: logSpread(cpu),
    cpuPerProbe: logSpread(pts.map((r) => cpuPerReq(r) / runProbe(r))),
  };
}

function fmt(v, digits = 3) {
  return v == null || Number.isNaN(v) ? '–' : v.toFixed(digits);
}

const pct = (v) => (v == null ? '–' : `${(100 * v).toFixed(1)}%`);

function render({ a, b, mode, rows, follows, adjusted, across }) {
  const names = SUSPECTS.map(([n]) => n);
  const lines = [`${a}/${b}, ${mode} runs: the req/s ratio per round and each suspect's difference (${a} - ${b})`, ''];
  lines.push(['round', 'ratio', ...names].join('\t'));
  for (const row of rows) lines.push([row.round, fmt(row.ratio), ...names.map((n) => fmt(row.diffs[n]))].join('\t'));
  lines.push('', `how closely each difference follows log(ratio) over ${rows.length} rounds (Pearson's r; |r| near 1: moves with it, near 0: does not):`);
  for (const [name, what] of SUSPECTS) lines.push(`  ${name.padEnd(13)} r = ${fmt(follows[name], 2).padStart(5)}  ${what}`);
  if (rows.length < 3) lines.push('', 'fewer than 3 rounds: no correlation can be read; run the bench with more --rounds');
  if (adjusted && adjusted.rows.length) {
    lines.push('', `${a}/${b} per round, as measured and adjusted by the in-run probe (req/s × probe ${a}/${b}; CPU per request ÷ it):`);
    lines.push(['round', 'req/s', 'adjusted', 'cpu/req', 'adjusted', 'probe'].join('\t'));
    for (const r of adjusted.rows) lines.push([r.round, fmt(r.reqs), fmt(r.reqsAdjusted), fmt(r.cpu), fmt(r.cpuAdjusted), fmt(r.probe)].join('\t'));
    lines.push(`geometric mean, sd of log: req/s ${fmt(adjusted.reqs.geo)}, ${pct(adjusted.reqs.sdLog)} → adjusted ${fmt(adjusted.reqsAdjusted.geo)}, ${pct(adjusted.reqsAdjusted.sdLog)};`
      + ` cpu/req ${fmt(adjusted.cpu.geo)}, ${pct(adjusted.cpu.sdLog)} → adjusted ${fmt(adjusted.cpuAdjusted.geo)}, ${pct(adjusted.cpuAdjusted.sdLog)}`);
  }
  if (across && across.runs >= 3) {
    lines.push('', `across the ${across.runs} ${mode} runs of ${across.scenarios.join(', ')}: server CPU per request against the probe`,
      `  r with the in-run probe ${fmt(across.rRunProbe, 2)}, with the probe around the run ${fmt(across.rAroundProbe, 2)};`
      + ` sd of log ${pct(across.cpu.sdLog)} as measured, ${pct(across.cpuPerProbe.sdLog)} divided by the in-run probe`);
  }
  return lines.join('\n');
}

function main(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      a: { type: 'string', default: 'aa' }, b: { type: 'string', default: 'uds' }, mode: { type: 'string', default: 'saturation' },
      across: { type: 'string' },
    },
  });
  if (positionals.length !== 1) {
    process.stderr.write('usage: node loadtest/noise.js REPORT.json [--a aa] [--b uds] [--mode saturation] [--across uds,aa,bare,metrics-off]\n');
    return 2;
  }
  let report;
  try {
    report = JSON.parse(fs.readFileSync(positionals[0], 'utf8'));
  } catch (e) {
    process.stderr.write(`cannot read the bench report ${positionals[0]}: ${e.message}; write one with tunekit bench --aa --json FILE\n`);
    return 1;
  }
  const seen = new Set((report.results || []).map((r) => r.scenario));
  for (const s of [values.a, values.b]) {
    if (!seen.has(s)) {
      process.stderr.write(`${positionals[0]} has no scenario ${s} (it has ${[...seen].join(', ')}); run tunekit bench --aa, or pass --a/--b\n`);
      return 1;
    }
  }
  const across = values.across ? values.across.split(',').map((x) => x.trim()).filter(Boolean) : null;
  for (const s of across || []) {
    if (!seen.has(s)) {
      process.stderr.write(`${positionals[0]} has no scenario ${s} for --across (it has ${[...seen].join(', ')})\n`);
      return 1;
    }
  }
  process.stdout.write(`${render(analyse(report, { a: values.a, b: values.b, mode: values.mode, across }))}\n`);
  return 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));

module.exports = { analyse, pearson, render, logSpread, SUSPECTS };
