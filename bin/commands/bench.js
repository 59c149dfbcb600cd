'use strict';
// `tunekit bench`: stock vs kit-tuned TCP vs kit-tuned UDS, with the
// nginx-static, direct and bare ceilings and metrics off, A/B interleaved rounds, medians with
// min–max and per-round ratios. Writes JSON, Markdown and HTML reports
// (default loadtest/results/bench.*). The harness is loadtest/scenarios.js.

const { UsageError } = require('../../lib/errors');
const { requirePackages, finish } = require('./loadtest');
const options = require('../load-options');
const command = require('../../lib/command');

// The options table is shared with the other load command (bin/load-options.js).
const COMMAND = options.commandOf('bench', options.BENCH);

// Without --rounds: auto for the A/B rounds (until every interval is within --width:
// 3 rounds cannot resolve 3% on a VM of this kind, docs/benchmarks.md), 3 for the TLS
// and overload benches, which take a number.
function parse(argv) {
  const o = options.parse('bench', options.BENCH, argv);
  if (o.rounds === undefined) o.rounds = o.https || o.overload ? 3 : 'auto';
  return o;
}

async function main(argv) {
  requirePackages();
  const o = parse(argv);
  if (command.printedHelp(COMMAND, o)) return 0;
  if (o.http2 && !o.https) throw new UsageError('--http2 is part of the TLS bench: add --https');
  const autoOnly = ['width', 'budget-s', 'max-rounds'].filter((k) => argv.some((a) => a === `--${k}` || a.startsWith(`--${k}=`)));
  if (o.rounds !== 'auto' && autoOnly.length) {
    const fix = o.https || o.overload ? `drop ${autoOnly.map((k) => `--${k}`).join(', ')}` : `drop --rounds ${o.rounds}`;
    throw new UsageError(`${autoOnly.map((k) => `--${k}`).join(', ')} belong${autoOnly.length > 1 ? '' : 's'} to --rounds auto (the default without --rounds): ${fix}`);
  }
  if (o.rounds === 'auto' && (o.https || o.overload)) throw new UsageError('--rounds auto is for the plain bench; give --https and --overload a number of rounds');
  const overloadOnly = ['multiples', 'step', 'recovery', 'capacity', 'max-connections', 'protect', 'latency-budget', 'burst'].filter((k) => argv.some((a) => a === `--${k}` || a.startsWith(`--${k}=`)));
  if (!o.overload && overloadOnly.length) throw new UsageError(`${overloadOnly.map((k) => `--${k}`).join(', ')} belong${overloadOnly.length > 1 ? '' : 's'} to the overload bench: add --overload`);
  if (o.overload && (o.https || o.try || o.aa || o.pin || o.keepStacks)) throw new UsageError('bench --overload runs its own three stacks; drop --https, --try, --aa, --pin and --keep-stacks');
  if (o.pin && o.ownCore) throw new UsageError('--pin and --own-core place the same workers two ways: give one of them');
  // The TLS bench has its own fronts, clients and drivers (loadtest/README.md).
  const plainOnly = ['scenarios', 'driver', 'procs', 'cpu-rate', 'cpu-duration', 'try', 'aa', 'pin', 'keep-stacks', 'own-core'].filter((k) => argv.some((a) => a === `--${k}` || a.startsWith(`--${k}=`)));
  if (o.https && plainOnly.length) {
    throw new UsageError(`bench --https runs its own fronts and clients; drop ${plainOnly.map((k) => `--${k}`).join(', ')}`);
  }
  // Refuse a wrong-typed --set/--vars/--try value before anything starts.
  require('../../lib/config').resolve({ varsFiles: o.try ? [...o.vars, o.try] : o.vars, set: o.set, check: false });
  const { createProgress } = require('../../loadtest/progress');
  o.progress = createProgress({ enabled: !o.noProgress });
  o.varsFiles = o.vars;
  o.timeoutS = o.timeout;
  if (o.https) return tlsBench(argv, o);
  if (o.overload) return overloadBench(argv, o);
  const { runBench, SCENARIOS } = require('../../loadtest/scenarios');
  const report = require('../../loadtest/report');
  const { benchText } = require('../../loadtest/table');
  o.scenarios = o.scenarios.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = o.scenarios.filter((s) => !SCENARIOS[s]);
  if (unknown.length) throw new UsageError(`unknown scenario ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  // --try adds its scenario; the scenario without a file has nothing to measure.
  if (o.try && !o.scenarios.includes('try')) o.scenarios.push('try');
  if (!o.try && o.scenarios.includes('try')) throw new UsageError('the scenario try measures a vars file: add --try FILE.yml (tune\'s recommendation, say)');
  // --aa adds the A/A scenario, and the uds stack it is measured against.
  if (o.aa) for (const s of ['uds', 'aa']) if (!o.scenarios.includes(s)) o.scenarios.push(s);
  if (o.scenarios.includes('aa') && !o.scenarios.includes('uds')) throw new UsageError('the scenario aa is measured against uds: add uds to --scenarios (or use --aa)');
  const started = Date.now();
  const { results, rounds, summary, ratios, auto, pinned, placement } = await runBench(o);
  const doc = report.document('bench', {
    command: `tunekit bench ${argv.join(' ')}`.trim(),
    options: {
      scenarios: o.scenarios, rounds: o.rounds, roundsRun: rounds,
      ...(o.rounds === 'auto' && { width: o.width, budgetS: o.budgetS, maxRounds: o.maxRounds }),
      duration: o.duration, connections: o.connections, driver: o.driver,
      procs: o.procs, cpuRate: o.cpuRate, cpuDuration: o.cpuDuration, warmup: o.warmup, workers: o.workers,
      ...(o.try && { try: o.try }),
      restart: !o.keepStacks,
      ...(pinned && { pinned }),
      ...(placement && { placement }),
      wallSeconds: Math.round((Date.now() - started) / 1000),
    },
    results,
    summary,
    ratios,
  });
  if (auto) doc.auto = auto;
  return finish(doc, o, benchText(doc));
}

// --overload: the overload bench (loadtest/overload.js), reports bench-overload.* by default.
async function overloadBench(argv, o) {
  const { runOverload, connectionCap } = require('../../loadtest/overload');
  const report = require('../../loadtest/report');
  const { benchText } = require('../../loadtest/table');
  const { BENCH } = require('../load-options');
  for (const k of ['json', 'md', 'html']) if (o[k] === BENCH[k].dflt) o[k] = o[k].replace(/bench\./, 'bench-overload.');
  if (o.burst && argv.some((a) => a === '--multiples' || a.startsWith('--multiples='))) throw new UsageError('bench --overload --burst runs its own steps (0.5×, the burst, 0.5×); drop --multiples');
  const maxConnections = connectionCap(o.maxConnections);
  const started = Date.now();
  const out = await runOverload({
    multiples: o.multiples, stepS: o.step, recoveryS: o.recovery, capacity: o.capacity === 'paced' ? 0 : o.capacity || 0, pacedCapacity: o.capacity === 'paced', capacityS: o.duration,
    connections: o.connections, maxConnections, timeoutS: o.timeout, workers: o.workers, app: o.app, set: o.set, varsFiles: o.vars,
    driver: o.driver, procs: o.procs, progress: o.progress,
    protect: o.protect, latencyBudgetMs: o.latencyBudget, burst: o.burst, ownCore: o.ownCore,
  });
  const doc = report.document('bench-overload', {
    command: `tunekit bench ${argv.join(' ')}`.trim(),
    options: {
      multiples: o.multiples, step: o.step, recovery: o.recovery, capacity: o.capacity || null, duration: o.duration, connections: o.connections,
      maxConnections, protect: o.protect, latencyBudgetMs: o.latencyBudget, burst: Boolean(o.burst), ownCore: Boolean(o.ownCore), timeout: o.timeout, driver: o.driver, workers: o.workers, wallSeconds: Math.round((Date.now() - started) / 1000),
    },
    results: out.results,
  });
  doc.overload = { capacity: out.capacity, capacityRun: out.capacityRun, ladder: out.ladder, burst: out.burst, stacks: out.stacks, ...(out.placement && { placement: out.placement }) };
  return finish(doc, o, benchText(doc));
}

// --https: the TLS bench (loadtest/tls-bench.js), reports bench-tls.* by default.
async function tlsBench(argv, o) {
  const { runTlsBench } = require('../../loadtest/tls-bench');
  const report = require('../../loadtest/report');
  const { benchText } = require('../../loadtest/table');
  const { BENCH } = require('../load-options');
  for (const k of ['json', 'md', 'html']) if (o[k] === BENCH[k].dflt) o[k] = o[k].replace(/bench\./, 'bench-tls.');
  // Client shapes: h2load starts new clients in batches of 100; 16 returning
  // clients; 8 HTTP/2 connections of 16 streams; gzip runs half the duration.
  Object.assign(o, { newBatch: 100, returningConnections: 16, h2Connections: 8, h2Streams: 16, gzipDuration: Math.max(1, o.duration / 2) });
  const started = Date.now();
  const { results, summary, ratios, gzip, crypto, fronts, clients } = await runTlsBench(o);
  const doc = report.document('bench-tls', {
    command: `tunekit bench ${argv.join(' ')}`.trim(),
    options: {
      rounds: o.rounds, duration: o.duration, connections: o.connections, clients, newBatch: o.newBatch,
      returningConnections: o.returningConnections, h2Connections: o.h2Connections, h2Streams: o.h2Streams,
      gzipDuration: o.gzipDuration, warmup: o.warmup, workers: o.workers, wallSeconds: Math.round((Date.now() - started) / 1000),
    },
    results,
    summary,
    ratios,
  });
  doc.gzip = gzip;
  doc.crypto = crypto;
  doc.fronts = fronts;
  return finish(doc, o, benchText(doc));
}

module.exports = { main, parse, COMMAND };
