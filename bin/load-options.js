'use strict';
// Command-line options of `tunekit loadtest` and `tunekit bench`, the two load
// commands, which share most of them: one table each (name, type, default,
// help) that parses argv and prints --help (in the format of every command's,
// lib/command.js). The rules between options are in each command's own file.

const { parseCommandLine, outputFile, inputFile } = require('../lib/args');
const command = require('../lib/command');
const { UsageError } = require('../lib/errors');
const { choices, stackShape } = require('../lib/config');
const { cores } = require('../loadtest/cpu');
const { available: wrkAvailable } = require('../loadtest/wrk');
const { DEFAULT_SCENARIOS } = require('../loadtest/scenarios');
const { PROTECT_MODES, DEFAULT_LATENCY_BUDGET_MS, BURST_MULTIPLE, BURST_S } = require('../loadtest/overload');

const positiveInt = (name, v) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a whole number >= 1 (got "${v}")`);
  return n;
};
const positiveNum = (name, v) => {
  const n = Number(v);
  if (!(n > 0)) throw new UsageError(`--${name} must be a number > 0 (got "${v}")`);
  return n;
};
// --capacity: a rate, or `paced` (loadtest/overload.js measures it).
const capacityArg = (name, v) => (v === 'paced' ? v : positiveNum(name, v));
const nonNegNum = (name, v) => {
  const n = Number(v);
  if (!(n >= 0)) throw new UsageError(`--${name} must be a number >= 0 (got "${v}")`);
  return n;
};
// A count of rounds, or 'auto' (bench: until the intervals are narrow enough).
const roundsOrAuto = (name, v) => (v === 'auto' ? v : positiveInt(name, v));
// A ladder of multiples: numbers > 0, ascending.
const multiplesList = (name, v) => {
  const xs = String(v).split(',').map((x) => Number(x.trim()));
  if (!xs.length || xs.some((x) => !(x > 0)) || xs.some((x, i) => i && x <= xs[i - 1])) {
    throw new UsageError(`--${name} must be ascending numbers > 0, comma-separated, e.g. 0.8,1,2 (got "${v}")`);
  }
  return xs;
};
// A report path: its directory must exist (nothing is created at a mistyped path).
const reportFile = outputFile;
// The help lists `choices` as the allowed values.
const oneOf = (choices) => Object.assign((name, v) => {
  if (!choices.includes(v)) throw new UsageError(`--${name} must be one of ${choices.join(', ')} (got "${v}")`);
  return v;
}, { choices });

const COMMON = {
  duration: { type: 'string', value: 'S', conv: positiveNum, help: 'seconds per run' },
  connections: { type: 'string', value: 'N', conv: positiveInt, dflt: '50', help: 'concurrent connections' },
  driver: { type: 'string', value: 'NAME', conv: oneOf(['autocannon', 'wrk']), help: 'load generator for saturation runs' },
  procs: { type: 'string', value: 'N', conv: positiveInt, dflt: String(Math.min(2, cores())), help: 'autocannon generator processes; one saturates near 36k req/s' },
  app: { type: 'string', value: 'PATH', conv: inputFile, help: 'your app behind the local stack, as `tunekit run PATH` takes it (relative to the current directory; default: the example app)' },
  workers: { type: 'string', value: 'N', conv: positiveInt, help: 'app cluster workers of the local stack (default: tunekit_app_workers of the --vars files, else 2)' },
  set: { type: 'string', value: 'KEY=VALUE', multiple: true, dflt: [], help: 'override of a tunable, like -e key=value' },
  vars: { type: 'string', value: 'FILE.yml', multiple: true, dflt: [], help: 'YAML vars file, as ansible -e @file' },
  timeout: { type: 'string', value: 'S', conv: positiveNum, dflt: '10', help: 'per-request timeout, seconds' },
  json: { type: 'string', value: 'FILE', conv: reportFile, help: 'write the JSON report (schema: loadtest/README.md)' },
  md: { type: 'string', value: 'FILE', conv: reportFile, help: 'write a Markdown report' },
  html: { type: 'string', value: 'FILE', conv: reportFile, help: 'write a self-contained HTML report with charts' },
  wide: { type: 'boolean', help: 'every column in the terminal table (the default view fits 100 columns)' },
  'no-progress': { type: 'boolean', help: 'no progress output on stderr' },
};

const LOADTEST = {
  upstream: { type: 'string', value: 'KIND', conv: oneOf(choices('tunekit_upstream_kind')), help: 'upstream of the local stack; without it uds, or tcp with --profile stock' },
  profile: { type: 'string', value: 'NAME', conv: oneOf(choices('tunekit_profile')), dflt: 'tuned', help: 'the kit\'s tuned settings or stock nginx/Node' },
  ...COMMON,
  duration: { ...COMMON.duration, dflt: '10' },
  driver: { ...COMMON.driver, dflt: 'autocannon' },
  rate: { type: 'string', value: 'R', conv: positiveNum, help: 'paced mode: req/s, evenly spaced (shown beside autocannon -R)' },
  url: { type: 'string', value: 'URL', help: 'drive an existing deployment (no local stack), e.g. http://10.0.0.5/' },
  socket: { type: 'string', value: 'PATH', help: 'drive an existing Unix socket (no local stack)' },
  'error-log': { type: 'string', value: 'FILE', help: 'nginx error.log to watch for an existing deployment' },
  https: { type: 'boolean', help: 'the local stack serves HTTPS (a throwaway CA the generators trust); autocannon only' },
  http2: { type: 'boolean', help: 'the local stack over HTTPS, driven over HTTP/2 by h2load (saturation; h2load does not verify the certificate)' },
  streams: { type: 'string', value: 'N', conv: positiveInt, dflt: '10', help: 'with --http2: concurrent streams per connection' },
};

const BENCH = {
  ...COMMON,
  duration: { ...COMMON.duration, dflt: '8' },
  driver: { ...COMMON.driver, dflt: wrkAvailable() ? 'wrk' : 'autocannon' },
  rounds: { type: 'string', value: 'N|auto', conv: roundsOrAuto, help: 'A/B rounds, the order rotated per round; auto (the default): until every ratio\'s interval is within --width, or --max-rounds, or --budget-s; --https and --overload: a number (default 3)' },
  width: { type: 'string', value: 'PCT', conv: positiveNum, dflt: '3', help: 'with --rounds auto: the widest interval wanted, ± percent of the ratio' },
  'budget-s': { type: 'string', value: 'S', conv: positiveNum, dflt: '1200', help: 'with --rounds auto: seconds the whole bench may take; no round starts that would end past it' },
  'max-rounds': { type: 'string', value: 'N', conv: positiveInt, dflt: '20', help: 'with --rounds auto: the most rounds' },
  aa: { type: 'boolean', help: 'A/A: adds the scenario aa, a second stack of the uds values, and aa/uds per round: the run\'s noise floor' },
  'keep-stacks': { type: 'boolean', help: 'every round on the stacks started once, instead of fresh stacks before every round (the default, each warmed up again): a start of a stack can keep an offset for its life (its app processes serving 15-25% slower: docs/benchmarks.md), a bias no number of rounds on the same stacks reveals; quicker for short looks' },
  pin: { type: 'boolean', help: 'each nginx and app worker on a CPU (worker k on CPU k mod cores, taskset), the generator free: the placement experiment of docs/benchmarks.md' },
  scenarios: { type: 'string', value: 'LIST', dflt: DEFAULT_SCENARIOS.join(','), help: 'comma-separated scenarios' },
  'cpu-rate': { type: 'string', value: 'R', conv: nonNegNum, dflt: '5000', help: 'fixed rate (req/s) for CPU per request; 0 skips' },
  'cpu-duration': { type: 'string', value: 'S', conv: positiveNum, dflt: '4', help: 'seconds of each fixed-rate run' },
  warmup: { type: 'string', value: 'S', conv: nonNegNum, dflt: '2', help: 'seconds of unrecorded warm-up per scenario' },
  try: { type: 'string', value: 'FILE.yml', conv: inputFile, help: 'a vars file (tune\'s recommendation) measured in the same rounds as the kit\'s values: adds the scenario try, and try/uds per round' },
  https: { type: 'boolean', help: 'the TLS bench: plain vs tls-stock vs tls-tuned, new/returning/keep-alive clients, gzip (reports bench-tls.*)' },
  overload: { type: 'boolean', help: 'the overload bench: stock vs the kit vs the kit with overload protection, an open-loop ladder of multiples of the measured capacity, then 0.5× (reports bench-overload.*)' },
  multiples: { type: 'string', value: 'LIST', conv: multiplesList, dflt: '0.8,1,1.5,2,3', help: 'with --overload: the ladder, multiples of the capacity' },
  step: { type: 'string', value: 'S', conv: positiveNum, dflt: '20', help: 'with --overload: seconds per step (its first quarter is left out of its figures)' },
  recovery: { type: 'string', value: 'S', conv: positiveNum, dflt: '10', help: 'with --overload: seconds at 0.5× after the highest step' },
  capacity: { type: 'string', value: 'R|paced', conv: capacityArg, help: 'with --overload: the capacity in req/s (default: measured, the median of 3 saturation runs of --duration on the kit\'s stack); paced: then the highest paced rate the kit\'s stack serves, probed upward from 0.7x that in steps of 0.05x (--duration each), every request 2xx and p99 within --latency-budget' },
  'max-connections': { type: 'string', value: 'N', conv: positiveInt, dflt: '2000', help: 'with --overload: the most connections the open-loop generator opens (within its open-files limit)' },
  protect: { type: 'string', value: 'MODE', conv: oneOf(PROTECT_MODES), dflt: 'both', help: 'with --overload: the protected stack\'s protection, derived from --latency-budget and the capacity: both (max_conns and the runner\'s queue budget), bound (max_conns alone), budget (the queue budget alone) or queue (both, and the queue each worker holds, which turns a short budget on under a sustained overload: tunekit_app_sustained_after_s)' },
  'latency-budget': { type: 'string', value: 'MS', conv: positiveInt, dflt: String(DEFAULT_LATENCY_BUDGET_MS), help: 'with --overload: the protected stack\'s tunekit_latency_budget_ms (its bound: a quarter of the budget\'s worth, capacity x MS/1000 / 4; its queue budget: MS)' },
  'own-core': { type: 'boolean', help: 'the load generator alone on CPU 0, every stack on the other CPUs (taskset): with --overload, past capacity the generator\'s own CPU does not come out of the server\'s (the capacity is measured the same way); in the A/B rounds, the generator and the server no longer take turns on the same cores (2 or more CPUs)' },
  burst: { type: 'boolean', help: `with --overload: a burst instead of the ladder: 0.5× for --step, ${BURST_MULTIPLE}× for ${BURST_S} s, 0.5× for --recovery, one run per stack` },
  http2: { type: 'boolean', help: 'with --https: an HTTP/2 run too (h2load)' },
  json: { ...COMMON.json, dflt: 'loadtest/results/bench.json' },
  md: { ...COMMON.md, dflt: 'loadtest/results/bench.md' },
  html: { ...COMMON.html, dflt: 'loadtest/results/bench.html' },
};

// What each command does and two examples; the options are the tables above.
const ABOUT = {
  loadtest: {
    about: 'Start the local stack (rendered nginx in front of the Node cluster, on 127.0.0.1), or target an existing ' +
      'deployment with --url / --socket; drive it through nginx for --duration seconds; print a table of req/s, ' +
      'latency percentiles (every response timed), errors by kind and server CPU per request; write --json/--md/--html; ' +
      'stop everything.',
    examples: [
      'tunekit loadtest --app ./app.js --upstream uds --duration 10',
      'tunekit loadtest --profile stock --rate 2000 --json /tmp/loadtest.json',
    ],
  },
  bench: {
    about: 'Stock vs the kit\'s TCP vs the kit\'s UDS upstream, with the nginx-static and direct ceilings, and what the ' +
      'runner costs (uds against metrics-off and against a bare node:cluster, with targets), in A/B ' +
      'rounds whose order rotates; medians with min–max, and per-round ratios with their 95% interval, which the verdicts ' +
      'follow. Writes JSON, Markdown and HTML reports. ' +
      'Minutes of load on every core: run it on a quiet machine.',
    examples: [
      'tunekit bench --rounds 3 --duration 8',
      'tunekit bench --app ./app.js --scenarios stock,uds --rounds 2',
      'tunekit bench --scenarios uds --try tune.yml --rounds 3',
      'tunekit bench --aa --rounds auto --width 3',
    ],
  },
};

/** The --help text of `tunekit CMD` from its table (lib/command.js's format). */
function commandOf(cmd, spec) {
  const options = {};
  for (const [k, s] of Object.entries(spec)) {
    options[k] = { ...s, default: s.dflt, ...(s.conv && s.conv.choices && { choices: s.conv.choices }) };
  }
  return { name: cmd, usage: ['[options]'], options, ...ABOUT[cmd] };
}

function parse(cmd, spec, argv) {
  const options = { help: { type: 'boolean', short: 'h' } };
  for (const [k, s] of Object.entries(spec)) {
    options[k] = { type: s.type };
    if (s.multiple) options[k].multiple = true;
  }
  const { values } = parseCommandLine({ args: argv, options, allowPositionals: false, strict: true }, `tunekit ${cmd} --help`);
  if (values.help) return { help: command.helpText(commandOf(cmd, spec)) };
  const out = {};
  for (const [k, s] of Object.entries(spec)) {
    const v = values[k] !== undefined ? values[k] : s.dflt;
    const key = k.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    // Defaults are the kit's own (loadtest/results/ is created on write).
    const given = values[k] !== undefined;
    out[key] = v !== undefined && s.conv && (given || s.conv !== reportFile) ? s.conv(k, v) : v;
  }
  // Without --upstream: the vars files' kind (a `tune` result sets it), else TCP for the
  // stock baseline and the UDS upstream for every other profile.
  if (spec === LOADTEST && !out.upstream) out.upstream = stackShape({ profile: out.profile, varsFiles: out.vars || [] }).kind;
  return out;
}

module.exports = { parse, commandOf, LOADTEST, BENCH };
