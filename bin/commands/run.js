'use strict';
// tunekit run [MODULE] [options]
//
// Resolves the one definition (lib/config: defaults < --vars files < --set), renders
// the app's settings from app/settings.json.j2 (the file Ansible installs as
// /etc/tunekit-app/app.json), applies the flags below, and runs the cluster
// primary of app/cluster.js in this process.

const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const { parseCommandLine } = require('../../lib/args');

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
  --log FORMAT          auto (text on a terminal, else JSON lines; default) | json | text
  --vars FILE.yml       variables file, like ansible-playbook -e @FILE (repeatable)
  --set key=value       one variable, like -e key=value (repeatable)
  -h, --help            this text

Signals: SIGTERM/SIGINT drain and exit; SIGHUP restarts the workers one at a time.
Logs: one line per event on stdout (JSON lines unless on a terminal or --log text);
the "ready" event comes once every worker listens.`;

// Each flag sets a variable of the definition, so it passes the same type and
// cross-layer checks as `--set` (lib/config). --listen fd:N and systemd have no
// variable: an inherited socket is the runner's own business.
const FLAG_VARIABLES = {
  workers: 'tunekit_app_workers',
  strategy: 'tunekit_app_strategy',
  'socket-mode': 'tunekit_socket_mode',
  'socket-group': 'tunekit_socket_group',
  'drain-timeout': 'tunekit_app_drain_timeout_s',
};

function parse(argv) {
  const { values, positionals } = parseCommandLine({
    args: argv,
    options: {
      listen: { type: 'string' },
      workers: { type: 'string' },
      strategy: { type: 'string' },
      'socket-mode': { type: 'string' },
      'socket-group': { type: 'string' },
      'drain-timeout': { type: 'string' },
      config: { type: 'string' },
      log: { type: 'string' },
      vars: { type: 'string', multiple: true, default: [] },
      set: { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: true,
  }, 'tunekit run --help');
  if (positionals.length > 1) {
    throw new UsageError(`one MODULE at most, got ${positionals.length}: ${positionals.join(' ')}`);
  }
  const { FORMATS } = require('../../app/log');
  if (values.log !== undefined && !FORMATS.includes(values.log)) {
    throw new UsageError(`--log ${values.log}: expected one of ${FORMATS.join(', ')}`);
  }
  if (values.config && (values.vars.length || values.set.length)) {
    throw new UsageError('--config reads a rendered app.json; --vars and --set apply to the definition instead: use one or the other');
  }
  return { ...values, module: positionals[0] };
}

/**
 * The flags as variables of the definition: [{key, value, where}], values as
 * text (lib/config reads them as --set does). --listen unix:/p sets the socket
 * path (and upstream kind uds, unless --strategy per-worker); tcp:H:P the upstream
 * kind tcp and the TCP host and port.
 */
function flagVariables(opts) {
  const out = [];
  const add = (key, value, where) => out.push({ key, value, where });
  for (const [flag, key] of Object.entries(FLAG_VARIABLES)) {
    if (opts[flag] !== undefined) add(key, opts[flag], `--${flag} ${opts[flag]}`);
  }
  if (opts.listen !== undefined) {
    const listen = parseListenFlag(opts.listen);
    const where = `--listen ${opts.listen}`;
    if (listen.kind === 'unix') {
      // --strategy per-worker is the runner's choice; the kind stays the definition's.
      if (opts.strategy !== 'per-worker') add('tunekit_upstream_kind', 'uds', where);
      add('tunekit_socket_path', listen.path, where);
    } else if (listen.kind === 'tcp') {
      add('tunekit_upstream_kind', 'tcp', where);
      add('tunekit_app_tcp_host', listen.host, where);
      add('tunekit_app_tcp_port', String(listen.port), where);
    }
  }
  return out;
}

function parseListenFlag(text) {
  const { parseListen } = require('../../app/settings');
  try {
    return parseListen(text);
  } catch (err) {
    throw new UsageError(`--${err.message}`);
  }
}

/** --config FILE: the flags, type-checked as their variables, as settings fields. */
function configFlagSettings(opts) {
  const v = require('../../lib/config').checkFlagTypes(flagVariables(opts));
  const out = {};
  if (opts.listen !== undefined) out.listen = parseListenFlag(opts.listen).text;
  if ('tunekit_app_workers' in v) out.workers = v.tunekit_app_workers;
  if ('tunekit_app_strategy' in v) out.strategy = v.tunekit_app_strategy;
  if ('tunekit_socket_mode' in v) out.socketMode = v.tunekit_socket_mode;
  if ('tunekit_socket_group' in v) out.socketGroup = String(v.tunekit_socket_group);
  if ('tunekit_app_drain_timeout_s' in v) out.drainTimeoutMs = v.tunekit_app_drain_timeout_s * 1000;
  return out;
}

/** Settings that are not variables: an inherited listener, the module path. */
function runnerOverrides(opts) {
  const out = {};
  if (opts.listen !== undefined && parseListenFlag(opts.listen).kind === 'fd') out.listen = parseListenFlag(opts.listen).text;
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
    // A rendered file has no definition behind it: its flags are settings fields.
    base = appSettings.readSettingsFile(opts.config);
    for (const [key, value] of Object.entries(configFlagSettings(opts))) base[key] = value;
  } else {
    const config = require('../../lib/config');
    const vars = config.resolve({ varsFiles: opts.vars, set: opts.set, flags: flagVariables(opts) });
    base = config.appSettings(vars);
  }
  const merged = { ...base, ...runnerOverrides(opts) };
  // Flags may combine into something the runner refuses (per-worker on tcp:, ...).
  return { settings: appSettings.normalize(merged) };
}

async function main(argv) {
  const { help, settings } = settingsFor(argv);
  if (help) {
    console.log(HELP);
    return 0;
  }
  const { log } = parse(argv);
  if (log !== undefined) process.env.TUNEKIT_LOG = log; // the primary and its workers read it
  const { runPrimary } = require('../../app/cluster');
  return runPrimary(settings);
}

module.exports = { main, settingsFor, flagVariables, HELP };
