'use strict';
// lib/apphost.js: who runs the app (from ss's listeners and /proc) and the
// command `tunekit reload` / `tunekit logs` runs for each — systemctl and
// journalctl for a systemd unit, pm2 for PM2, a signal and tail for a runner
// started by hand. The systemd and PM2 commands are checked here as data: they
// cannot run without a booted systemd host (test/e2e) or a PM2 daemon.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const A = require('../../lib/apphost');
const { RUNNER_CMD, WORKER_CMD } = require('../../lib/proc');

test('the unit of a pid: a system service from its cgroup, not a login scope or a user manager\'s unit', () => {
  const cg = (text) => A.serviceOf(1, () => text);
  assert.equal(cg('0::/system.slice/tunekit-app.service\n'), 'tunekit-app.service');
  assert.equal(cg('12:pids:/\n1:name=systemd:/system.slice/my-api.service\n0::/\n'), 'my-api.service');
  assert.equal(cg('0::/apps.slice/tunekit-app.service\n'), 'tunekit-app.service');
  assert.equal(cg('0::/user.slice/user-1000.slice/session-3.scope\n'), null);
  assert.equal(cg('0::/user.slice/user-1000.slice/user@1000.service/app.slice/tunekit.service\n'), null);
  assert.equal(cg('0::/\n'), null);
  assert.equal(A.serviceOf(1, () => { throw Object.assign(new Error('gone'), { code: 'ENOENT' }); }), null);
});

test('the runner\'s and its workers\' command lines, with an absolute or a relative path', () => {
  for (const cmd of ['node /opt/tunekit-app/app/cluster.js --config /etc/tunekit-app/app.json', 'node app/cluster.js --config x.json',
    'node /src/tunekit/bin/tunekit.js run --listen unix:/s', 'node /usr/lib/node_modules/.bin/tunekit run app.js']) assert.match(cmd, RUNNER_CMD, cmd);
  for (const cmd of ['node /opt/x/mapp/cluster.js', 'node /x/bin/tunekit.js render --out d', 'PM2 v6.0.14: God Daemon (/root/.pm2)']) assert.doesNotMatch(cmd, RUNNER_CMD, cmd);
  assert.match('node /opt/tunekit-app/app/worker.js', WORKER_CMD);
  assert.doesNotMatch('node /opt/tunekit-app/app/cluster.js', WORKER_CMD);
});

test('the listeners of an app.json "listen": its socket, per-worker sockets PATH.N, or its TCP port', () => {
  const live = [
    { kind: 'unix', local: '/run/a/app.sock', pids: [10] },
    { kind: 'unix', local: '/run/a/app.sock.1', pids: [11] },
    { kind: 'unix', local: '/run/a/app.sock.bak', pids: [12] },
    { kind: 'unix', local: '/run/a/app.sock2', pids: [13] },
    { kind: 'tcp', local: '127.0.0.1:3000', pids: [14] },
  ];
  assert.deepEqual(A.listenersOf('unix:/run/a/app.sock', live).map((l) => l.pids[0]), [10, 11]);
  assert.deepEqual(A.listenersOf('tcp:127.0.0.1:3000', live).map((l) => l.pids[0]), [14]);
  assert.deepEqual(A.listenersOf('systemd', live), []);
});

test('find: an app.json that is missing, or whose socket nobody serves, says where it looked', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'apphost-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cfg = path.join(dir, 'app.json');
  assert.deepEqual(A.find({ appConfig: cfg, live: [] }), { kind: null, appConfig: cfg, why: `${cfg} does not exist` });
  fs.writeFileSync(cfg, JSON.stringify({ listen: 'unix:/run/x/app.sock' }));
  assert.equal(A.find({ appConfig: cfg, live: [] }).why, `nothing listens on /run/x/app.sock (the "listen" of ${cfg})`);
  // This test's own process is no runner.
  const held = A.find({ appConfig: cfg, live: [{ kind: 'unix', local: '/run/x/app.sock', pids: [process.pid] }] });
  assert.equal(held.why, `unix:/run/x/app.sock is held by pid ${process.pid}, not by the kit's runner or PM2 (the "listen" of ${cfg})`);
  assert.match(A.notFound(held), /^no app found: .*; start it, or point to its settings with --app-config FILE/);
});

