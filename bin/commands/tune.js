'use strict';
// `tunekit tune`: find the values that serve this app best on this host, by
// measurement, and prove them. Starts the app behind the kit's local stack (one stack
// per candidate, loopback only), varies the values that matter one at a time, measured
// interleaved with the current best (loadtest/tune.js), confirms the winner against
// the start values, and writes a vars file and a report. Bad input is one line, exit
// 2, nothing written. docs/tuning.md says how and why.

const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const command = require('../../lib/command');
const { outputFile, inputFile, isDirectory } = require('../../lib/args');
const { requirePackages } = require('./loadtest');
const { SPACE, variedFor } = require('../../loadtest/tune');
const wrk = require('../../loadtest/wrk');

const SPACE_NAMES = SPACE.map((d) => d.name);

const COMMAND = {
  name: 'tune',
  usage: ['[options]'],
  about: 'Find the values that serve your app best on this host: app workers, the cluster strategy and upstream kind, ' +
    'nginx\'s upstream keep-alive pool, worker_processes, worker_connections and gzip level. Each candidate passes the ' +
    'kit\'s own rules and holds the load (worker_connections enough for --connections on one nginx worker), ' +
    'runs as a local stack (nginx + the cluster on 127.0.0.1) and is measured in rounds interleaved with the current ' +
    'best; rounds with too much other load on the machine are rejected. The winner is measured again ' +
    'against the start values and recommended only if it beats them in every confirmation round beyond the spread; ' +
    'otherwise the answer is "keep what you have". Writes a vars file (for render --vars and site.yml) and a report.\n\n' +
    'Minutes of load on every core: run it on a quiet machine, or a staging host, never a host in service.',
  options: {
    app: { type: 'string', value: 'PATH', help: 'your app, as `tunekit run PATH` takes it (default: the example app)' },
    objective: { type: 'string', value: 'NAME', choices: ['rps', 'cpu'], default: 'rps', help: 'rps: most requests per second (with --p99 under a bound); cpu: least server CPU per request at --rate' },
    p99: { type: 'string', value: 'BOUND', help: 'with rps: p99 latency bound, e.g. 10ms or 800us; a candidate above it loses' },
    rate: { type: 'string', value: 'R', help: 'with cpu: the paced rate, req/s (required)' },
    paths: { type: 'string', value: 'FILE', help: 'the request mix: one path per line (a path twice is sent twice as often); rps only' },
    'access-log': { type: 'string', value: 'FILE', help: 'the request mix from an access log (nginx combined format: its GET request lines); rps only' },
    gzip: { type: 'boolean', help: 'the load asks for compression (Accept-Encoding: gzip, as browsers do), and the gzip level is varied; ' +
      'without it nginx compresses nothing for the load, so the level is not varied; rps only' },
    budget: { type: 'string', value: 'DURATION', default: '5m', help: 'the whole run, search and confirmation, e.g. 90s, 10m, 1h' },
    duration: { type: 'string', value: 'S', default: '5', help: 'seconds of each measured run' },
    rounds: { type: 'string', value: 'N', default: '4', help: 'at most this many counted rounds per step (at least 2; more only while the answer is unclear)' },
    'confirm-rounds': { type: 'string', value: 'N', default: '3', help: 'counted rounds of the winner against the start values' },
    'other-load': { type: 'string', value: 'SHARE', default: '0.25', help: 'reject a round when other processes kept more than this share of the cores busy (the harness\'s warning level)' },
    connections: { type: 'string', value: 'N', default: '50', help: 'concurrent client connections; no candidate has worker_connections too few to hold them on one nginx worker' },
    driver: { type: 'string', value: 'NAME', choices: ['wrk', 'autocannon'], default: wrk.available() ? 'wrk' : 'autocannon',
      help: 'the load generator of the rps objective, as bench\'s; wrk leaves the server more of a small host\'s CPU (docs/tuning.md)' },
    vary: { type: 'string', value: 'LIST', help: `the variables to vary, comma-separated (default: all of ${SPACE_NAMES.join(', ')})` },
    from: { type: 'string', value: 'FILE.yml', help: 'start values: a vars file over the kit\'s definition (default: the kit\'s defaults)' },
    out: { type: 'string', value: 'FILE.yml', default: 'tune.yml', help: 'the vars file written (the recommendation, or the start values with "keep what you have")' },
    report: { type: 'string', value: 'DIR', default: '.', help: 'where tune-report.json, .md and .html are written' },
    'no-progress': { type: 'boolean', help: 'no progress lines on stderr' },
  },
  examples: [
    'tunekit tune --objective rps --p99 10ms --budget 10m --out /tmp/tuned.yml',
    'tunekit tune --app ./app.js --objective cpu --rate 2000 --from ansible/profiles/small.yml --budget 15m',
  ],
  notes: 'Apply the result: tunekit render --out DIR --vars tune.yml, or ansible-playbook ... -e @tune.yml. How it works: docs/tuning.md.',
};

