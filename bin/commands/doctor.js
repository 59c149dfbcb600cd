'use strict';
// tunekit doctor: audit a live host across layers (see lib/doctor.js).
// Exit 0 when nothing fails, 1 when a rule fails, 2 on bad usage.

const { parseCommandLine } = require('../../lib/args');
const doctor = require('../../lib/doctor');

const HELP = `usage: tunekit doctor [options]

Reads the live nginx config (nginx -T), kernel limits, accept queues (ss),
process limits (/proc), the app socket and the app's live timeouts, and checks
that the layers agree.

options:
  --nginx-conf PATH   nginx's main config (default /etc/nginx/nginx.conf)
  --app-config PATH   the runner's app.json (default /etc/tunekit-app/app.json)
  --socket PATH       the app socket (default: every unix: server in nginx's upstreams)
  --json              print findings as JSON
  -h, --help          this text`;

async function main(argv) {
  let opts;
  opts = parseCommandLine({
    args: argv,
    options: {
      'nginx-conf': { type: 'string' },
      'app-config': { type: 'string' },
      socket: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  }, 'tunekit doctor --help').values;
  if (opts.help) {
    console.log(HELP);
    return 0;
  }
  const facts = await doctor.gather({
    ...(opts['nginx-conf'] && { nginxConf: opts['nginx-conf'] }),
    ...(opts['app-config'] && { appConfig: opts['app-config'] }),
    ...(opts.socket && { socket: opts.socket }),
  });
  const findings = doctor.analyze(facts);
  const sum = doctor.summarize(findings);
  if (opts.json) {
    console.log(JSON.stringify({ summary: sum, findings, facts }, null, 2));
  } else {
    console.log(`read: ${facts.read.join('; ')}`);
    console.log('');
    const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };
    // The id in brackets is the one docs/troubleshooting.md cites.
    for (const f of findings) {
      console.log(`${mark[f.level]}  [${f.id}] ${f.what}`);
      if (f.fix) console.log(`      fix: ${f.fix}`);
    }
    console.log(`\n${sum.ok} ok, ${sum.warn} warnings, ${sum.fail} failures, ${sum.skip} skipped`);
  }
  return sum.fail ? 1 : 0;
}

module.exports = { main };