test('reload: systemctl reload UNIT, pm2 reload NAME on the daemon\'s PM2_HOME, SIGHUP to a runner by hand', () => {
  assert.deepEqual(A.reloadCommand({ kind: 'systemd', unit: 'tunekit-app.service', pid: 5 }), { cmd: 'systemctl', args: ['reload', 'tunekit-app.service'] });
  assert.deepEqual(A.reloadCommand({ kind: 'pm2', pm2Home: '/var/lib/tunekit/.pm2', pid: 5 }, { pm2: '/usr/bin/pm2', name: 'tunekit-app' }),
    { cmd: '/usr/bin/pm2', args: ['reload', 'tunekit-app'], env: { PM2_HOME: '/var/lib/tunekit/.pm2' } });
  assert.deepEqual(A.reloadCommand({ kind: 'runner', pid: 5 }), { signal: 'SIGHUP', pid: 5 });
});

test('logs: journalctl -u UNIT, pm2 logs NAME, tail of the runner\'s output file; -n and -f passed on', () => {
  const unit = { kind: 'systemd', unit: 'tunekit-app.service', pid: 5 };
  assert.deepEqual(A.logsCommand(unit, { lines: 20 }), { cmd: 'journalctl', args: ['-u', 'tunekit-app.service', '-n', '20', '--no-pager'] });
  assert.deepEqual(A.logsCommand(unit, { lines: 20, follow: true }).args, ['-u', 'tunekit-app.service', '-n', '20', '--no-pager', '-f']);
  const pm2 = { kind: 'pm2', pm2Home: '/h', pid: 5 };
  assert.deepEqual(A.logsCommand(pm2, { lines: 7, pm2: 'pm2', name: 'web' }), { cmd: 'pm2', args: ['logs', 'web', '--lines', '7', '--nostream'], env: { PM2_HOME: '/h' } });
  assert.deepEqual(A.logsCommand(pm2, { lines: 7, follow: true, pm2: 'pm2', name: 'web' }).args, ['logs', 'web', '--lines', '7']);
  assert.deepEqual(A.logsCommand({ kind: 'runner', pid: 5, logFile: '/var/log/app.log' }, { lines: 3, follow: true }), { cmd: 'tail', args: ['-n', '3', '-F', '/var/log/app.log'] });
  assert.equal(A.logsCommand({ kind: 'runner', pid: 5, logFile: null }), null);
});

test('the PM2 app of an app.json: the one whose TUNEKIT_CONFIG names it (pm2 jlist)', () => {
  const jlist = [
    { name: 'other', pm2_env: { TUNEKIT_CONFIG: '/etc/other/app.json' } },
    { name: 'tunekit-app', pm2_env: { env: { TUNEKIT_CONFIG: '/etc/tunekit-app/app.json' } } },
  ];
  assert.equal(A.pm2Name(jlist, '/etc/tunekit-app/app.json'), 'tunekit-app');
  assert.equal(A.pm2Name(jlist, '/etc/none/app.json'), null);
});

test('describe: who runs the app, in the words the one-line answers use', () => {
  assert.equal(A.describe({ kind: 'systemd', unit: 'tunekit-app.service', pid: 5 }), 'systemd unit tunekit-app.service (main pid 5)');
  assert.equal(A.describe({ kind: 'pm2', pm2Home: '/h' }, 'web'), 'PM2 app web (PM2_HOME /h)');
  assert.equal(A.describe({ kind: 'runner', pid: 5 }), 'the runner started by hand (pid 5)');
});

test('socket activation ("listen": "systemd"): the runner is the process whose command line reads that app.json', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-apphost-'));
  const appConfig = path.join(dir, 'app.json');
  fs.writeFileSync(appConfig, JSON.stringify({ listen: 'systemd' }));
  // Nothing runs yet: one line that says where it looked and why.
  const none = A.find({ appConfig, live: [] });
  assert.equal(none.kind, null);
  assert.match(A.notFound(none), new RegExp(`no runner with --config ${appConfig.replace(/[.]/g, '\\.')} is running \\(socket activation`));
  // A process with the runner's command line for this app.json (it only waits).
  const { spawn } = require('node:child_process');
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', `${dir}/app/cluster.js`, '--config', appConfig], { stdio: 'ignore' });
  t.after(() => {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await new Promise((resolve) => child.once('spawn', resolve));
  const found = A.find({ appConfig, live: [] });
  assert.equal(found.pid, child.pid);
  assert.equal(found.kind, 'runner'); // not under systemd here: a runner started by hand
});