const parse = (argv) => command.parse(COMMAND, argv).values;

/** "90s", "10m", "1h", "1m30s" or plain seconds -> seconds. */
function durationS(text) {
  const s = String(text).trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s);
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(s);
  if (!s || !m) throw new UsageError(`--budget ${text}: not a duration; write e.g. 90s, 10m, 1h or 1m30s`);
  return (Number(m[1] || 0) * 3600) + (Number(m[2] || 0) * 60) + Number(m[3] || 0);
}

/** "10ms", "800us", "0.5ms", "1s" -> µs. */
function latencyUs(text) {
  const m = /^(\d+(?:\.\d+)?)(us|µs|ms|s)$/.exec(String(text).trim());
  if (!m || !(Number(m[1]) > 0)) throw new UsageError(`--p99 ${text}: not a latency bound; write e.g. 10ms or 800us`);
  return Number(m[1]) * { us: 1, µs: 1, ms: 1000, s: 1e6 }[m[2]];
}

function number(name, text, { min, whole = false }) {
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || (whole && !Number.isInteger(n))) {
    throw new UsageError(`--${name} must be ${whole ? 'a whole number' : 'a number'} >= ${min} (got "${text}")`);
  }
  return n;
}

function varyList(text) {
  const names = text.split(',').map((x) => x.trim()).filter(Boolean);
  const unknown = names.filter((n) => !SPACE_NAMES.includes(n));
  if (!names.length || unknown.length) {
    throw new UsageError(`--vary ${text}: ${unknown.length ? `${unknown.join(', ')} is not one the tuner varies` : 'empty'}; choose from ${SPACE_NAMES.join(', ')}`);
  }
  return names;
}

// The options as the engine takes them, every rule between them checked; nothing started yet.
function options(v) {
  const objective = v.objective;
  if (objective === 'cpu' && v.p99 !== undefined) throw new UsageError('--p99 bounds the rps objective; with --objective cpu give --rate R');
  if (objective === 'cpu' && v.rate === undefined) throw new UsageError('--objective cpu needs --rate R: the paced rate at which CPU per request is measured');
  if (objective === 'rps' && v.rate !== undefined) throw new UsageError('--rate is for --objective cpu; with rps the load is at saturation (bound it with --p99)');
  if (v.paths !== undefined && v['access-log'] !== undefined) throw new UsageError('give the request mix once: --paths or --access-log, not both');
  const mix = v.paths !== undefined ? 'paths' : v['access-log'] !== undefined ? 'access-log' : null;
  if (mix && objective === 'cpu') throw new UsageError(`--${mix} with --objective cpu: the pacer sends one path; use --objective rps for a request mix`);
  if (v.gzip && objective === 'cpu') throw new UsageError('--gzip with --objective cpu: the pacer sends one fixed request without Accept-Encoding; use --objective rps to measure gzip');
  if (v.driver === 'wrk' && !wrk.available()) throw new UsageError(`--driver wrk: no wrk at ${wrk.WRK}; install it (apt-get install -y wrk) or give --driver autocannon`);
  const vary = variedFor(v.vary === undefined ? null : varyList(v.vary), v.gzip);
  if (!isDirectory(v.report)) throw new UsageError(`--report ${v.report}: not a directory; create it first or choose another`);
  const o = {
    app: v.app === undefined ? null : path.resolve(inputFile('app', v.app)),
    objective,
    p99Us: v.p99 === undefined ? null : latencyUs(v.p99),
    rate: v.rate === undefined ? null : number('rate', v.rate, { min: 1 }),
    budgetS: durationS(v.budget),
    durationS: number('duration', v.duration, { min: 1 }),
    maxRounds: number('rounds', v.rounds, { min: 2, whole: true }),
    confirmRounds: number('confirm-rounds', v['confirm-rounds'], { min: 1, whole: true }),
    otherLoad: number('other-load', v['other-load'], { min: 0 }),
    connections: number('connections', v.connections, { min: 1, whole: true }),
    from: v.from === undefined ? null : inputFile('from', v.from),
    out: outputFile('out', v.out),
    report: v.report,
    mix,
    vary,
    gzip: Boolean(v.gzip),
    driver: objective === 'rps' ? v.driver : 'pacer',
  };
  o.minRounds = 2;
  if (mix) o.paths = require('../../loadtest/tune-run').readPaths(v[mix], mix);
  o.objectiveText = objective === 'rps'
    ? `most req/s${o.p99Us != null ? ` with p99 <= ${v.p99}` : ''}, zero errors, ${o.connections} connections of ${o.driver}${o.gzip ? ' asking for gzip' : ''}, ${o.durationS} s runs`
    : `least server CPU per request at ${o.rate} req/s (paced), zero errors, ${o.durationS} s runs`;
  return o;
}

