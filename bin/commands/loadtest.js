'use strict';
// `tunekit loadtest`: bring up the local stack for one upstream (or target an
// existing deployment with --url / --socket), drive it through nginx, print a
// result table, write --json/--md/--html, tear everything down.
// The harness lives in loadtest/ (see loadtest/README.md).

const { UsageError, missingPackages, notInstalled } = require('../../lib/errors');
const options = require('../load-options');
const command = require('../../lib/command');

// The harness needs these npm packages; a fresh clone without `npm ci` gets
// one clear line instead of a stack trace.
function requirePackages() {
  const missing = notInstalled(['autocannon', 'hdr-histogram-js']);
  if (missing.length) throw missingPackages(missing);
}

// Print the table, write the files, and turn "nothing answered" into exit 1.
function finish(doc, o, text) {
  const report = require('../../loadtest/report');
  console.log(text);
  for (const f of report.writeAll(doc, o)) console.error(`wrote ${f}`);
  const failed = report.failedScenarios(doc);
  if (failed.length) {
    const { kindsText } = require('../../loadtest/format');
    const { mergeKinds } = require('../../loadtest/autocannon');
    const why = failed.map((name) => {
      const kinds = kindsText(mergeKinds(doc.results.filter((r) => r.scenario === name).map((r) => r.requests.kinds)));
      return kinds ? `${name} (${kinds})` : name;
    });
    console.error(`tunekit: no successful response from ${why.join(', ')}; see the errors and warnings above`);
    return 1;
  }
  const stalled = doc.results.filter((r) => r.stalled);
  if (stalled.length) {
    const { kindsText } = require('../../loadtest/format');
    const why = stalled.map((r) => `${r.scenario} answered nothing after ${r.stalled.lastResponseS.toFixed(1)} s (${kindsText(r.requests.kinds)})`);
    console.error(`tunekit: the target stopped answering mid-run: ${why.join(', ')}; the run stopped early. Check that it is still up (its logs, tunekit doctor)`);
    return 1;
  }
  return 0;
}

// The options table is shared with the other load command (bin/load-options.js).
const COMMAND = options.commandOf('loadtest', options.LOADTEST);

function parse(argv) {
  return options.parse('loadtest', options.LOADTEST, argv);
}

async function main(argv) {
  requirePackages();
  const o = parse(argv);
  if (command.printedHelp(COMMAND, o)) return 0;
  if (o.url && !/^https?:\/\//.test(o.url)) throw new UsageError(`--url must start with http:// (got "${o.url}")`);
  if (o.app && (o.url || o.socket)) throw new UsageError('--app puts your app behind the local stack; --url and --socket drive a deployment that already serves it: use one or the other');
  if (o.http2 && (o.url || o.socket || o.rate || o.driver === 'wrk')) {
    throw new UsageError('--http2 drives the local stack\'s HTTPS front with h2load, in saturation; drop --url, --socket, --rate and --driver wrk');
  }
  if (o.http2) {
    o.https = true;
    o.driver = 'h2load';
  }
  if (o.https && (o.url || o.socket)) {
    throw new UsageError('--https starts the local stack on HTTPS; for a deployment give an https:// --url');
  }
  if (o.https && (o.driver === 'wrk' || o.rate)) {
    throw new UsageError('--https runs with the autocannon driver, in saturation (it trusts the throwaway CA); drop --driver wrk and --rate');
  }
  if (o.errorLog && !o.url && !o.socket) {
    throw new UsageError('--error-log watches the error log of a deployment given with --url or --socket; the local stack watches its own');
  }
  if (o.socket && o.driver === 'wrk') throw new UsageError('wrk cannot connect to a Unix socket; drop --driver wrk or use --url');
  // Refuse a wrong-typed --set/--vars value before anything starts.
  require('../../lib/config').resolve({ varsFiles: o.vars, set: o.set, check: false });
  const { runLoadtest } = require('../../loadtest/one-stack');
  const { createProgress } = require('../../loadtest/progress');
  const report = require('../../loadtest/report');
  const { loadtestText } = require('../../loadtest/table');
  o.progress = createProgress({ enabled: !o.noProgress });
  o.varsFiles = o.vars;
  o.timeoutS = o.timeout;
  const { results, stack } = await runLoadtest(o);
  const doc = report.document('loadtest', {
    command: `tunekit loadtest ${argv.join(' ')}`.trim(),
    options: {
      upstream: o.url || o.socket ? null : o.upstream, profile: o.url || o.socket ? null : o.profile,
      url: o.url || null, socket: o.socket || null, duration: o.duration, connections: o.connections,
      rate: o.rate || null, driver: o.driver, procs: o.procs, workers: o.workers, http2: Boolean(o.http2), streams: o.http2 ? o.streams : null,
    },
    stack,
    results,
  });
  return finish(doc, o, loadtestText(doc, { wide: o.wide }));
}

module.exports = { main, parse, COMMAND, requirePackages, finish };
