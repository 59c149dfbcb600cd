'use strict';
// tunekit demo [--app PATH] [--keep] [--plain] [--upstream KIND] [--duration S] [--connections N]
// tunekit demo --stop [DIR]
//
// Renders the tuned config into a temp dir, starts nginx on 127.0.0.1 (free,
// non-default ports: HTTPS with a throwaway certificate from a local CA, and
// the plain port that redirects to it; --plain serves plain HTTP only) and the
// cluster on a Unix domain socket, sends a short, bounded burst through nginx
// (autocannon, timed per response in µs by the kit's load-test harness),
// prints what happened and the curl line that trusts the CA, and stops
// everything: no process, socket or temp dir is left. --keep leaves it running,
// records where its files are (lib/kept.js), so that status, doctor, reload, logs
// and `demo --stop` find it with no flags, and prints them.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const { wholeNumber, inputFile } = require('../../lib/args');
const command = require('../../lib/command');
const { choices } = require('../../lib/config');
const { startStack, stopDir, stackFiles, STACK_PREFIX } = require('../../lib/stack');
const { alive } = require('../../lib/proc');
const kept = require('../../lib/kept');
const { measure } = require('../../loadtest/measure');
const { nginxTarget } = require('../../loadtest/targets');
const { int } = require('../../loadtest/format');

const COMMAND = {
  name: 'demo',
  usage: ['[options]', '--stop [DIR]'],
  about: 'Start nginx (127.0.0.1, free ports) in front of the Node cluster on a Unix domain socket, both rendered ' +
    'from the kit\'s templates into a temp dir. nginx serves HTTPS (TLS 1.2/1.3, HTTP/2) with a throwaway ' +
    'certificate from a local CA made for the demo; the plain port redirects to it. Send a short burst through ' +
    'nginx; print the URL, the curl line that trusts the CA, the socket, the workers that answered, req/s and ' +
    'latency; stop and remove everything.',
  options: {
    app: { type: 'string', value: 'PATH', help: 'your app, as `tunekit run PATH` takes it (relative to the current directory; default: the example app)' },
    upstream: { type: 'string', value: 'KIND', choices: choices('tunekit_upstream_kind'), default: 'uds', help: 'how nginx reaches the app' },
    workers: { type: 'string', value: 'N', default: '2', help: 'app workers' },
    duration: { type: 'string', value: 'S', default: '3', help: 'burst length in seconds, at most 60' },
    connections: { type: 'string', value: 'N', default: '20', help: 'concurrent client connections, at most 1000' },
    plain: { type: 'boolean', help: 'plain HTTP only (as behind a TLS load balancer)' },
    keep: { type: 'boolean', help: 'leave the stack running and record it, so that status, doctor, reload, logs and demo --stop find it with no flags' },
    stop: { type: 'boolean', help: 'stop a stack left running by --keep and remove its dir: DIR, else the one recorded' },
  },
  positionals: 1,
  examples: [
    'tunekit demo --app ./app.js --workers 4',
    'tunekit demo --upstream tcp --plain --keep',
    'tunekit demo --stop',
  ],
};

function parse(argv) {
  const { values, positionals } = command.parse(COMMAND, argv);
  if (positionals.length && !values.stop) throw new UsageError(`unexpected ${positionals[0]}: a DIR goes with --stop (tunekit demo --stop DIR); see tunekit demo --help`);
  return { ...values, dir: positionals[0] };
}

// The stack --stop acts on: DIR, else the one recorded (live or stale: a stale one is removed).
function stackToStop(dir) {
  if (dir !== undefined) return path.resolve(dir);
  const all = kept.records(undefined, { kind: 'demo' });
  const kit = command.invocation();
  if (all.length === 1) return all[0].dir;
  if (!all.length) throw new UsageError(`no stack kept by \`demo --keep\` is recorded (in ${kept.stateDir()}/stacks): name its dir, ${kit} demo --stop DIR`);
  throw new UsageError(`${all.length} stacks kept by \`demo --keep\` are recorded (${all.map((r) => `${r.dir}${r.live ? '' : ' (stale)'}`).join(', ')}): name one, ${kit} demo --stop DIR`);
}

async function stopCommand(dir) {
  const abs = stackToStop(dir);
  const f = stackFiles(abs);
  const run = kept.records(undefined, { kind: 'run' }).find((r) => r.dir === abs);
  if (run) throw new UsageError(`${abs} records ${kept.describe(run)}, not a stack of \`demo --keep\`: stop it with Ctrl-C where it runs, or kill -TERM ${run.appPid} (it drains and removes its record)`);
  const recorded = kept.records(undefined, { kind: 'demo' }).some((r) => r.dir === abs);
  if (!recorded && (!path.basename(abs).startsWith(STACK_PREFIX) || !(fs.existsSync(f.appPid) || fs.existsSync(f.nginxPid)))) {
    throw new UsageError(`${abs} is not a stack left by \`tunekit demo --keep\` (no record of it, no run/app.pid or run/nginx.pid in a ${STACK_PREFIX}* dir)`);
  }
  const { stopped, clean } = await stopDir(abs);
  kept.forget(abs);
  console.log(`stopped ${stopped.length} processes (${stopped.join(' ') || 'none were running'}), removed ${abs}`);
  return clean ? 0 : 1;
}

// One autocannon process, every response timed into the kit's µs histogram,
// who served counted by the runner's metrics (read before and after), with
// nginx's and the app's CPU from /proc.
function burst(stack, { duration, connections }) {
  return measure(nginxTarget('demo', stack), {
    mode: 'saturation', driver: 'autocannon', procs: 1, connections, duration, timeoutS: 10,
  });
}

