'use strict';
// `tunekit run` argument parsing, the runner's settings validation and its
// error messages (no processes, no sockets).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { settingsFor } = require('../../bin/commands/run');
const config = require('../../lib/config');
const settings = require('../../app/settings');
const { kindOf } = require('../../app/load');
const sock = require('../../app/socket');
const { errorText, workerExecArgv } = require('../../app/cluster');

const defaults = () => config.appSettings(config.resolve({}));

test('no flags: the settings the definition renders (app/settings.json.j2)', () => {
  const { settings: s } = settingsFor([]);
  const d = defaults();
  for (const key of Object.keys(d)) {
    if (key === 'workers') continue; // 0 = one per CPU, resolved by the runner
    assert.deepEqual(s[key], d[key], key);
  }
  assert.equal(s.workers, settings.availableCpus());
  assert.equal(s.listen, 'unix:/run/tunekit-app/app.sock');
  assert.equal(s.strategy, 'shared');
  assert.ok(s.keepAliveTimeoutMs > 60000, 'keepAliveTimeout above nginx\'s upstream keepalive_timeout');
});

test('flags override the definition', () => {
  const { settings: s } = settingsFor([
    'app.js', '--workers', '3', '--listen', 'unix:/tmp/x.sock', '--strategy', 'per-worker',
    '--socket-mode', '0600', '--socket-group', 'www-data', '--drain-timeout', '2',
  ]);
  assert.equal(s.workers, 3);
  assert.equal(s.listen, 'unix:/tmp/x.sock');
  assert.equal(s.strategy, 'per-worker');
  assert.equal(s.socketMode, '0600');
  assert.equal(s.socketGroup, 'www-data');
  assert.equal(s.drainTimeoutMs, 2000);
  assert.equal(s.module, path.resolve('app.js'));
});

test('--set and --vars go through the one definition, derived values follow', () => {
  const { settings: s } = settingsFor(['--set', 'tunekit_nginx_upstream_keepalive_timeout_s=30']);
  assert.equal(s.keepAliveTimeoutMs, 35000);
  assert.equal(s.headersTimeoutMs, 36000);
  const tcp = settingsFor(['--set', 'tunekit_upstream_kind=tcp']).settings;
  assert.equal(tcp.listen, 'tcp:127.0.0.1:3000');
});

test('--config reads a rendered app.json', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tkr-unit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'app.json');
  fs.writeFileSync(file, JSON.stringify({ ...defaults(), listen: 'tcp:127.0.0.1:8080', workers: 2 }));
  const { settings: s } = settingsFor(['--config', file, '--workers', '4']);
  assert.equal(s.listen, 'tcp:127.0.0.1:8080');
  assert.equal(s.workers, 4, 'flags still win over the file');
});

test('--help', () => {
  assert.deepEqual(settingsFor(['--help']), { help: true });
});

const refusals = [
  [['--listen', 'tcp:localhost'], /--listen tcp:localhost: expected tcp:HOST:PORT/],
  [['--listen', 'unix:relative.sock'], /the socket path must be absolute/],
  [['--listen', 'fd:1'], /N >= 3/],
  [['a.js', 'b.js'], /unexpected b\.js: tunekit run takes at most 1 argument/],
  [['--strategy', 'random'], /--strategy random: expected one of shared, round-robin, per-worker; see tunekit run --help/],
  [['--bogus'], /Unknown option '--bogus'; see tunekit run --help/],
  [['--config', 'x.json', '--set', 'a=b'], /--config reads a rendered app.json; --vars and --set apply to the definition/],
];
for (const [argv, message] of refusals) {
  test(`refused with a usage error: ${argv.join(' ')}`, () => {
    assert.throws(() => settingsFor(argv), (err) => err.name === 'UsageError' && message.test(err.message));
  });
}

// Each flag is its variable: the same type check as --set, naming the flag.
const typeRefusals = [
  [['--workers', 'two'], 'tunekit_app_workers=two (from --workers two) is not int 0..: expected a whole number, at least 0'],
  [['--workers', '-3'], 'tunekit_app_workers=-3 (from --workers -3) is not int 0..: expected a whole number, at least 0'],
  [['--socket-mode', 'rw-rw----'], 'tunekit_socket_mode=rw-rw---- (from --socket-mode rw-rw----) is not mode: expected an octal mode of four digits, e.g. "0660"'],
  [['--drain-timeout', 'soon'], 'tunekit_app_drain_timeout_s=soon (from --drain-timeout soon) is not int 1..: expected a whole number, at least 1'],
  [['--drain-timeout', '0'], 'tunekit_app_drain_timeout_s=0 (from --drain-timeout 0) is not int 1..: expected a whole number, at least 1'],
];
for (const [argv, message] of typeRefusals) {
  test(`refused with the variable's type: ${argv.join(' ')}`, () => {
    assert.throws(() => settingsFor(argv), { name: 'ConfigError', message });
  });
}

