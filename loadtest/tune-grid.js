#!/usr/bin/env node
'use strict';
// The exhaustive grid that `tunekit tune` is judged against (docs/tuning.md): every
// combination of the tuner's own ladders (tune.js SPACE, or the --vary subset) that
// passes the kit's rules, each started as a local stack and measured once at
// saturation; then the best --top of them measured again in --rounds interleaved
// rounds (stats.roundOrder), so the grid's best is not one lucky run. Hours of load
// for the full grid on 2 cores: run it once, on a quiet machine.
//
//   node loadtest/tune-grid.js --vary tunekit_app_workers,tunekit_app_strategy --duration 5 --json /tmp/grid.json

const fs = require('node:fs');
const { parseArgs } = require('node:util');
const T = require('./tune');
const { realIo, startValues, refusals } = require('./tune-run');
const { roundOrder, spread } = require('./stats');
const { interval, intervalText } = require('./interval');
const { cores } = require('./cpu');
const wrk = require('./wrk');
const { createProgress } = require('./progress');

const HELP = `usage: node loadtest/tune-grid.js [--vary LIST] [--from FILE.yml] [--duration S] [--connections N]
                                  [--top N] [--rounds N] [--limit N] [--also FILE.yml,...] [--compare GRID.json] [--gzip]
                                  [--driver wrk|autocannon] [--json FILE]
Every combination of the tuner's ladders that passes the kit's rules and holds the load
(worker_connections enough for --connections on one nginx worker), measured once at saturation
(req/s); the best --top (default 5) again in --rounds (default 3) interleaved rounds.
--also adds the values of vars files (e.g. tune's recommendations) to those rounds, so
each is measured side by side with the grid's best. --compare GRID.json takes the grid's
best from an earlier run's JSON instead of measuring the grid again, and measures it
beside the --also files. --limit N measures only the first N combinations (a quick check
of the script). --gzip: the load asks for gzip and the gzip level is varied (as tune
--gzip). --driver: the load generator, as tune's (default wrk where installed). Each line
names the values that differ from --from (or the kit's defaults).`;

