'use strict';
// tunekit status [--json] [--watch S [--count N]] [--app-config FILE] [--nginx-conf FILE]
//                [--stack DIR] [--metrics URL]... [--status URL] [--mtail URL] [--minutes N]
//
// What `pm2 ls` is for PM2, for the whole stack of this host: a row per app
// worker, nginx's connections, the app socket's accept queue and the failed
// attempts to reach the app by cause, read from the endpoints Prometheus scrapes
// (lib/status.js). An endpoint that does not answer: one line naming it, exit 1.

const { inputFile, wholeNumber } = require('../../lib/args');
const command = require('../../lib/command');
const { appConfigOf } = require('../../lib/apphost');
const kept = require('../../lib/kept');
const { UsageError } = require('../../lib/errors');
const status = require('../../lib/status');
const { DEFAULT_APP_CONFIG, DEFAULT_NGINX_CONF } = require('../../lib/doctor');

const COMMAND = {
  name: 'status',
  usage: ['[options]'],
  about: 'The stack of this host in one table, read from the endpoints Prometheus scrapes: per app worker its pid, ' +
    'uptime, RSS, event-loop p99, descriptors, requests and keep-alive reuse (the runner\'s metrics endpoint); nginx\'s ' +
    'active and waiting connections and accepted - handled (stub_status); the app socket\'s accept queue (ss); failed ' +
    'attempts to reach the app by cause (mtail, else nginx\'s error log). The endpoints come from app.json and ' +
    'nginx\'s files (the host\'s, a kept demo stack\'s, or the flags\'). An endpoint that does not answer is one line naming it, exit 1.',
  options: {
    json: { type: 'boolean', help: 'print the data as JSON (one object; one per line with --watch)' },
    watch: { type: 'string', value: 'S', help: 'print again every S seconds (1 to 3600) until Ctrl-C' },
    count: { type: 'string', value: 'N', help: 'with --watch: stop after N readings (1 to 100000)' },
    'app-config': { type: 'string', value: 'FILE', help: `the app's app.json (default: ${DEFAULT_APP_CONFIG})` },
    app: { type: 'string', value: 'NAME', help: 'with several apps on the host (tunekit_apps): the app of this name (its /etc/*/app.json), instead of --app-config' },
    'nginx-conf': { type: 'string', value: 'FILE', help: `nginx's main file (default: ${DEFAULT_NGINX_CONF}); its stub_status server and error log are read` },
    stack: kept.STACK_OPTION,
    metrics: { type: 'string', value: 'URL', multiple: true, help: 'the runner\'s metrics endpoint(s) instead of app.json\'s "metricsListen" (http://HOST:PORT/metrics)' },
    status: { type: 'string', value: 'URL', help: 'nginx\'s stub_status instead of the one in nginx\'s files' },
    mtail: { type: 'string', value: 'URL', default: status.DEFAULT_MTAIL, help: 'mtail\'s metrics (metrics/nginx.mtail); when it does not answer, the error log is counted' },
    minutes: { type: 'string', value: 'N', default: '5', help: 'the error log\'s window when mtail does not answer, 1 to 1440 minutes' },
  },
  examples: [
    'tunekit status',
    'tunekit status --json --watch 2 --count 3 --app-config /etc/tunekit-app/app.json',
    'tunekit status --stack /tmp/tunekit-stack-Ab12Cd',
  ],
};

const parse = (argv) => command.parse(COMMAND, argv).values;

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  opts['app-config'] = appConfigOf({ app: opts.app, appConfig: opts['app-config'] });
  const files = kept.forCommand('status', opts, { pointed: Boolean(opts.app || opts.metrics.length || opts.status) });
  const minutes = wholeNumber('minutes', opts.minutes, 1, 1440);
  const every = opts.watch === undefined ? null : wholeNumber('watch', opts.watch, 1, 3600);
  if (opts.count !== undefined && every === null) throw new UsageError('--count N goes with --watch S (how many readings, S seconds apart)');
  const count = opts.count === undefined ? (every ? Infinity : 1) : wholeNumber('count', opts.count, 1, 100000);
  if (opts['app-config']) inputFile('app-config', opts['app-config']);
  if (opts['nginx-conf']) inputFile('nginx-conf', opts['nginx-conf']);
  for (const line of files.say) console.error(line);
  let stopped = false;
  let wake = () => {};
  const stop = () => { stopped = true; wake(); };
  process.on('SIGINT', stop);
  try {
    const front = !(files.rec && files.rec.kind === 'run');
    const where = status.locate({ appConfig: files.appConfig, nginxConf: files.nginxConf, metrics: opts.metrics || [], status: opts.status, mtail: opts.mtail, front });
    for (let i = 0; i < count && !stopped; i++) {
      if (i > 0) {
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, every * 1000);
          wake = () => { clearTimeout(timer); resolve(); };
        });
      }
      if (stopped) break;
      const d = await status.gather(where, { minutes });
      if (opts.json) console.log(JSON.stringify(d));
      else process.stdout.write(`${every ? `\n${d.at}\n` : ''}${status.format(d)}`);
    }
  } catch (err) {
    if (!(err instanceof status.StatusDown)) throw err;
    console.error(`tunekit status: ${err.message}`);
    return 1;
  } finally {
    process.removeListener('SIGINT', stop);
  }
  return 0;
}

module.exports = { main, parse, COMMAND };
