'use strict';
// tunekit doctor against live stacks: real nginx, the real cluster, real sockets.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startStack } = require('../../lib/stack');

const CLI = path.resolve(__dirname, '../../bin/tunekit.js');

function doctor(stack, ...extra) {
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--json',
    '--nginx-conf', path.join(stack.renderDir, 'etc/nginx/nginx.conf'),
    '--app-config', stack.vars.tunekit_app_config_path, ...extra], { encoding: 'utf8' });
  assert.ok(r.stdout, `doctor printed JSON (stderr: ${r.stderr})`);
  return { code: r.status, report: JSON.parse(r.stdout) };
}

const byId = (report, id) => report.findings.filter((f) => f.id === id);

test('a tuned UDS stack passes every cross-layer rule, read from the live processes', async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2 });
  t.after(() => stack.stop());
  const { code, report } = doctor(stack);
  assert.equal(report.summary.fail, 0, JSON.stringify(report.findings.filter((f) => f.level === 'fail')));
  assert.equal(code, 0);
  const race = byId(report, 'keepalive-race')[0];
  assert.equal(race.level, 'ok');
  assert.match(race.what, /\(live \/healthz\)/, 'the app timeout came from the running app');
  // The live accept queue of the app socket is the backlog the definition asked for (<= somaxconn).
  const somaxconn = Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  const sock = report.facts.sockets.find((s) => s.path === stack.socketPath);
  assert.equal(sock.backlog, Math.min(stack.vars.tunekit_app_backlog, somaxconn),
    `the app socket's listener as ss showed it: ${JSON.stringify(sock)}; listeners: ${JSON.stringify(report.facts.listeners.filter((l) => l.kind === 'unix' && l.local.startsWith(path.dirname(stack.socketPath))))}`);
  assert.equal(sock.mode, 0o660);
  assert.ok(byId(report, 'socket-access').every((f) => f.level === 'ok'));

  // Loosen the live socket: doctor notices and exits non-zero.
  fs.chmodSync(stack.socketPath, 0o666);
  const after = doctor(stack);
  assert.equal(after.code, 1);
  assert.equal(byId(after.report, 'socket-mode')[0].level, 'fail');
});

test('the stock baseline is reported for its missing keep-alive pool and default backlog', async (t) => {
  const stack = await startStack({ profile: 'stock', workers: 2 });
  t.after(() => stack.stop());
  const { report } = doctor(stack);
  const pool = byId(report, 'keepalive-pool')[0];
  assert.equal(pool.level, 'warn');
  assert.match(pool.what, /directly \(an implicit upstream, no upstream\{\} block\): no keep-alive pool/);
  assert.ok(byId(report, 'backlog').some((f) => f.level === 'warn' && /buys nothing/.test(f.what)));
});

test('doctor names what it read and what it skipped, with check ids; a missing explicit path exits 2', async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 1 });
  t.after(() => stack.stop());
  const conf = path.join(stack.renderDir, 'etc/nginx/nginx.conf');
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--nginx-conf', conf, '--app-config', stack.vars.tunekit_app_config_path], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const read = r.stdout.split('\n')[0];
  for (const what of [conf, stack.vars.tunekit_app_config_path, `socket ${stack.socketPath}`, 'GET /healthz']) {
    assert.ok(read.includes(what), `read line names ${what}: ${read}`);
  }
  assert.match(r.stdout, /^ok +\[keepalive-race\] /m, 'check ids in the text output');
  for (const [flag, file] of [['--app-config', '/nope'], ['--nginx-conf', '/nonexistent']]) {
    const bad = spawnSync(process.execPath, [CLI, 'doctor', flag, file], { encoding: 'utf8' });
    assert.equal(bad.status, 2, bad.stderr);
    assert.equal(bad.stderr, `tunekit: ${flag} ${file}: no such file; pass the path of the live file\n`);
  }
});