test('a flag passes the cross-layer checks: --socket-mode 0666 is refused as --set refuses it', () => {
  const refusal = (argv) => {
    try {
      settingsFor(argv);
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
    assert.fail(`${argv.join(' ')} was accepted`);
  };
  const flag = refusal(['--socket-mode', '0666']);
  assert.match(flag, /^ConfigError: inconsistent settings: tunekit_socket_mode=0666 must be 0660/);
  assert.equal(flag, refusal(['--set', 'tunekit_socket_mode=0666']));
});

test('--config FILE: flags are type-checked as their variables', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-config-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'app.json');
  fs.writeFileSync(file, JSON.stringify(defaults()));
  assert.throws(() => settingsFor(['--config', file, '--workers', 'abc']),
    { name: 'ConfigError', message: 'tunekit_app_workers=abc (from --workers abc) is not int 0..: expected a whole number, at least 0' });
});

test('combinations the runner cannot do are errors naming both', () => {
  assert.throws(() => settingsFor(['--strategy', 'per-worker', '--listen', 'tcp:127.0.0.1:3000']),
    { name: 'SettingsError', message: /strategy per-worker needs a unix: listen/ });
  assert.throws(() => settingsFor(['--strategy', 'round-robin', '--listen', 'systemd']),
    { name: 'SettingsError', message: /works with strategy shared only, not round-robin/ });
  assert.throws(() => settings.normalize({ ...defaults(), socketMode: '0775' }), { name: 'SettingsError', message: /execute bits/ });
  assert.throws(() => settingsFor(['--set', 'tunekit_app_nope=1']), { name: 'ConfigError', message: /unknown variable tunekit_app_nope/ });
  assert.throws(() => settingsFor(['--config', '/nonexistent/app.json']), { name: 'SettingsError', message: /cannot read settings file \/nonexistent\/app.json: no such file \(ENOENT\)/ });
});

test('settings: a file missing a field says to re-render it', () => {
  const partial = { ...defaults() };
  delete partial.youngDeathLimit;
  assert.throws(() => settings.normalize(partial), { name: 'SettingsError', message: /settings lack youngDeathLimit: re-render app.json/ });
  assert.throws(() => settings.normalize({ ...defaults(), headersTimeoutMs: 1000, keepAliveTimeoutMs: 5000 }),
    /headersTimeoutMs=1000 must be greater than keepAliveTimeoutMs=5000/);
});

