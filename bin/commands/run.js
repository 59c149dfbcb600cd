'use strict';
// tunekit run [MODULE] [options]
//
// Resolves the one definition (lib/config: defaults < --vars files < --set), renders
// the app's settings from app/settings.json.j2 (the file Ansible installs as
// /etc/tunekit-app/app.json), applies the flags below, and runs the cluster
// primary of app/cluster.js in this process.

const path = require('node:path');
const { parseArgs } = require('node:util');
const { UsageError } = require('../../lib/errors');

const HELP = `usage: tunekit run [MODULE] [options]

Start the Node cluster: the primary binds the listener and hands it to the workers.
MODULE exports a request handler (req, res) — an express app works as is — or a
factory returning an http.Server (fastify: return f.server after f.ready()).
Without MODULE the example app answers {"ok":true,"worker":N,"pid":P}.

options:
  --listen ADDR         unix:/path.sock | tcp:HOST:PORT | fd:N | systemd
  --workers N           worker processes (0 = one per CPU core)
  --strategy S          shared (primary binds, workers accept; default) |
                        round-robin (Node's: primary accepts, passes connections) |
                        per-worker (one socket per worker, PATH.1 .. PATH.N)
  --socket-mode MODE    permission bits of the socket, e.g. 0660
  --socket-group G      group of the socket (name or gid); nginx's user must be in it
  --drain-timeout SEC   on SIGTERM/SIGINT, finish in-flight requests for at most SEC
  --config FILE         read a rendered app.json instead of the definition
  --vars FILE.yml       variables file, like ansible-playbook -e @FILE (repeatable)
  --set key=value       one variable, like -e key=value (repeatable)
  -h, --help            this text

Signals: SIGTERM/SIGINT drain and exit; SIGHUP restarts the workers one at a time.
Logs: one JSON line per event on stdout; "event":"ready" once every worker listens.`;

const STRATEGIES = ['shared', 'round-robin', 'per-worker'];

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string' },
        workers: { type: 'string' },
        strategy: { type: 'string' },
        'socket-mode': { type: 'string' },
        'socket-group': { type: 'string' },
        'drain-timeout': { type: 'string' },
        config: { type: 'string' },
        vars: { type: 'string', multiple: true, default: [] },
        set: { type: 'string', multiple: true, default: [] },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    // node:util's messages run to several sentences; the first names the problem.
    throw new UsageError(`${err.message.split(/\.\s|\n/)[0]}; see tunekit run --help`);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) {
    throw new UsageError(`one MODULE at most, got ${positionals.length}: ${positionals.join(' ')}`);
  }
  if (values.config && (values.vars.length || values.set.length)) {
    throw new UsageError('--config reads a rendered app.json; --vars and --set apply to the definition instead: use one or the other');
  }
  return { ...values, module: positionals[0] };
}

/** CLI flags → changes to the settings object (validated, in settings units). */
function flagOverrides(opts) {
  const out = {};
  if (opts.workers !== undefined) {
    if (!/^\d+$/.test(opts.workers)) throw new UsageError(`--workers ${opts.workers}: expected a whole number (0 = one per CPU core)`);
    out.workers = Number(opts.workers);
  }
  if (opts.listen !== undefined) {
    const { parseListen } = require('../../app/settings');
    try {
      out.listen = parseListen(opts.listen).text;
    } catch (err) {
      throw new UsageError(`--${err.message}`);
    }
  }
  if (opts.strategy !== undefined) {
    if (!STRATEGIES.includes(opts.strategy)) {
      throw new UsageError(`--strategy ${opts.strategy}: expected one of ${STRATEGIES.join(', ')}`);
    }
    out.strategy = opts.strategy;
  }
  if (opts['socket-mode'] !== undefined) {
    if (!/^0?[0-7]{3}$/.test(opts['socket-mode'])) {
      throw new UsageError(`--socket-mode ${opts['socket-mode']}: expected an octal mode like 0660`);
    }
    out.socketMode = opts['socket-mode'].padStart(4, '0');
  }
  if (opts['socket-group'] !== undefined) out.socketGroup = opts['socket-group'];
  if (opts['drain-timeout'] !== undefined) {
    const sec = Number(opts['drain-timeout']);
    if (!/^\d+(\.\d+)?$/.test(opts['drain-timeout']) || !(sec > 0)) {
      throw new UsageError(`--drain-timeout ${opts['drain-timeout']}: expected seconds > 0, e.g. 10`);
    }
    out.drainTimeoutMs = Math.round(sec * 1000);
  }
  if (opts.module !== undefined) out.module = path.resolve(opts.module);
  return out;
}

/** The settings `tunekit run ARGV` would start with (exported for tests). */
function settingsFor(argv) {
  const opts = parse(argv);
  if (opts.help) return { help: true };
  const appSettings = require('../../app/settings');
  let base;
  if (opts.config) {
    base = appSettings.readSettingsFile(opts.config);
  } else {
    const config = require('../../lib/config');
    const vars = config.resolve({ varsFiles: opts.vars, set: opts.set });
    base = config.appSettings(vars);
  }
  const merged = { ...base, ...flagOverrides(opts) };
  // Flags may combine into something the runner refuses (per-worker on tcp:, ...).
  return { settings: appSettings.normalize(merged) };
}

async function main(argv) {
  const { help, settings } = settingsFor(argv);
  if (help) {
    console.log(HELP);
    return 0;
  }
  const { runPrimary } = require('../../app/cluster');
  return runPrimary(settings);
}

module.exports = { main, settingsFor, flagOverrides, HELP };
