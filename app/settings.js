'use strict';
// The runner's settings: the JSON object app/settings.json.j2 renders (the file
// Ansible installs as /etc/tunekit-app/app.json), validated and normalised here.
// Node built-ins only: this file runs on hosts without node_modules.

const fs = require('node:fs');
const os = require('node:os');

// sun_path is 108 bytes on Linux; one is the terminating NUL.
const SUN_PATH_MAX = 107;

const STRATEGIES = ['shared', 'round-robin', 'per-worker'];
// The definition's bound on tunekit_app_accepts_per_turn (Type: int 1..1024).
const MAX_ACCEPTS_PER_TURN = 1024;
// The definition's bound on tunekit_app_max_semi_space_mb (Type: int 0..1024).
const MAX_SEMI_SPACE_MB = 1024;

const { SettingsError } = require('./errors');

const INTEGER_FIELDS = [
  'workers', 'backlog', 'acceptsPerTurn', 'keepAliveTimeoutMs', 'headersTimeoutMs', 'requestTimeoutMs', 'queueBudgetMs', 'sustainedAfterS', 'sustainedBudgetMs', 'shedRetryAfterS',
  'drainTimeoutMs', 'minUptimeMs', 'youngDeathLimit', 'respawnBackoffMs', 'respawnBackoffMaxMs',
  'spareWorkers', 'killGraceMs', 'startTimeoutMs', 'socketCheckMs', 'metricsLoopResolutionMs', 'maxSemiSpaceMb',
];

// Every field app/settings.json.j2 renders. No defaults here: the one definition
// (roles/tunekit/defaults/main/) holds them, the template renders
// them all, and a file that lacks one was rendered by another version of the kit.
const BOOLEAN_FIELDS = ['perfMap', 'memoryReducer', 'metrics'];
const FIELDS = ['name', 'listen', 'strategy', 'module', 'socketMode', 'socketGroup', ...INTEGER_FIELDS, ...BOOLEAN_FIELDS, 'metricsListen', 'shedDir'];

/**
 * Parse a listen string.
 *   unix:/run/app/app.sock | tcp:127.0.0.1:3000 | tcp:[::1]:3000 | fd:3 | systemd
 * A bare absolute path is taken as unix:.
 */