// The budget must hold one round of the search and the confirmation.
function checkBudget(o) {
  const { minimumBudgetS } = require('../../loadtest/tune');
  const need = minimumBudgetS(o);
  if (o.budgetS < need) {
    throw new UsageError(`--budget ${o.budgetS} s is too small for the first step of the search and its ${o.confirmRounds} confirmation rounds ` +
      `(about ${need} s with --duration ${o.durationS}); give --budget ${Math.ceil(need / 60)}m or more, or a shorter --duration`);
  }
}

async function main(argv) {
  const v = parse(argv);
  if (command.printedHelp(COMMAND, v)) return 0;
  requirePackages();
  const o = options(v);
  checkBudget(o);
  const { cores } = require('../../loadtest/cpu');
  const { startValues } = require('../../loadtest/tune-run');
  // The start values must pass the kit's rules before anything starts.
  startValues(o.from);
  o.cores = cores();
  o.procs = Math.min(2, o.cores);
  const { createProgress } = require('../../loadtest/progress');
  o.progress = createProgress({ enabled: !v['no-progress'] });
  return run(argv, o);
}

async function run(argv, o) {
  const { runTune } = require('../../loadtest/tune-run');
  const R = require('../../loadtest/tune-report');
  const report = require('../../loadtest/report');
  const tune = await runTune(o);
  if (!tune.trials.length) {
    throw new UsageError(`--budget ${o.budgetS} s ran out before the first round was measured (a stack took ` +
      `${Math.round(tune.openS)} s to start here); give a larger --budget`);
  }
  if (tune.unmet) {
    throw new UsageError(o.objective === 'rps'
      ? `no candidate met the objective in any run (p99 <= ${o.p99Us} µs with zero errors; the lowest p99 measured was ` +
        `${Math.round(Math.min(...tune.trials.map((t) => t.p99Us).filter(Number.isFinite)))} µs); raise --p99, or fix the errors the report of a loadtest shows`
      : `no candidate reached ${o.rate} req/s with zero errors in any run; lower --rate`);
  }
  // The options as the report shows them (not the progress bar, not every path of the mix).
  const shown = Object.fromEntries(Object.entries(o).filter(([k]) => !['progress', 'paths', 'start', 't0'].includes(k)));
  const doc = report.document('tune', {
    command: `tunekit tune ${argv.join(' ')}`.trim(),
    options: { ...shown, paths: o.paths ? o.paths.length : null, wallSeconds: Math.round(tune.elapsedS) },
    results: [],
  });
  doc.tune = tune;
  report.writeFile(o.out, R.varsText(doc));
  const files = [o.out];
  for (const [ext, text] of [['json', `${JSON.stringify(doc, null, 2)}\n`], ['md', R.toMarkdown(doc)], ['html', R.toHtml(doc)]]) {
    const file = path.join(o.report, `tune-report.${ext}`);
    report.writeFile(file, text);
    files.push(file);
  }
  for (const l of R.verdictLines(doc)) console.log(l);
  for (const f of files) console.error(`wrote ${f}`);
  return 0;
}

module.exports = { main, parse, COMMAND, durationS, latencyUs, options };
