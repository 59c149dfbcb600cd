'use strict';
// tunekit logs [-n N] [-f] [--app-config FILE | --stack DIR]
//
// The log of the app on this host, found from its app.json (lib/apphost.js):
// `journalctl -u UNIT` (systemd), `pm2 logs NAME` (PM2), or the file a runner
// started by hand writes its standard output to (`tail`).

const { spawn } = require('node:child_process');
const { inputFile, wholeNumber } = require('../../lib/args');
const command = require('../../lib/command');
const apphost = require('../../lib/apphost');
const kept = require('../../lib/kept');

const COMMAND = {
  name: 'logs',
  usage: ['[options]'],
  about: 'The app\'s log on this host: journalctl -u UNIT (systemd), pm2 logs NAME (PM2), or the file the standard ' +
    'output of a runner started by hand goes to, found from the app.json its runner reads.',
  options: {
    lines: { type: 'string', short: 'n', value: 'N', default: '50', help: 'the last N lines, 1 to 100000' },
    follow: { type: 'boolean', short: 'f', help: 'keep printing new lines until Ctrl-C' },
    'app-config': { type: 'string', value: 'FILE', help: `the app's app.json (default: ${require('../../lib/doctor').DEFAULT_APP_CONFIG})` },
    stack: kept.STACK_OPTION,
  },
  examples: [
    'tunekit logs -n 200',
    'tunekit logs -f --app-config /etc/tunekit-app/app.json',
  ],
};

const parse = (argv) => command.parse(COMMAND, argv).values;

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  const lines = wholeNumber('lines', opts.lines, 1, 100000);
  if (opts['app-config']) inputFile('app-config', opts['app-config']);
  const files = kept.forCommand('logs', opts);
  for (const line of files.say) console.error(line);
  const { app, pm2, name } = apphost.locate(files.appConfig);
  if (!app.kind) {
    console.error(`tunekit logs: ${apphost.notFound(app)}`);
    return 1;
  }
  const c = apphost.logsCommand(app, { lines, follow: opts.follow, pm2, name });
  if (!c) {
    console.error(`tunekit logs: ${apphost.describe(app)} writes its log to its standard output, which is not a file: ` +
      'read it where it was started, or start it with its output sent to a file (tunekit run ... >> app.log 2>&1)');
    return 1;
  }
  const child = spawn(c.cmd, c.args, { stdio: 'inherit', env: { ...process.env, ...c.env } });
  // Ctrl-C ends the follower; its exit ends this command.
  const ignore = () => {};
  process.on('SIGINT', ignore);
  const code = await new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`tunekit logs: ${c.cmd}: ${err.code === 'ENOENT' ? 'not found' : err.message}`);
      resolve(1);
    });
    child.on('close', (status, signal) => resolve(signal === 'SIGINT' ? 0 : status == null ? 1 : status));
  });
  process.removeListener('SIGINT', ignore);
  return code;
}

module.exports = { main, parse, COMMAND };