function parseListen(value) {
  if (typeof value !== 'string' || value === '') {
    throw new SettingsError('listen is empty; use unix:/path.sock, tcp:HOST:PORT, fd:N or systemd');
  }
  if (value.startsWith('/')) value = `unix:${value}`;
  if (value.startsWith('unix:')) {
    const path = value.slice(5);
    if (!path.startsWith('/')) {
      throw new SettingsError(`listen ${value}: the socket path must be absolute (unix:/run/app/app.sock)`);
    }
    return { kind: 'unix', path, text: `unix:${path}` };
  }
  if (value.startsWith('tcp:')) {
    const m = /^tcp:(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
    const port = m ? Number(m[3]) : NaN;
    if (!m || port < 1 || port > 65535) {
      throw new SettingsError(`listen ${value}: expected tcp:HOST:PORT with a port 1-65535 (IPv6: tcp:[::1]:3000)`);
    }
    const host = m[1] || m[2];
    return { kind: 'tcp', host, port, ipv6: Boolean(m[1]), text: value };
  }
  if (value === 'systemd') return { kind: 'fd', fd: 3, systemd: true, text: 'systemd' };
  if (value.startsWith('fd:')) {
    const fd = /^fd:(\d+)$/.test(value) ? Number(value.slice(3)) : NaN;
    if (!(fd >= 3)) throw new SettingsError(`listen ${value}: expected fd:N with N >= 3 (0-2 are stdio)`);
    return { kind: 'fd', fd, systemd: false, text: value };
  }
  throw new SettingsError(`listen ${value}: expected unix:/path.sock, tcp:HOST:PORT, fd:N or systemd`);
}

/**
 * The metrics endpoint (tunekit_metrics_listen): tcp:HOST:PORT or unix:/path.sock,
 * never the app's own listener. Refusals name the variable and the fix.
 */
function parseMetricsListen(value, listen) {
  const name = `metricsListen ${JSON.stringify(value)} (tunekit_metrics_listen)`;
  let endpoint;
  try {
    endpoint = parseListen(value);
  } catch (err) {
    throw new SettingsError(`${name}: expected tcp:HOST:PORT with a port 1-65535 (tcp:127.0.0.1:9464) or unix:/path.sock`);
  }
  if (endpoint.kind === 'fd') {
    throw new SettingsError(`${name}: an inherited socket cannot serve metrics; use tcp:127.0.0.1:9464 or unix:/path.sock`);
  }
  if (endpoint.kind === 'unix' && Buffer.byteLength(endpoint.path) > SUN_PATH_MAX) {
    throw new SettingsError(`${name}: the socket path is ${Buffer.byteLength(endpoint.path)} bytes; the limit (sun_path) is ${SUN_PATH_MAX}: choose a shorter directory or name`);
  }
  const same = endpoint.kind === listen.kind &&
    (endpoint.kind === 'unix' ? endpoint.path === listen.path : endpoint.port === listen.port);
  if (same) {
    throw new SettingsError(`${name} is the app's own listener (${listen.text}): give the metrics endpoint an address of its own`);
  }
  return endpoint;
}

function parseMode(value) {
  const text = String(value);
  if (!/^0?[0-7]{3}$/.test(text)) {
    throw new SettingsError(`socketMode ${text} is not an octal mode like 0660`);
  }
  const mode = parseInt(text, 8);
  if (mode & 0o111) throw new SettingsError(`socketMode ${text} sets execute bits; a socket needs read/write only (0660)`);
  return mode;
}

/**
 * Validate and normalise a settings object; returns a new object, with the
 * listen address parsed once into `endpoint` ({kind, path | host, port | fd,
 * text}) and the socket mode into `modeBits` (both not enumerable, so the
 * object's JSON is unchanged). A normalised
 * object is returned as it is: the runner normalises once, at its boundary
 * (the CLI's flags and vars, or the file it reads, or the primary's JSON in a
 * worker), and hands the values on.
 */
function normalize(input) {
  if (NORMALIZED.has(input)) return input;
  if (!input || typeof input !== 'object' || Array.isArray(input)) {
    throw new SettingsError('settings must be a JSON object (see app/settings.json.j2)');
  }
  const missing = FIELDS.filter((k) => !(k in input));
  if (missing.length) {
    throw new SettingsError(`settings lack ${missing.join(', ')}: re-render app.json from this version of the kit (tunekit render)`);
  }
  const s = { ...input };
  for (const key of INTEGER_FIELDS) {
    if (!Number.isInteger(s[key]) || s[key] < 0) {
      throw new SettingsError(`${key}=${JSON.stringify(s[key])} must be a whole number >= 0`);
    }
  }
  for (const key of ['backlog', 'acceptsPerTurn', 'sustainedBudgetMs', 'drainTimeoutMs', 'youngDeathLimit', 'respawnBackoffMs', 'startTimeoutMs', 'metricsLoopResolutionMs']) {
    if (s[key] < 1) throw new SettingsError(`${key}=${s[key]} must be at least 1`);
  }
  for (const key of BOOLEAN_FIELDS) {
    if (typeof s[key] !== 'boolean') throw new SettingsError(`${key}=${JSON.stringify(s[key])} must be true or false`);
  }
  if (s.acceptsPerTurn > MAX_ACCEPTS_PER_TURN) {
    throw new SettingsError(`acceptsPerTurn=${s.acceptsPerTurn} is above ${MAX_ACCEPTS_PER_TURN}: each is a descriptor every worker polls (tunekit_app_accepts_per_turn; 32 drains a busy worker's queue, docs/overload.md)`);
  }
  if (s.maxSemiSpaceMb > MAX_SEMI_SPACE_MB) {
    throw new SettingsError(`maxSemiSpaceMb=${s.maxSemiSpaceMb} is above ${MAX_SEMI_SPACE_MB} (tunekit_app_max_semi_space_mb: MiB per semi-space, and the young generation takes three; 0 leaves it to V8)`);
  }
  if (!STRATEGIES.includes(s.strategy)) {
    throw new SettingsError(`strategy ${JSON.stringify(s.strategy)} must be one of ${STRATEGIES.join(', ')}`);
  }
  if (s.headersTimeoutMs <= s.keepAliveTimeoutMs) {
    throw new SettingsError(`headersTimeoutMs=${s.headersTimeoutMs} must be greater than keepAliveTimeoutMs=${s.keepAliveTimeoutMs}`);
  }
  if (s.requestTimeoutMs !== 0 && s.requestTimeoutMs < s.headersTimeoutMs) {
    throw new SettingsError(`requestTimeoutMs=${s.requestTimeoutMs} must be at least headersTimeoutMs=${s.headersTimeoutMs} (Node refuses otherwise)`);
  }
  const listen = parseListen(s.listen);
  s.listen = listen.text;
  Object.defineProperty(s, 'endpoint', { value: listen, enumerable: false });
  if (listen.kind === 'fd' && s.strategy !== 'shared') {
    throw new SettingsError(`listen ${listen.text} (an inherited socket) works with strategy shared only, not ${s.strategy}`);
  }
  if (s.strategy === 'per-worker' && listen.kind !== 'unix') {
    throw new SettingsError(`strategy per-worker needs a unix: listen (one socket per worker, PATH.N), not ${listen.text}`);
  }
  if (typeof s.metricsListen !== 'string') throw new SettingsError('metricsListen must be a listen string (tcp:127.0.0.1:9464) (tunekit_metrics_listen)');
  if (s.metrics) Object.defineProperty(s, 'metricsEndpoint', { value: parseMetricsListen(s.metricsListen, listen), enumerable: false });
  s.socketMode = String(s.socketMode);
  Object.defineProperty(s, 'modeBits', { value: parseMode(s.socketMode), enumerable: false });
  s.socketGroup = s.socketGroup == null ? '' : String(s.socketGroup);
  if (typeof s.shedDir !== 'string' || (s.shedDir !== '' && !s.shedDir.startsWith('/'))) {
    throw new SettingsError(`shedDir ${JSON.stringify(s.shedDir)} (tunekit_app_shed_dir) must be an absolute path, or "" for none`);
  }
  if (typeof s.module !== 'string') throw new SettingsError('module must be a path string ("" for the example app)');
  if (s.workers === 0) s.workers = availableCpus();
  NORMALIZED.add(s);
  return s;
}

const NORMALIZED = new WeakSet();

/** The parsed listen address of settings, normalised or not. */
function endpointOf(settings) {
  return settings.endpoint || parseListen(settings.listen);
}

function availableCpus() {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

/** Read and normalise a rendered app.json. */
function readSettingsFile(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const why = err.code === 'ENOENT' ? 'no such file (ENOENT)' : err.code || err.message;
    throw new SettingsError(`cannot read settings file ${file}: ${why}; give the app.json that tunekit render writes (etc/tunekit-app/app.json)`);
  }
  let data;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new SettingsError(`${file} is not valid JSON: ${err.message}`);
  }
  return normalize(data);
}

/** The socket paths a settings object binds (per-worker: PATH.1 .. PATH.N). */
function socketPaths(settings) {
  const listen = endpointOf(settings);
  if (listen.kind !== 'unix') return [];
  if (settings.strategy !== 'per-worker') return [listen.path];
  return Array.from({ length: settings.workers }, (_, i) => `${listen.path}.${i + 1}`);
}

module.exports = {
  SUN_PATH_MAX,
  STRATEGIES,
  FIELDS,
  SettingsError,
  parseListen,
  parseMetricsListen,
  endpointOf,
  parseMode,
  normalize,
  readSettingsFile,
  socketPaths,
  availableCpus,
};
