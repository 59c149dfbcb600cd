'use strict';
// tunekit run [MODULE] [options]
//
// Resolves the one definition (lib/config: defaults < --vars files < --set), renders
// the app's settings from app/settings.json.j2 (the file Ansible installs as
// /etc/tunekit-app/app.json), applies the flags below, and runs the cluster
// primary of app/cluster.js in this process.

const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const command = require('../../lib/command');

const { STRATEGIES } = require('../../app/settings');
const { FORMATS } = require('../../app/log');

const COMMAND = {
  name: 'run',
  usage: ['[MODULE] [options]'],
  about: 'Start the Node cluster: the primary binds the listener and hands it to the workers. ' +
    'MODULE (a path, relative to the current directory) exports a request handler (req, res) — an express app works as is — ' +
    'or a factory returning an http.Server (fastify: return f.server after f.ready()). ' +
    'Without MODULE the example app answers {"ok":true,"worker":N,"pid":P}. ' +
    'Settings come from the one definition (--vars, --set) or from a rendered app.json (--config); the flags win.',
  positionals: 1,
  options: {
    listen: { type: 'string', value: 'ADDR', help: 'unix:/abs/path.sock, tcp:HOST:PORT, fd:N (an inherited socket) or systemd (socket activation)' },
    workers: { type: 'string', value: 'N', help: 'worker processes; 0 = one per CPU core' },
    strategy: { type: 'string', value: 'S', choices: STRATEGIES, help: 'shared: the primary binds, workers accept (the definition\'s default); round-robin: Node\'s, the primary accepts and passes connections; per-worker: one socket per worker, PATH.1 .. PATH.N' },
    'socket-mode': { type: 'string', value: 'MODE', help: 'permission bits of the socket, e.g. 0660' },
    'socket-group': { type: 'string', value: 'GROUP', help: 'group of the socket (name or gid); nginx\'s user must be in it' },
    'drain-timeout': { type: 'string', value: 'SEC', help: 'on SIGTERM/SIGINT, finish in-flight requests for at most SEC seconds' },
    config: { type: 'string', value: 'FILE', help: 'read a rendered app.json instead of the definition (needs no npm package)' },
    log: { type: 'string', value: 'FORMAT', choices: FORMATS, help: 'auto: text on a terminal, else JSON lines' },
    vars: { type: 'string', value: 'FILE.yml', multiple: true, help: 'variables file, like ansible-playbook -e @FILE' },
    set: { type: 'string', value: 'KEY=VALUE', multiple: true, help: 'one variable, like -e key=value' },
    'no-record': { type: 'boolean', help: 'do not record this runner for reload, logs, status and doctor to find (the kit\'s own stacks: demo --keep records the whole stack)' },
  },
  examples: [
    'tunekit run ./app.js --listen tcp:127.0.0.1:3000 --workers 2',
    'tunekit run --config /etc/tunekit-app/app.json --log json',
  ],
  notes: 'Signals: SIGTERM/SIGINT drain and exit; SIGHUP restarts the workers one at a time. ' +
    'Logs: one line per event on stdout; the "ready" event comes once every worker listens. ' +
    'Recorded: the runner writes where its settings are (the "recorded" event names the dir) until it exits, so ' +
    'tunekit reload, logs, status and doctor find it with no flag (--stack DIR with several); send its output to a file ' +
    '(>> app.log 2>&1) for logs to read it. ' +
    'As yourself, no root: mkdir -p "$HOME/.run" && tunekit run --listen "unix:$HOME/.run/app.sock" --socket-group "$(id -gn)".',
};

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
  const { values, positionals } = command.parse(COMMAND, argv);
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

/**
 * --config FILE: the flags, type-checked as their variables, as settings fields.
 * --listen is checked by the runner's own parser; only the other flags read the
 * definition (and its YAML parser), so `run --config FILE [--listen ADDR]` needs
 * no npm package, as on a host.
 */
function configFlagSettings(opts) {
  const typed = flagVariables({ ...opts, listen: undefined });
  const v = typed.length ? require('../../lib/config').checkFlagTypes(typed) : {};
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
  // `file`: the same settings as an app.json (what the runner's record holds).
  return { settings: appSettings.normalize(merged), file: merged };
}

// An argument as the user's shell takes it back.
const shellWord = (a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`);

/**
 * Record this runner (lib/kept.js) until the process exits, so that reload, logs,
 * status and doctor find it with no flag; logs where. A state dir that cannot be
 * written does not stop the runner: it says so and runs unrecorded.
 */
function recordSelf(file, argv) {
  const kept = require('../../lib/kept');
  const { makeLogger } = require('../../app/log');
  const log = makeLogger();
  const command = [require('../../lib/kit').invocation(), ...['run', ...argv].map(shellWord)].join(' ');
  let dir;
  try {
    dir = kept.recordRun({ settings: file, command });
  } catch (err) {
    log('warn', 'not-recorded', { error: `${err.code || err.message} writing under ${kept.stateDir()}`, fix: 'set TUNEKIT_STATE_DIR to a folder you can write, for reload, logs and status to find this runner' });
    return;
  }
  process.on('exit', () => kept.forgetRun(dir));
  log('info', 'recorded', { dir, note: 'tunekit reload, logs, status and doctor find this runner with no flag (--stack DIR names it)' });
}

async function main(argv) {
  const { help, settings, file } = settingsFor(argv);
  if (help) {
    console.log(command.helpText(COMMAND));
    return 0;
  }
  const { log, 'no-record': noRecord } = parse(argv);
  if (log !== undefined) process.env.TUNEKIT_LOG = log; // the primary and its workers read it
  if (!noRecord) recordSelf(file, argv);
  const { runPrimary } = require('../../app/cluster');
  return runPrimary(settings);
}

module.exports = { main, parse, settingsFor, flagVariables, COMMAND };
