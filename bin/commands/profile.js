'use strict';
// tunekit profile --demo [--duration S] [--connections N] [--profile stock|tuned] [--app PATH]
// tunekit profile --pid PID ... | --unit NAME ... [--duration S]
//
// Where the time goes in a live stack: syscalls per process group, perf
// samples with JavaScript frames, accept queues, a flame graph and a verdict
// (profile/). Every tracer stops by itself after --duration seconds.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const { wholeNumber, outputFile, inputFile } = require('../../lib/args');
const command = require('../../lib/command');
const { choices } = require('../../lib/config');
const { startStack, stackFiles } = require('../../lib/stack');
const doctor = require('../../lib/doctor');
const { measure } = require('../../loadtest/measure');
const { nginxTarget } = require('../../loadtest/targets');
const { document, writeFile } = require('../../loadtest/report');
const { profile, requireTools } = require('../../profile/run');
const { groupsOf, deployedPids } = require('../../profile/target');
const { readSettingsFile } = require('../../app/settings');
const { decide } = require('../../profile/verdict');
const { renderSvg } = require('../../profile/flame');
const { lines, toMarkdown, toHtml } = require('../../profile/report');

const COMMAND = {
  name: 'profile',
  usage: ['--demo [options]', '--pid PID | --unit NAME [options]', '--app-config FILE [--nginx-conf FILE] [options]'],
  about: 'Profile a live stack for --duration seconds per phase: req/s without a tracer, then perf record ' +
    '(cpu-clock, call stacks; JavaScript frames named through the workers\' perf map), then perf trace -s, then ' +
    'strace -c -f -w. Prints the syscalls per request of nginx\'s and the app\'s workers, each tracer\'s slowdown, ' +
    'the top symbols, the accept queues and a verdict with its advice: queue-bound, proxy-bound, generator-bound ' +
    '(--demo: the load generator, not the server, was the limit), app-bound, transport-bound or undetermined ' +
    '(the rule: profile/verdict.js). The flame graph of nginx\'s and the app\'s workers is written to an ' +
    'SVG file whose name it prints.\n\n' +
    '--demo starts the kit\'s stack as `tunekit demo` does (workers with the perf map on), drives it through nginx ' +
    'on 127.0.0.1 and stops it. --pid / --unit attach to a running service of the kit\'s (the runner or an app ' +
    'worker, or an nginx master whose config tunekit rendered; anything else is refused); --app-config finds a ' +
    'deployed stack as doctor reads it: the runner listening on that app.json\'s socket and the nginx of ' +
    '--nginx-conf (its pid file). No load is sent to a running service, so its figures are per second.',
  options: {
    demo: { type: 'boolean', help: 'start, load, profile and stop the local stack' },
    pid: { type: 'string', value: 'PID', multiple: true, help: 'a running runner, app worker or nginx master' },
    unit: { type: 'string', value: 'NAME', multiple: true, help: 'a systemd unit whose main process is one of those' },
    'app-config': { type: 'string', value: 'FILE', help: 'a deployed app.json (e.g. /etc/tunekit-app/app.json): its runner, and' },
    'nginx-conf': { type: 'string', value: 'FILE', help: 'the nginx of this config (default: /etc/nginx/nginx.conf; skipped if not the kit\'s)' },
    duration: { type: 'string', value: 'S', default: '3', help: 'seconds per phase, 1 to 60' },
    connections: { type: 'string', value: 'N', default: '50', help: '--demo: concurrent client connections, 1 to 1000' },
    upstream: { type: 'string', value: 'KIND', choices: choices('tunekit_upstream_kind'), help: '--demo: how nginx reaches the app; without it uds, or tcp for stock' },
    profile: { type: 'string', value: 'NAME', choices: choices('tunekit_profile'), default: 'tuned', help: '--demo: the kit\'s settings or stock nginx/Node' },
    workers: { type: 'string', value: 'N', default: '2', help: '--demo: app workers' },
    app: { type: 'string', value: 'PATH', help: '--demo: your app, as `tunekit run PATH` takes it (relative to the current directory; default: the example app)' },
    svg: { type: 'string', value: 'FILE', help: 'where to write the flame graph (SVG; default tunekit-profile-DATE-TIME.svg here)' },
    'no-svg': { type: 'boolean', help: 'do not write the flame graph file' },
    json: { type: 'string', value: 'FILE', help: 'write the result as JSON' },
    md: { type: 'string', value: 'FILE', help: 'write a Markdown report' },
    html: { type: 'string', value: 'FILE', help: 'write an HTML report with the flame graph embedded' },
  },
  examples: [
    'tunekit profile --demo --app ./app.js --duration 5 --svg /tmp/flame.svg',
    'tunekit profile --unit tunekit-app --duration 10 --html /tmp/profile.html',
  ],
  notes: 'Needs root (or perf_event_paranoid <= 1 and ptrace rights), perf (apt-get install -y linux-perf) ' +
    'and strace (apt-get install -y strace).',
};

