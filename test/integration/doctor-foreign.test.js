'use strict';
// tunekit doctor on stacks the kit did not write (test/fixtures/foreign/README.md
// cites where each comes from): this machine's nginx with the stack's site, a
// plain Node app as the user nobody on the socket or port the site names, no
// app.json. doctor must find what matters on each, in the user's own terms.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn, spawnSync } = require('node:child_process');
const { freePorts, signal } = require('../../lib/proc');
const { nginxBinary } = require('../../lib/nginx');
const { users } = require('../../lib/accounts');
const { until } = require('../lib/util');

const CLI = path.resolve(__dirname, '../../bin/tunekit.js');
const FIXTURES = path.resolve(__dirname, '../fixtures/foreign');
const nobody = users().get('nobody');
const skip = process.getuid() !== 0 ? 'needs root: nginx\'s workers and the app run as nobody' : !nobody ? 'no user nobody here' : false;

function get(port) {
  return new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    }).on('error', (err) => resolve(err.code));
  });
}

/** The stack of FIXTURES/name running: { dir, nginxConf, target, port }. Stopped after the test. */
async function startForeign(t, name, { unix }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-foreign-'));
  fs.chmodSync(dir, 0o755);
  const procs = [];
  t.after(async () => {
    for (const p of procs) signal(p.pid, 'SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode !== null || p.signalCode !== null ? null : new Promise((r) => p.once('exit', r)))));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const [listen, appPort] = await freePorts(2);
  const run = path.join(dir, 'run'); // the app's own directory, where it binds its socket
  fs.mkdirSync(run);
  fs.chownSync(run, nobody.uid, nobody.gid);
  const socket = path.join(run, 'app.sock');
  const target = unix ? socket : String(appPort);
  fs.copyFileSync(path.join(FIXTURES, 'app.js'), path.join(dir, 'app.js'));
  const app = spawn(process.execPath, [path.join(dir, 'app.js'), target], { uid: nobody.uid, gid: nobody.gid, stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(app);
  await new Promise((resolve, reject) => {
    app.stdout.once('data', resolve);
    app.once('exit', (code) => reject(new Error(`${name}'s app exited (${code}) before it listened`)));
  });

  const own = (file) => path.join(FIXTURES, name, file);
  const site = fs.readFileSync(own('site.conf'), 'utf8')
    .replace('LISTEN', `127.0.0.1:${listen}`)
    .replace('TARGET', unix ? `unix:${socket}` : `127.0.0.1:${appPort}`);
  fs.writeFileSync(path.join(dir, 'site.conf'), site);
  fs.mkdirSync(path.join(dir, 'tmp'));
  const main = fs.existsSync(own('main.conf')) ? fs.readFileSync(own('main.conf'), 'utf8') : 'events { }\n';
  const nginxConf = path.join(dir, 'nginx.conf');
  // The harness's lines: where nginx keeps its pid, logs and temp files, who its workers are.
  fs.writeFileSync(nginxConf, [
    'user nobody nogroup;', 'worker_processes 1;', `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log;`, main,
    'http {', '    access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `    ${k}_temp_path ${dir}/tmp/${k};`),
    `    include ${dir}/site.conf;`, '}', ''].join('\n'));
  const nginx = spawn(nginxBinary(), ['-c', nginxConf, '-g', 'daemon off;'], { stdio: 'inherit' });
  procs.push(nginx);
  await until(`${name} serving through nginx`, async () => (await get(listen)) === 200, 30000, 100);
  return { dir, nginxConf, target, port: listen };
}

function doctor(stack) {
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--json', '--nginx-conf', stack.nginxConf], { encoding: 'utf8' });
  assert.ok(r.stdout, `doctor printed JSON (stderr: ${r.stderr})`);
  return { code: r.status, report: JSON.parse(r.stdout) };
}

const findings = (report, id) => report.findings.filter((f) => f.id === id);
const levels = (report, id) => findings(report, id).map((f) => f.level);

test('nginxconfig.io\'s reverse proxy: no keep-alive pool, and an open-files limit below 2 x worker_connections', { skip }, async (t) => {
  const stack = await startForeign(t, 'nginxconfig-io', { unix: false });
  const { code, report } = doctor(stack);
  assert.deepEqual(levels(report, 'keepalive-pool'), ['warn']);
  assert.match(findings(report, 'keepalive-pool')[0].what, /proxies to http:\/\/127\.0\.0\.1:\d+ directly.*no keep-alive pool/);
  const nofile = findings(report, 'nofile');
  const configured = nofile.find((f) => /worker_rlimit_nofile 65535, worker_connections 65535/.test(f.what));
  assert.ok(configured, JSON.stringify(nofile));
  assert.equal(configured.level, 'fail');
  assert.match(configured.fix, /worker_rlimit_nofile 131070/, 'the fix in nginx\'s own directive');
  assert.equal(code, 1);
});

test('the close map in front of a pool: named; the listen without backlog=: named', { skip }, async (t) => {
  const stack = await startForeign(t, 'close-map', { unix: true });
  const { report } = doctor(stack);
  assert.ok(levels(report, 'upgrade-map').includes('fail') || levels(report, 'keepalive-connection').includes('fail'),
    `the map that sends close: ${JSON.stringify(report.findings.filter((f) => /map|connection/.test(f.id)))}`);
  assert.ok(levels(report, 'backlog').some((l) => l !== 'ok'), JSON.stringify(findings(report, 'backlog')));
});

test('the article\'s upstream (keepalive_timeout 65s) in front of Node\'s defaults on a Unix socket: the race, measured, with its line', { skip }, async (t) => {
  const stack = await startForeign(t, 'unix-socket-article', { unix: true });
  const { code, report } = doctor(stack);
  const race = findings(report, 'keepalive-race');
  assert.deepEqual(race.map((f) => f.level), ['fail'], JSON.stringify(race));
  // Node's idle close, measured over the socket (keepAliveTimeout 5 s, + the 1 s buffer Node 20.18 and later add).
  const measured = /closes idle connections at (\d+) ms \(measured on (\S+): closed after (\d+\.\d) s idle\)/.exec(race[0].what);
  assert.ok(measured, race[0].what);
  assert.equal(measured[2], stack.target);
  assert.ok(Number(measured[1]) >= 5000 && Number(measured[1]) < 65000, race[0].what);
  assert.match(race[0].what, new RegExp(`keepalive_timeout 65s at ${stack.dir}/site\\.conf:6\\)`), 'the line the user opens');
  assert.match(race[0].fix, /^in the app, set server\.keepAliveTimeout above 65000 ms/);
  // Unfinished headers are still waited on when the idle connection has long closed: headers-timeout holds.
  const headers = findings(report, 'headers-timeout');
  assert.deepEqual(headers.map((f) => f.level), ['ok'], JSON.stringify(headers));
  assert.match(headers[0].what, /headers wait at least \d+ ms .*still waited on after \d+\.\d s/);
  assert.ok(report.facts.read.some((r) => r.startsWith(`the app on ${stack.target}, measured`)), report.facts.read.join('; '));
  // Every rule of the table is counted: evaluated over this host, or named with the
  // variable it lacks. A plain Node app tells no request timeout, no probe measures it,
  // and its headers wait is a lower bound (still waited on when the probe stopped).
  assert.equal(report.rules.evaluated.length + report.rules.notEvaluated.length, report.rules.total);
  for (const id of ['keepalive-race', 'headers-timeout', 'socket-mode', 'nginx-version-floor', 'socket-path-length', 'server-name', 'keepalive-http']) {
    assert.ok(report.rules.evaluated.includes(id), `${id}: ${JSON.stringify(report.rules.notEvaluated.find((r) => r.id === id))}`);
  }
  assert.deepEqual(report.rules.notEvaluated.find((r) => r.id === 'request-timeout').missing.map((m) => m.variable), ['tunekit_app_request_timeout_ms', 'tunekit_app_headers_timeout_ms']);
  t.diagnostic(`rules evaluated live: ${report.rules.evaluated.length} of ${report.rules.total}; not: ${report.rules.notEvaluated.map((r) => r.id).join(', ')}`);
  assert.equal(code, 1);
});

test('nginx\'s documented keep-alive example (no keepalive_timeout) in front of a plain app on a port: the race against nginx\'s default', { skip }, async (t) => {
  const stack = await startForeign(t, 'nginx-docs-keepalive', { unix: false });
  const { code, report } = doctor(stack);
  const race = findings(report, 'keepalive-race');
  assert.deepEqual(race.map((f) => f.level), ['fail'], JSON.stringify(race));
  assert.match(race[0].what, new RegExp(`measured on 127\\.0\\.0\\.1:${stack.target}: closed after`));
  assert.match(race[0].what, new RegExp(`keeps them 60s \\(no keepalive_timeout in upstream http_backend at ${stack.dir}/site\\.conf:2: nginx's default\\)`));
  assert.equal(code, 1);
});
