#!/usr/bin/env node
'use strict';
// The tunekit CLI: wires subcommands (bin/commands/<name>.js, each exporting
// main(argv) -> exit code) and turns every error of the kit (lib/errors.js) and of
// the runner (app/errors.js) into one clear line and exit 2.

// First, before anything an old Node lacks: one line and exit 1 on Node < the minimum.
require('../app/node-version').requireSupportedNode('tunekit');

const COMMANDS = {
  run: 'start the Node cluster on a UDS or TCP listener',
  render: 'write nginx, app, systemd and sysctl files for a host',
  demo: 'render, start nginx and the cluster, send a burst, stop',
  loadtest: 'drive a stack through nginx and report',
  bench: 'stock vs tuned TCP vs tuned UDS, A/B rounds, ratios',
  tune: 'find this app\'s best values here by measurement, confirm them, write a vars file',
  doctor: 'audit a live host across layers',
  sysctl: 'apply a sysctl drop-in without lowering live values',
  profile: 'syscalls, perf samples, queues, flame graph, verdict',
  reload: 'rolling restart of the app on this host (systemd, PM2 or by hand)',
  logs: 'the app\'s log on this host (-n N, -f)',
  status: 'the stack of this host: app workers, nginx, accept queue, 502 causes',
};

function usage() {
  const lines = Object.entries(COMMANDS).map(([c, d]) => `  ${c.padEnd(9)} ${d}`);
  return `usage: tunekit <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n` +
    '`tunekit help <command>` (or `tunekit <command> --help`) prints its options; `tunekit --version` the version.';
}

async function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'help' && rest.length) return main([rest[0], '--help', ...rest.slice(1)]);
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    console.log(usage());
    return cmd ? 0 : 2;
  }
  if (cmd === '--version' || cmd === '-V') {
    // package.json is read as data: the version has one home.
    const pkg = JSON.parse(require('node:fs').readFileSync(require('node:path').join(__dirname, '../package.json'), 'utf8'));
    console.log(`tunekit ${pkg.version}`);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, cmd)) {
    console.error(`tunekit: unknown command "${cmd}"; one of ${Object.keys(COMMANDS).join(', ')} (see tunekit --help)`);
    return 2;
  }
  const mod = require(`./commands/${cmd}`);
  return mod.main(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    const { KitError, missingPackage } = require('../lib/errors');
    const { AppError } = require('../app/errors');
    // A clone without `npm ci`: which package, and the command that installs it.
    err = missingPackage(err) || err;
    if (err instanceof KitError || err instanceof AppError) {
      console.error(`tunekit: ${err.message}`);
      process.exitCode = 2;
    } else {
      console.error(err && err.stack ? err.stack : err);
      process.exitCode = 1;
    }
  },
);
