'use strict';
// Command-line options of `tunekit loadtest` and `tunekit bench`: one table
// each (name, type, default, help) that parses argv and prints --help.

const { parseCommandLine, outputFile } = require('../lib/args');
const { UsageError } = require('../lib/errors');
const { choices } = require('../lib/config');
const { cores } = require('./cpu');
const { available: wrkAvailable } = require('./wrk');
const { DEFAULT_SCENARIOS } = require('./bench');

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
const nonNegNum = (name, v) => {
  const n = Number(v);
  if (!(n >= 0)) throw new UsageError(`--${name} must be a number >= 0 (got "${v}")`);
  return n;
};
// A report path: its directory must exist (nothing is created at a mistyped path).
const reportFile = outputFile;
const oneOf = (choices) => (name, v) => {
  if (!choices.includes(v)) throw new UsageError(`--${name} must be one of ${choices.join(', ')} (got "${v}")`);
  return v;
};

const COMMON = {
  duration: { type: 'string', conv: positiveNum, help: 'seconds per run' },
  connections: { type: 'string', conv: positiveInt, dflt: '50', help: 'concurrent connections' },
  driver: { type: 'string', conv: oneOf(['autocannon', 'wrk']), help: 'load generator for saturation runs' },
  procs: { type: 'string', conv: positiveInt, dflt: String(Math.min(2, cores())), help: 'autocannon generator processes (one saturates near 36k req/s)' },
  workers: { type: 'string', conv: positiveInt, dflt: '2', help: 'app cluster workers of the local stack' },
  set: { type: 'string', multiple: true, dflt: [], help: 'key=value override of a tunable (repeatable)' },
  vars: { type: 'string', multiple: true, dflt: [], help: 'YAML vars file, as ansible -e @file (repeatable)' },
  timeout: { type: 'string', conv: positiveNum, dflt: '10', help: 'per-request timeout, seconds' },
  json: { type: 'string', conv: reportFile, help: 'write the JSON report (schema: loadtest/README.md)' },
  md: { type: 'string', conv: reportFile, help: 'write a Markdown report' },
  html: { type: 'string', conv: reportFile, help: 'write a self-contained HTML report with charts' },
  wide: { type: 'boolean', help: 'every column in the terminal table (the default view fits 100 columns)' },
  'no-progress': { type: 'boolean', help: 'no progress output on stderr' },
  help: { type: 'boolean', short: 'h', help: 'this help' },
};

const LOADTEST = {
  upstream: { type: 'string', conv: oneOf(choices('tunekit_upstream_kind')), help: 'upstream of the local stack (default uds; tcp with --profile stock)' },
  profile: { type: 'string', conv: oneOf(choices('tunekit_profile')), dflt: 'tuned', help: 'kit-tuned or stock nginx/Node settings' },
  ...COMMON,
  duration: { ...COMMON.duration, dflt: '10' },
  driver: { ...COMMON.driver, dflt: 'autocannon' },
  rate: { type: 'string', conv: positiveNum, help: 'paced mode: req/s, evenly spaced (shown beside autocannon -R)' },
  url: { type: 'string', help: 'drive an existing deployment (no local stack), e.g. http://10.0.0.5/' },
  socket: { type: 'string', help: 'drive an existing Unix socket (no local stack)' },
  'error-log': { type: 'string', help: 'nginx error.log to watch for an existing deployment' },
  https: { type: 'boolean', help: 'the local stack serves HTTPS (a throwaway CA the generators trust); autocannon only' },
  http2: { type: 'boolean', help: 'the local stack over HTTPS, driven over HTTP/2 by h2load (saturation; h2load does not verify the certificate)' },
  streams: { type: 'string', conv: positiveInt, dflt: '10', help: 'with --http2: concurrent streams per connection' },
};

const BENCH = {
  ...COMMON,
  duration: { ...COMMON.duration, dflt: '8' },
  driver: { ...COMMON.driver, dflt: wrkAvailable() ? 'wrk' : 'autocannon' },
  rounds: { type: 'string', conv: positiveInt, dflt: '3', help: 'A/B rounds (order rotated per round)' },
  scenarios: { type: 'string', dflt: DEFAULT_SCENARIOS.join(','), help: 'comma-separated scenarios' },
  'cpu-rate': { type: 'string', conv: nonNegNum, dflt: '5000', help: 'fixed rate (req/s) for CPU per request; 0 skips' },
  'cpu-duration': { type: 'string', conv: positiveNum, dflt: '4', help: 'seconds of each fixed-rate run' },
  warmup: { type: 'string', conv: nonNegNum, dflt: '2', help: 'seconds of unrecorded warm-up per scenario' },
  https: { type: 'boolean', help: 'the TLS bench: plain vs tls-stock vs tls-tuned, new/returning/keep-alive clients, gzip (reports bench-tls.*)' },
  http2: { type: 'boolean', help: 'with --https: an HTTP/2 run too (h2load)' },
  json: { ...COMMON.json, dflt: 'loadtest/results/bench.json' },
  md: { ...COMMON.md, dflt: 'loadtest/results/bench.md' },
  html: { ...COMMON.html, dflt: 'loadtest/results/bench.html' },
};

function helpText(cmd, spec) {
  const rows = Object.entries(spec).map(([k, s]) => {
    const flag = `--${k}${s.type === 'string' ? ' X' : ''}`;
    const d = s.dflt !== undefined && !(Array.isArray(s.dflt) && !s.dflt.length) ? ` (default ${s.dflt})` : '';
    return `  ${flag.padEnd(20)} ${s.help}${d}`;
  });
  return `usage: tunekit ${cmd} [options]\n\n${rows.join('\n')}`;
}

function parse(cmd, spec, argv) {
  const options = {};
  for (const [k, s] of Object.entries(spec)) {
    options[k] = { type: s.type };
    if (s.multiple) options[k].multiple = true;
    if (s.short) options[k].short = s.short;
  }
  const { values } = parseCommandLine({ args: argv, options, allowPositionals: false, strict: true }, `tunekit ${cmd} --help`);
  if (values.help) return { help: helpText(cmd, spec) };
  const out = {};
  for (const [k, s] of Object.entries(spec)) {
    const v = values[k] !== undefined ? values[k] : s.dflt;
    const key = k.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    // Defaults are the kit's own (loadtest/results/ is created on write).
    const given = values[k] !== undefined;
    out[key] = v !== undefined && s.conv && (given || s.conv !== reportFile) ? s.conv(k, v) : v;
  }
  // The stock baseline proxies to TCP; every other profile defaults to the UDS upstream.
  if (spec === LOADTEST && !out.upstream) out.upstream = out.profile === 'stock' ? 'tcp' : 'uds';
  return out;
}

module.exports = { parse, helpText, LOADTEST, BENCH };