// Each app worker and the requests it served, from the runner's count (any app),
// else the "pid" in the answers (the example app's); or why they were not counted.
function workersSeen(r, appWorkers) {
  const w = r.workers;
  if (!w || (w.source === 'body' && !w.sampled)) {
    const why = r.metered && r.metered.error ? `the runner's metrics endpoint ${r.metered.url} did not answer (${r.metered.error})`
      : 'the runner\'s metrics are off (tunekit_metrics: false) and the answers carry no "pid"';
    return `not counted: ${why}`;
  }
  const seen = Object.entries(w.byPid).sort((a, b) => a[0] - b[0]).map(([pid, n]) => `${pid} (${n})`);
  const by = w.source === 'runner' ? 'counted by the runner, tunekit_app_requests_total' : 'counted from the "pid" in the answers';
  return `${seen.join(', ')} — ${w.served} of ${appWorkers.length} app workers answered (${by})`;
}

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  if (opts.stop) return stopCommand(opts.dir);
  if (opts.app) inputFile('app', opts.app);
  const duration = wholeNumber('duration', opts.duration, 1, 60);
  const connections = wholeNumber('connections', opts.connections, 1, 1000);
  const workers = wholeNumber('workers', opts.workers, 1, Math.max(64, os.availableParallelism()));

  console.log('tunekit demo: rendering the tuned config and starting nginx + the Node cluster ...');
  const stack = await startStack({ upstream: opts.upstream, workers, module: opts.app || null, detached: opts.keep, tls: !opts.plain });
  const curl = stack.ca ? `curl --cacert ${stack.ca} ${stack.url}` : `curl ${stack.url}`;
  // Ctrl-C during the burst: stop the stack before leaving (a signal skips
  // 'exit' handlers, and the temp dir would stay).
  const interrupted = (sig) => {
    console.error(`\ntunekit demo: ${sig}, stopping nginx and the app ...`);
    stack.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  let pidsAtStart;
  let appWorkers;
  try {
    pidsAtStart = stack.pids();
    console.log(`  url            ${stack.url}`);
    if (stack.ca) {
      console.log(`  tls            throwaway certificate from a local CA; port ${stack.port} redirects to HTTPS`);
      console.log(`  try            ${curl}`);
    }
    console.log(`  nginx          pid ${pidsAtStart.nginx[0]}, workers ${pidsAtStart.nginx.slice(1).join(' ')} (config ${path.join(stack.renderDir, 'etc/nginx/nginx.conf')})`);
    appWorkers = stack.ready.workers || pidsAtStart.app.slice(1);
    console.log(`  app            pid ${pidsAtStart.app[0]}, workers ${appWorkers.join(' ')} (listen ${stack.appListen})`);
    console.log(`  socket         ${stack.socketPath || '(none: TCP upstream)'}`);
    for (const m of stack.metrics) console.log(`  metrics        ${m.url} (${m.name}; Prometheus text format, one series set per worker)`);
    console.log(`  burst          ${connections} connections for ${duration} s through nginx (autocannon)`);

    const r = await burst(stack, { duration, connections });
    const q = r.requests;
    console.log(`  requests       ${q.completed} (${q.non2xx} non-2xx, ${q.errors} errors, ${q.timeouts} timeouts)`);
    console.log(`  req/s          ${Math.round(r.reqPerSec)}`);
    console.log(`  latency        p50 ${int(r.latencyUs.p50)} µs, p99 ${int(r.latencyUs.p99)} µs (every response timed)`);
    console.log(`  server CPU     ${r.server.cpuUsPerReq.toFixed(1)} µs per request (nginx + app, /proc)`);
    console.log(`  workers seen   ${workersSeen(r, appWorkers)}`);
    for (const w of r.warnings) console.log(`  note           ${w}`);
  } catch (err) {
    await stack.stop();
    throw err;
  } finally {
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
  }

  if (opts.keep) {
    const p = stack.pids();
    const record = kept.record(stack);
    console.log(`\nLeft running (--keep). Try: ${curl}`);
    const kit = command.invocation();
    console.log(`Recorded in ${record}: these find it with no flags (--stack ${stack.renderDir} names it):`);
    console.log(`  ${kit} status          # its workers, nginx, accept queue`);
    console.log(`  ${kit} doctor          # the cross-layer audit of it`);
    console.log(`  ${kit} reload          # a rolling restart of its workers`);
    console.log(`  ${kit} logs -n 20      # the runner's log`);
    console.log(`Stop it with:\n  ${kit} demo --stop`);
    // rm only once both are gone: the app removes its own socket when it stops.
    console.log(`or by hand:\n  kill -QUIT ${p.nginx[0]}; kill -TERM ${p.app[0]}; ` +
      `while kill -0 ${p.app[0]} 2>/dev/null || kill -0 ${p.nginx[0]} 2>/dev/null; do sleep 0.2; done; rm -rf ${stack.renderDir} ${record}`);
    return 0;
  }

  await stack.stop();
  const all = [...pidsAtStart.nginx, ...pidsAtStart.app];
  const left = all.filter(alive);
  const dirLeft = fs.existsSync(stack.renderDir);
  if (left.length || dirLeft) {
    console.error(`tunekit demo: left behind: ${left.length ? `processes ${left.join(' ')}` : ''}${dirLeft ? ` ${stack.renderDir}` : ''}`);
    return 1;
  }
  console.log(`stopped: ${all.length} processes exited (${all.join(' ')}), socket and ${stack.renderDir} removed`);
  return 0;
}

module.exports = { main, parse, COMMAND };