function options(argv) {
  const { values: v } = parseArgs({
    args: argv,
    options: {
      vary: { type: 'string' }, from: { type: 'string' }, duration: { type: 'string', default: '5' },
      connections: { type: 'string', default: '50' }, top: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' },
      limit: { type: 'string' }, also: { type: 'string' }, compare: { type: 'string' }, json: { type: 'string' }, gzip: { type: 'boolean' },
      driver: { type: 'string', default: wrk.available() ? 'wrk' : 'autocannon' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return null;
  const n = (name) => {
    const x = Number(v[name]);
    if (!Number.isInteger(x) || x < 1) throw new Error(`--${name} must be a whole number >= 1 (got "${v[name]}")`);
    return x;
  };
  if (!['wrk', 'autocannon'].includes(v.driver)) throw new Error(`--driver must be wrk or autocannon (got "${v.driver}")`);
  const c = cores();
  return {
    objective: 'rps', p99Us: null, durationS: n('duration'), connections: n('connections'), top: n('top'), rounds: n('rounds'),
    limit: v.limit === undefined ? Infinity : n('limit'), json: v.json || null, from: v.from || null,
    also: v.also ? v.also.split(',').map((x) => x.trim()).filter(Boolean) : [],
    compare: v.compare || null,
    // As `tunekit tune`: the gzip level is varied only for a load that asks for gzip.
    vary: T.variedFor(v.vary ? v.vary.split(',').map((x) => x.trim()) : null, v.gzip), gzip: Boolean(v.gzip),
    cores: c, procs: Math.min(2, c), paths: null, driver: v.driver,
  };
}

async function measureAll(points, io, o) {
  const runs = [];
  for (const [i, values] of points.entries()) {
    io.progress(`grid ${i + 1}/${points.length}: ${T.labelOf(values, o.start)}`);
    const arm = await io.open(values);
    try {
      const r = await io.measure(arm);
      runs.push({ values, label: T.labelOf(values, o.start), value: r.value, meets: r.meets, result: r.result });
    } finally {
      await io.close(arm);
    }
  }
  return runs;
}

// What a round that missed the objective saw: failed requests (errors, timeouts),
// non-2xx answers, or none of those (no answer at all, or a p99 over the bound).
function missOf(r) {
  const x = r.result || {};
  return { reqPerSec: r.value, errors: x.errors || 0, non2xx: x.non2xx || 0, p99Us: r.p99Us };
}

/** One line of the confirmation: the median and range, and the rounds that missed, said as such (counted as 0). */
function topLine(t) {
  const s = t.reqPerSec;
  let line = `  ${t.label}: ${Math.round(s.median)} req/s (${Math.round(s.min)}–${Math.round(s.max)}) over ${s.n} rounds`;
  const missed = t.missed || [];
  if (missed.length) {
    const errors = missed.reduce((a, m) => a + m.errors, 0);
    const non2xx = missed.reduce((a, m) => a + m.non2xx, 0);
    const what = errors || non2xx ? `${errors} failed requests, ${non2xx} non-2xx answers`
      : missed.every((m) => !m.reqPerSec) ? 'no request answered' : 'p99 over the bound';
    line += `; ${missed.length} of ${s.n} missed the objective (${what}) and count as 0 req/s`;
  }
  return line;
}

async function confirmTop(top, io, o) {
  const arms = [];
  try {
    for (const t of top) arms.push({ ...t, arm: await io.open(t.values), rounds: [], missed: [] });
    for (let round = 0; round < o.rounds; round++) {
      for (const i of roundOrder(arms.map((_, k) => k), round)) {
        io.progress(`top ${arms.length}, round ${round + 1}/${o.rounds}: ${arms[i].label}`);
        const r = await io.measure(arms[i].arm);
        arms[i].rounds.push(r.meets ? r.value : 0);
        if (!r.meets) arms[i].missed.push(missOf(r));
      }
    }
  } finally {
    for (const a of arms) await io.close(a.arm);
  }
  return arms.map(({ arm, ...a }) => ({ ...a, reqPerSec: spread(a.rounds) })).sort((a, b) => b.reqPerSec.median - a.reqPerSec.median);
}

async function main(argv) {
  const o = options(argv);
  if (!o) {
    console.log(HELP);
    return 0;
  }
  o.start = startValues(o.from);
  o.t0 = Date.now();
  o.budgetS = '–';
  o.progress = createProgress({});
  const all = T.grid(o.start, o.cores, o.vary);
  // The same space as tune's, by tune's own check: the kit's rules and the load's
  // (worker_connections that hold --connections on one nginx worker).
  const check = { check: (v) => refusals(v, o.from) };
  const passing = all.filter((v) => T.refusalsOf(v, check, o).length === 0);
  const points = passing.slice(0, o.limit);
  // Read before hours of load, so a wrong path fails now: each file over the kit's
  // defaults (not over --from), as `render --vars FILE` reads it.
  const also = o.also.map((file) => ({ file, values: startValues(file) }));
  for (const a of also) {
    const refused = refusals(a.values, null);
    if (refused.length) throw new Error(`--also ${a.file}: the kit refuses these values (${refused[0]}); give a vars file render takes`);
  }
  const earlier = o.compare ? JSON.parse(fs.readFileSync(o.compare, 'utf8')) : null;
  if (earlier && !(earlier.kind === 'tune-grid' && earlier.best)) throw new Error(`--compare ${o.compare}: not a grid's JSON with a best (node loadtest/tune-grid.js --json FILE writes one)`);
  const io = realIo(o);
  try {
    const runs = earlier ? [] : await measureAll(points, io, o);
    const best = earlier
      // Labelled against this run's start (--from, or the kit's defaults) like the
      // --also files, not against the grid's own --from: one base for every line.
      ? [{ values: earlier.best.values, label: T.labelOf(earlier.best.values, o.start), value: earlier.best.reqPerSec.median, meets: true }]
      : [...runs].sort((a, b) => (b.meets ? b.value : 0) - (a.meets ? a.value : 0)).slice(0, o.top);
    const extra = also.map((a) => ({ values: a.values, label: `${a.file}: ${T.labelOf(a.values, o.start)}`, file: a.file }));
    const top = await confirmTop([...best, ...extra], io, o);
    const doc = { kind: earlier ? 'tune-grid-compare' : 'tune-grid', createdAt: new Date().toISOString(), command: `node loadtest/tune-grid.js ${argv.join(' ')}`.trim(),
      cores: o.cores, points: all.length, refused: all.length - passing.length,
      measured: runs.length, runs, top, best: null, also: [] };
    // The grid's best is a grid point; a vars file of --also is judged against it,
    // round by round (the ratio of the two runs of the same round).
    const gridBest = top.find((t) => !t.file);
    if (gridBest) doc.best = { label: gridBest.label, values: gridBest.values, reqPerSec: gridBest.reqPerSec };
    doc.also = top.filter((t) => t.file).map((t) => ({ file: t.file, label: t.label, reqPerSec: t.reqPerSec,
      ratioToBest: gridBest ? ratioSpread(t.rounds.map((x, i) => x / gridBest.rounds[i])) : null }));
    if (o.json) fs.writeFileSync(o.json, `${JSON.stringify(doc, null, 2)}\n`);
    console.log(earlier
      ? `compared: the best of ${o.compare} (${earlier.createdAt || 'undated'}) beside ${also.length} vars file(s), in ${o.rounds} interleaved rounds`
      : `grid: ${all.length} combinations, ${runs.length} measured (rules-passing${Number.isFinite(o.limit) ? `, first ${o.limit}` : ''})`);
    for (const t of top) console.log(topLine(t));
    for (const a of doc.also.filter((x) => x.ratioToBest)) {
      const r = a.ratioToBest;
      console.log(`  ${a.file} over the grid's best, per round: median ${r.median.toFixed(2)} (${r.min.toFixed(2)}–${r.max.toFixed(2)}); ` +
        `geometric mean ${intervalText(r.ci)}`);
    }
  } finally {
    await io.closeAll();
  }
  return 0;
}

// A ratio per round, as the bench summarises one: median (min–max) and the 95% interval.
function ratioSpread(perRound) {
  return { ...spread(perRound), ci: interval(perRound) };
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(`tune-grid: ${err.message.split('\n')[0]}`);
    process.exit(2);
  });
}

module.exports = { main, confirmTop, topLine };