// tunekit-profile-20261125-001500.svg: the flame graph's default name, in the current directory.
function defaultSvgName(date) {
  const t = date.toISOString().replace(/\.\d+Z$/, '').replace(/[-:]/g, '').replace('T', '-');
  return `tunekit-profile-${t}.svg`;
}

const parse = (argv) => command.parse(COMMAND, argv).values;

// The listeners of a demo stack as ss prints them: nginx's port, the app's socket(s) or port.
function watchList(stack) {
  const app = stack.appListen.startsWith('tcp:') ? [stack.appListen.slice(4)] : stack.sockets;
  return [`127.0.0.1:${stack.port}`, ...app];
}

function doctorLines(stack) {
  try {
    const facts = doctor.gather({ nginxConf: stackFiles(stack.renderDir).nginxConf, appConfig: stack.vars.tunekit_app_config_path, socket: stack.socketPath });
    return facts;
  } catch (err) {
    return Promise.resolve({ errors: [err.message] });
  }
}

async function profileDemo(opts, common) {
  const connections = wholeNumber('connections', opts.connections, 1, 1000);
  const stack = await startStack({
    upstream: opts.upstream || null,
    profile: opts.profile,
    workers: wholeNumber('workers', opts.workers, 1, Math.max(64, os.availableParallelism())),
    module: opts.app || null,
    set: ['tunekit_app_perf_map=true'],
  });
  const appPids = stack.pids().app;
  const interrupted = () => stack.stop().finally(() => process.exit(130));
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const p = stack.pids();
    // The app group holds the primary too: with the round-robin strategy (Node's
    // default, the stock profile's) it is the primary that accepts connections.
    const groups = { nginx: p.nginx.slice(1), app: [p.app[0], ...(stack.ready.workers || p.app.slice(1))] };
    console.log(`tunekit profile: stack at ${stack.url} (${stack.profile}, upstream ${stack.upstream}), nginx workers ${groups.nginx.join(' ')}, app primary and workers ${groups.app.join(' ')}`);
    const target = nginxTarget('profile', stack);
    const load = async (phase) => {
      console.log(`  ${phase}: ${connections} connections for ${common.duration} s ...`);
      const r = await measure(target, { mode: 'saturation', driver: 'autocannon', procs: 1, connections, duration: common.duration, timeoutS: 10 });
      return {
        reqPerSec: r.reqPerSec,
        requests: r.requests.completed,
        errors: r.requests.errors + r.requests.timeouts + r.requests.non2xx,
        // The generator's busiest process, in cores (the verdict compares it with the server's workers).
        generatorCore: Math.max(...r.generator.perProcessCpuShare),
        // Cores other processes kept busy meanwhile (other tenants of a shared machine).
        machine: { cores: r.machine.cores, otherCores: r.machine.otherCores },
      };
    };
    const result = await profile({ groups, duration: common.duration, load, watch: watchList(stack), dir: common.dir });
    const facts = await doctorLines(stack);
    result.doctor = doctor.analyze(facts).filter((f) => f.level === 'warn' || f.level === 'fail').map((f) => `${f.level} ${f.what}`);
    return { result, stack: { url: stack.url, profile: stack.profile, upstream: stack.upstream, socket: stack.socketPath } };
  } finally {
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
    await stack.stop();
    // The workers' perf maps outlive them (V8 never removes its map file).
    for (const pid of appPids) fs.rmSync(path.join(os.tmpdir(), `perf-${pid}.map`), { force: true });
  }
}

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  if (opts['nginx-conf'] && !opts['app-config']) throw new UsageError('--nginx-conf goes with --app-config; see tunekit profile --help');
  if (opts.app && !opts.demo) throw new UsageError('--app goes with --demo (a running service already serves its app); see tunekit profile --help');
  const live = opts.pid.length + opts.unit.length + (opts['app-config'] ? 1 : 0);
  if (opts.svg && opts['no-svg']) throw new UsageError('--svg names the flame graph file, --no-svg skips it: give one of them; see tunekit profile --help');
  if (opts.demo === Boolean(live)) throw new UsageError('give either --demo, or --pid/--unit/--app-config; see tunekit profile --help');
  for (const name of ['app-config', 'nginx-conf']) if (opts[name]) inputFile(name, opts[name]);
  const duration = wholeNumber('duration', opts.duration, 1, 60);
  if (opts.app) inputFile('app', opts.app);
  for (const name of ['svg', 'json', 'md', 'html']) if (opts[name]) outputFile(name, opts[name]);
  requireTools();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-profile-'));
  try {
    let run;
    if (opts.demo) {
      run = await profileDemo(opts, { duration, dir });
    } else {
      const pids = opts.pid.map((x) => wholeNumber('pid', x, 1, 2 ** 22));
      if (opts['app-config']) {
        // The app's own socket, from its app.json (nginx's upstreams may name others).
        const { endpoint } = readSettingsFile(opts['app-config']);
        const facts = await doctor.gather({
          appConfig: opts['app-config'], nginxConf: opts['nginx-conf'], socket: endpoint.kind === 'unix' ? endpoint.path : null,
        });
        const found = deployedPids(facts, { endpoint, nginxExplicit: Boolean(opts['nginx-conf']) });
        for (const n of found.notes) console.log(`tunekit profile: ${n}`);
        pids.push(...found.pids);
      }
      const groups = groupsOf({ pids, units: opts.unit });
      console.log(`tunekit profile: nginx workers ${groups.nginx.join(' ') || 'none'}, app workers ${groups.app.join(' ') || 'none'} (no load sent: figures per second)`);
      const result = await profile({ groups, duration, dir });
      result.doctor = [];
      run = { result, stack: { pids: groups.found.map((f) => `${f.kind} ${f.main}`) } };
    }
    const r = run.result;
    r.verdict = decide({
      queues: r.queues, tcpDelta: r.tcpDelta, coreShare: r.coreShare, appShares: r.folded.app ? r.shares.app : null, appTop: r.top.app,
      generatorCore: r.phases.baseline ? r.phases.baseline.generatorCore : null,
      machine: r.phases.baseline ? r.phases.baseline.machine : null,
    });
    const all = new Map([...r.stacks.app, ...r.stacks.nginx]);
    const svg = renderSvg(all, { title: `tunekit profile: ${r.verdict.verdict}` });
    // The flame graph is written unless --no-svg: to --svg, or to a new file
    // named by the time in the current directory (one per run, none overwritten).
    const svgFile = opts['no-svg'] ? null : opts.svg || defaultSvgName(new Date());
    if (svgFile) {
      writeFile(svgFile, svg);
      r.flameGraph = svgFile;
    }
    const doc = document('profile', { command: `tunekit profile ${argv.join(' ')}`, options: { ...opts, duration }, stack: run.stack, results: r, warnings: r.warnings });
    if (opts.json) writeFile(opts.json, `${JSON.stringify(doc, null, 2)}\n`);
    if (opts.md) writeFile(opts.md, toMarkdown(doc));
    if (opts.html) writeFile(opts.html, toHtml(doc, svg));
    console.log(`\n${lines(r).join('\n')}`);
    if (svgFile) console.log(`flame graph: ${svgFile} (open it in a browser; --svg FILE names it, --no-svg skips it)`);
    else console.log('flame graph: not written (--no-svg); --html FILE embeds it in the report');
    for (const f of [opts.json, opts.md, opts.html].filter(Boolean)) console.log(`wrote ${f}`);
    return 0;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { main, parse, COMMAND, defaultSvgName };
