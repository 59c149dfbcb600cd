'use strict';
// `tunekit bench`: stock vs kit-tuned TCP vs kit-tuned UDS, with the
// nginx-static and direct ceilings, A/B interleaved rounds, medians with
// min–max and per-round ratios. Writes JSON, Markdown and HTML reports
// (default loadtest/results/bench.*). The harness is loadtest/bench.js.

const { UsageError } = require('../../lib/errors');
const { requirePackages, finish } = require('./loadtest');

async function main(argv) {
  requirePackages();
  const { parse, BENCH } = require('../../loadtest/options');
  const o = parse('bench', BENCH, argv);
  if (o.help) {
    console.log(o.help);
    return 0;
  }
  // Refuse a wrong-typed --set/--vars value before anything starts.
  require('../../lib/config').resolve({ varsFiles: o.vars, set: o.set, check: false });
  const { runBench, SCENARIOS } = require('../../loadtest/bench');
  const { createProgress } = require('../../loadtest/progress');
  const report = require('../../loadtest/report');
  const { benchText } = require('../../loadtest/table');
  o.scenarios = o.scenarios.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = o.scenarios.filter((s) => !SCENARIOS[s]);
  if (unknown.length) throw new UsageError(`unknown scenario ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  o.progress = createProgress({ enabled: !o.noProgress });
  o.varsFiles = o.vars;
  o.timeoutS = o.timeout;
  const started = Date.now();
  const { results, summary, ratios } = await runBench(o);
  const doc = report.document('bench', {
    command: `tunekit bench ${argv.join(' ')}`.trim(),
    options: {
      scenarios: o.scenarios, rounds: o.rounds, duration: o.duration, connections: o.connections, driver: o.driver,
      procs: o.procs, cpuRate: o.cpuRate, cpuDuration: o.cpuDuration, warmup: o.warmup, workers: o.workers,
      wallSeconds: Math.round((Date.now() - started) / 1000),
    },
    results,
    summary,
    ratios,
  });
  return finish(doc, o, benchText(doc));
}

module.exports = { main };