test('settings: acceptsPerTurn (tunekit_app_accepts_per_turn) is 1..1024, 32 in the definition', () => {
  assert.equal(defaults().acceptsPerTurn, 32);
  assert.equal(settings.normalize({ ...defaults(), acceptsPerTurn: 1 }).acceptsPerTurn, 1);
  assert.throws(() => settings.normalize({ ...defaults(), acceptsPerTurn: 0 }), { name: 'SettingsError', message: /acceptsPerTurn=0 must be at least 1/ });
  assert.throws(() => settings.normalize({ ...defaults(), acceptsPerTurn: 1025 }),
    { name: 'SettingsError', message: /acceptsPerTurn=1025 is above 1024: each is a descriptor every worker polls \(tunekit_app_accepts_per_turn/ });
});

test('settings: maxSemiSpaceMb (tunekit_app_max_semi_space_mb) is 0..1024, 0 (V8\'s own) in the definition', () => {
  assert.equal(defaults().maxSemiSpaceMb, 0);
  assert.equal(settings.normalize({ ...defaults(), maxSemiSpaceMb: 1 }).maxSemiSpaceMb, 1);
  assert.throws(() => settings.normalize({ ...defaults(), maxSemiSpaceMb: -1 }), { name: 'SettingsError', message: /maxSemiSpaceMb=-1 must be a whole number >= 0/ });
  assert.throws(() => settings.normalize({ ...defaults(), maxSemiSpaceMb: 1025 }),
    { name: 'SettingsError', message: /maxSemiSpaceMb=1025 is above 1024 \(tunekit_app_max_semi_space_mb/ });
  assert.equal(settingsFor(['--set', 'tunekit_app_max_semi_space_mb=4']).settings.maxSemiSpaceMb, 4);
});

test('workers\' flags: the primary\'s own, the perf map, the semi-space bound in place of the primary\'s, the memory reducer off', () => {
  const s = (o) => ({ ...defaults(), memoryReducer: true, ...o });
  assert.deepEqual(workerExecArgv(s({}), ['--max-semi-space-size=16']), ['--max-semi-space-size=16'], '0 keeps what the primary was started with');
  assert.deepEqual(workerExecArgv(s({ maxSemiSpaceMb: 2 }), ['--max-semi-space-size=16', '--enable-source-maps']), ['--enable-source-maps', '--max-semi-space-size=2']);
  assert.deepEqual(workerExecArgv(s({ maxSemiSpaceMb: 1, perfMap: true }), []), ['--perf-basic-prof-only-functions', '--max-semi-space-size=1']);
  // The kit's default: the reducer off, once, whatever the primary was started with;
  // on again, a primary's own --no-memory-reducer is not passed on.
  assert.equal(defaults().memoryReducer, false);
  assert.deepEqual(workerExecArgv(defaults(), ['--no-memory-reducer', '--enable-source-maps']), ['--enable-source-maps', '--no-memory-reducer']);
  assert.deepEqual(workerExecArgv(s({}), ['--no-memory-reducer']), []);
  assert.equal(settingsFor(['--set', 'tunekit_app_memory_reducer=true']).settings.memoryReducer, true);
});

test('parseListen', () => {
  assert.deepEqual(settings.parseListen('/run/a.sock'), { kind: 'unix', path: '/run/a.sock', text: 'unix:/run/a.sock' });
  assert.deepEqual(settings.parseListen('tcp:[::1]:8080'), { kind: 'tcp', host: '::1', port: 8080, ipv6: true, text: 'tcp:[::1]:8080' });
  assert.deepEqual(settings.parseListen('systemd'), { kind: 'fd', fd: 3, systemd: true, text: 'systemd' });
  assert.deepEqual(settings.parseListen('fd:4'), { kind: 'fd', fd: 4, systemd: false, text: 'fd:4' });
  assert.throws(() => settings.parseListen('tcp:127.0.0.1:70000'), /port 1-65535/);
});

test('per-worker socket paths are PATH.1 .. PATH.N', () => {
  const s = settings.normalize({ ...defaults(), listen: 'unix:/run/x/app.sock', strategy: 'per-worker', workers: 3 });
  assert.deepEqual(settings.socketPaths(s), ['/run/x/app.sock.1', '/run/x/app.sock.2', '/run/x/app.sock.3']);
});

test('socket path length: the error gives the length and the limit', () => {
  const p = `/tmp/${'x'.repeat(115)}`;
  assert.equal(Buffer.byteLength(p), 120);
  assert.throws(() => sock.checkPathLength(p), { message: `socket path ${p} is 120 bytes; the limit (sun_path) is 107: choose a shorter directory or name` });
  // 107 bytes is allowed; multi-byte characters count in bytes.
  sock.checkPathLength(`/tmp/${'x'.repeat(102)}`);
  assert.throws(() => sock.checkPathLength(`/tmp/${'é'.repeat(52)}`), /is 109 bytes/);
});

test('socket directory: missing or not writable is named with what it needs', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tkr-unit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  assert.throws(() => sock.checkDirectory(path.join(dir, 'nope', 'a.sock')),
    { message: new RegExp(`socket directory ${dir}/nope does not exist`) });
  fs.writeFileSync(path.join(dir, 'file'), '');
  assert.throws(() => sock.checkDirectory(path.join(dir, 'file', 'a.sock')), /is not a directory|does not exist/);
});

test('a regular file at the socket path is refused and kept', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tkr-unit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const p = path.join(dir, 'app.sock');
  fs.writeFileSync(p, 'keep me');
  await assert.rejects(sock.preparePath(p), /exists and is a regular file, not a socket; refusing to touch it/);
  assert.equal(fs.readFileSync(p, 'utf8'), 'keep me');
  assert.equal(await sock.preparePath(path.join(dir, 'free.sock')), null, 'a free path needs nothing');
});

test('socket group: gid, name, and a clear error for a missing group', () => {
  assert.equal(sock.resolveGroup(''), null);
  assert.equal(sock.resolveGroup('0'), 0);
  assert.equal(sock.resolveGroup('root'), 0);
  assert.throws(() => sock.resolveGroup('tk-no-such-group'), /socket group "tk-no-such-group" does not exist: create it \(groupadd --system tk-no-such-group\)/);
});