test('doctor evaluates the rule table over the live stack and says how many rules it evaluated, naming each one it could not and why', async (t) => {
  const rules = require('../../lib/config/rules');
  const stack = await startStack({ upstream: 'uds', workers: 2 });
  t.after(() => stack.stop());
  const total = rules.load().length;
  const conf = path.join(stack.renderDir, 'etc/nginx/nginx.conf');
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--nginx-conf', conf, '--app-config', stack.vars.tunekit_app_config_path], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const line = new RegExp(`^rules evaluated live: (\\d+) of ${total}$`, 'm').exec(r.stdout);
  assert.ok(line, `the count line: ${r.stdout}`);
  const { report } = doctor(stack);
  // Every rule is counted once: evaluated, or listed with what it lacks.
  assert.equal(report.rules.total, total);
  assert.equal(report.rules.evaluated.length + report.rules.notEvaluated.length, total);
  // Read from the live nginx, app and kernel of this stack (a systemd unit and the
  // app's /proc limits depend on how the test runs; these do not).
  for (const id of ['nginx-version-floor', 'keepalive-race', 'headers-timeout', 'nofile', 'nginx-limit-nofile', 'backlog', 'app-backlog', 'overload-bound',
    'keepalive-pool-size', 'keepalive-http', 'keepalive-connection', 'per-worker-count', 'request-timeout', 'socket-mode', 'socket-path-length',
    'server-name', 'upstream-sticky', 'http3-tls', 'http3-version', 'http3-module']) {
    assert.ok(report.rules.evaluated.includes(id), `${id} evaluated live: ${JSON.stringify(report.rules.notEvaluated.find((x) => x.id === id))}`);
  }
  assert.ok(Number(line[1]) >= 20 && Number(line[1]) === report.rules.evaluated.length, `${line[1]} in the text, ${report.rules.evaluated.length} in the JSON`);
  // The kit's stack breaks none of the rules doctor evaluates.
  assert.equal(report.summary.fail, 0, JSON.stringify(report.findings.filter((f) => f.level === 'fail')));
  const stock = report.rules.notEvaluated.find((x) => x.id === 'stock-tcp');
  assert.deepEqual(stock.missing.map((m) => m.variable), ['tunekit_profile']);
  assert.match(r.stdout, /^ {2}not evaluated {2}\[stock-tcp\] tunekit_profile: not read on a live host: /m);
  assert.match(report.findings.find((f) => f.id === 'nginx-limit-nofile').what, /^holds: tunekit_nginx_limit_nofile=\d+ \("Max open files" hard \d+ in \/proc\/\d+\/limits \(nginx's master\)\)/);
});

test('a socket a Node cluster primary bound relative to its cwd (as PM2\'s daemon does) is listed by its absolute path', async (t) => {
  const { listeners } = require('../../lib/doctor');
  const os = require('node:os');
  const { spawn } = require('node:child_process');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-relsock-'));
  const sock = path.join(dir, 's', 'app.sock');
  fs.mkdirSync(path.dirname(sock));
  // The primary's cwd is the socket's grandparent, so "s/app.sock" is the shorter name
  // and the one Node's cluster binds.
  const script = [
    "const cluster = require('node:cluster');",
    "if (cluster.isPrimary) { cluster.fork().on('listening', () => console.log('listening')); }",
    `else require('node:net').createServer().listen(${JSON.stringify(sock)});`,
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'cluster.js'), script);
  const child = spawn(process.execPath, ['cluster.js'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => {
    if (child.exitCode === null) process.kill(child.pid, 'SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (b) => { if (String(b).includes('listening')) resolve(); });
    child.on('exit', (code) => reject(new Error(`the cluster exited (${code}) before it listened`)));
  });
  const found = listeners().find((l) => l.kind === 'unix' && l.pids.includes(child.pid));
  assert.ok(found, 'the primary holds a listening unix socket');
  assert.equal(found.local, sock);
});
