'use strict';
// tunekit doctor: audit a live host across layers (see lib/doctor.js).
// Exit 0 when nothing fails, 1 when a rule fails, 2 on bad usage.

const command = require('../../lib/command');
const { appConfigOf } = require('../../lib/apphost');
const kept = require('../../lib/kept');
const doctor = require('../../lib/doctor');

const COMMAND = {
  name: 'doctor',
  usage: ['[options]'],
  about: 'Audit a live host across layers: read the live nginx config (nginx -T), kernel limits, accept queues (ss), ' +
    'process limits (/proc), the app socket and the app\'s live timeouts, and check that the layers agree. ' +
    'Each finding says what is wrong and the fix; the last lines count the kit\'s cross-layer rules evaluated live and name each one ' +
    'the host gave no value for. Exit 0 when nothing fails, 1 when a rule fails, 2 on bad usage.',
  options: {
    // The defaults are lib/doctor's: given or not, the app's socket is looked for differently.
    'nginx-conf': { type: 'string', value: 'PATH', help: `nginx's main config (default: ${doctor.DEFAULT_NGINX_CONF})` },
    'app-config': { type: 'string', value: 'PATH', help: `the runner's app.json (default: ${doctor.DEFAULT_APP_CONFIG})` },
    app: { type: 'string', value: 'NAME', help: 'with several apps on the host (tunekit_apps): the app of this name (its /etc/*/app.json), instead of --app-config' },
    socket: { type: 'string', value: 'PATH', help: 'the app socket (default: every unix: server in nginx\'s upstreams)' },
    'probe-path': { type: 'string', value: 'PATH', help: 'an app that is not the kit\'s runner (no app.json, no /healthz) is measured over its socket or loopback port: one HEAD request to PATH, then idle (default: /)' },
    stack: kept.STACK_OPTION,
    json: { type: 'boolean', help: 'print findings as JSON' },
  },
  examples: [
    'tunekit doctor',
    'tunekit doctor --app-config /etc/tunekit-app/app.json --socket /run/tunekit-app/app.sock --json',
  ],
};

const parse = (argv) => command.parse(COMMAND, argv).values;

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  opts['app-config'] = appConfigOf({ app: opts.app, appConfig: opts['app-config'] });
  const files = kept.forCommand('doctor', opts, { pointed: Boolean(opts.app || opts.socket) });
  for (const line of files.say) console.error(line);
  // A recorded `tunekit run` has no nginx of its own: its socket is the one its settings name.
  const runSocket = files.rec && files.rec.kind === 'run' && /^unix:/.test(files.rec.listen || '') ? files.rec.listen.slice(5) : null;
  const socket = opts.socket || runSocket;
  const facts = await doctor.gather({
    ...(files.nginxConf && { nginxConf: files.nginxConf }),
    ...(files.appConfig && { appConfig: files.appConfig }),
    ...(socket && { socket }),
    ...(opts['probe-path'] && { probePath: opts['probe-path'] }),
  });
  const { findings, rules } = doctor.audit(facts, undefined, { asRoot: command.asRoot(COMMAND.name, argv) });
  const sum = doctor.summarize(findings);
  if (opts.json) {
    console.log(JSON.stringify({ summary: sum, findings, rules, facts }, null, 2));
  } else {
    console.log(`read: ${facts.read.join('; ')}`);
    console.log('');
    const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };
    // The id in brackets is the one docs/troubleshooting.md cites.
    for (const f of findings) {
      console.log(`${mark[f.level]}  [${f.id}] ${f.what}`);
      if (f.fix) console.log(`      fix: ${f.fix}`);
    }
    // Every rule of the table: evaluated over this host, or named with what it would need.
    console.log(`\nrules evaluated live: ${rules.evaluated.length} of ${rules.total}`);
    for (const r of rules.notEvaluated) {
      console.log(`  not evaluated  [${r.id}] ${r.missing.map((m) => (m.variable ? `${m.variable}: ${m.why}` : m.why)).join('; ')}`);
    }
    console.log(`\n${sum.ok} ok, ${sum.warn} warnings, ${sum.fail} failures, ${sum.skip} skipped`);
  }
  return sum.fail ? 1 : 0;
}

module.exports = { main, parse, COMMAND };