test('systemd activation: LISTEN_FDS / LISTEN_PID are checked', () => {
  assert.throws(() => sock.adoptFd(3, { systemd: true, env: {} }), /LISTEN_FDS is not set/);
  assert.throws(() => sock.adoptFd(3, { systemd: true, env: { LISTEN_FDS: '1', LISTEN_PID: '1' }, pid: 42 }),
    /LISTEN_PID=1 is not this process \(42\)/);
});

test('MODULE kind: marker first, then arity (express apps declare (req, res, next))', () => {
  const express = require('express');
  assert.equal(kindOf(express()), 'handler');
  assert.equal(kindOf((req, res) => res.end()), 'handler');
  assert.equal(kindOf(async () => null), 'factory');
  assert.equal(kindOf((opts) => opts), 'factory');
  const wrapped = (...args) => args;
  wrapped.tunekit = 'handler';
  assert.equal(kindOf(wrapped), 'handler');
});

test('crash-loop message names the module error and where it was thrown', () => {
  assert.equal(errorText({ name: 'Error', message: 'boom', at: '/srv/app.js:3:7' }), 'Error: boom (at /srv/app.js:3:7)');
  assert.match(errorText(null), /no error was reported/);
});

test('MODULE loading: handler, factory, server, and what a wrong export is told', async (t) => {
  const { loadApp } = require('../../app/load');
  const http = require('node:http');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tkr-unit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name, text) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const handler = await loadApp(write('h.js', 'module.exports = (req, res) => res.end("h");'));
  assert.equal(handler.kind, 'handler');
  assert.ok(handler.server instanceof http.Server);
  const factory = await loadApp(write('f.js', 'module.exports = async () => require("node:http").createServer();'));
  assert.equal(factory.kind, 'factory');
  const server = await loadApp(write('s.js', 'module.exports = require("node:http").createServer();'));
  assert.equal(server.kind, 'server');
  const esm = await loadApp(write('e.mjs', 'export default (req, res) => res.end("esm");'));
  assert.equal(esm.kind, 'handler');
  await assert.rejects(loadApp(write('o.js', 'module.exports = { port: 3000 };')),
    /o\.js exports object; export a request handler \(req, res\), a factory returning an http.Server, or an http.Server/);
  await assert.rejects(loadApp(write('bad.js', 'module.exports = () => 42;')),
    /bad\.js is a factory \(it declares fewer than two parameters\) but returned number; return an http.Server or a \(req, res\) handler, or mark a handler with module.exports.tunekit = 'handler'/);
  const example = await loadApp('');
  assert.equal(example.source, 'example');
});

test('the runner knows the strategies the definition allows (app/ cannot read the definition on a host)', () => {
  const { readTypes } = require('../../lib/config/types');
  const [alt] = readTypes(config.defaultFiles()).tunekit_app_strategy.alternatives;
  assert.deepEqual(alt.values, settings.STRATEGIES);
});

test('a rendered app.json carries the kill grace the definition sets', () => {
  const { settings: s } = settingsFor(['--set', 'tunekit_app_kill_grace_ms=500']);
  assert.equal(s.killGraceMs, 500);
});

test('a module path given with --set is relative to the current directory and stored absolute', () => {
  // demo/loadtest run the stack in the kit's folder and the unit in its
  // WorkingDirectory: a relative path kept as typed would name another file there.
  const typed = path.join('srv', 'app.js');
  const { settings: s } = settingsFor(['--set', `tunekit_app_module=${typed}`]);
  assert.equal(s.module, path.join(process.cwd(), typed));
  // What `tunekit render` writes to app.json: the same resolution.
  const rendered = config.appSettings(config.resolve({ set: [`tunekit_app_module=${typed}`] }));
  assert.equal(rendered.module, path.join(process.cwd(), typed));
  // Absolute and empty (the example app) stay as they are; a template is left to its inputs.
  assert.equal(settingsFor(['--set', 'tunekit_app_module=/srv/app.js']).settings.module, '/srv/app.js');
  assert.equal(settingsFor(['--set', 'tunekit_app_module=']).settings.module, '');
  const templated = config.resolve({ set: ['tunekit_app_module={{ tunekit_app_install_dir }}/server.js'] });
  assert.equal(templated.tunekit_app_module, '/opt/tunekit-app/server.js');
});
