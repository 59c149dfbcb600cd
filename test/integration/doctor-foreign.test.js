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
const { freePorts, signal, alive } = require('../../lib/proc');
const { nginxBinary, nginxVersion } = require('../../lib/nginx');
const { compareVersions } = require('../../lib/template');
const { users } = require('../../lib/accounts');
const { until } = require('../lib/util');
const { chrootArgv } = require('../../lib/chroot');
const { ensureRootfsAll } = require('../lib/nspawn');

const CLI = path.resolve(__dirname, '../../bin/tunekit.js');
const FIXTURES = path.resolve(__dirname, '../fixtures/foreign');
const PM2 = path.resolve(__dirname, '../../node_modules/.bin/pm2');
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

/**
 * The app under PM2 in cluster mode, as PM2's docs start it (`pm2 start app.js -i N`):
 * node_modules/.bin/pm2 with a PM2_HOME of its own in dir, run as root (PM2's
 * daemon keeps its files there), killed with `pm2 kill` after the test, its daemon
 * by pid if that fails. Resolves once the port answers.
 */
async function startPm2(stops, dir, port, instances) {
  const env = { ...process.env, PM2_HOME: path.join(dir, 'pm2-home') };
  const pidFile = path.join(env.PM2_HOME, 'pm2.pid');
  const cluster = { daemon: null, workers: [] };
  stops.push(() => {
    spawnSync(PM2, ['kill'], { env, timeout: 30000 });
    // `pm2 kill` failed or timed out: the daemon and its workers, by pid.
    for (const pid of [cluster.daemon || Number(fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8')), ...cluster.workers]) {
      if (pid && alive(pid)) signal(pid, 'SIGKILL');
    }
  });
  const r = spawnSync(PM2, ['start', path.join(dir, 'app.js'), '--name', 'web', '-i', String(instances), '--', String(port)], { env, encoding: 'utf8', timeout: 60000 });
  cluster.daemon = Number(fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8')) || null;
  assert.equal(r.status, 0, `pm2 start: ${r.stdout}${r.stderr}`);
  const jlist = spawnSync(PM2, ['jlist'], { env, encoding: 'utf8', timeout: 30000 }).stdout;
  cluster.workers = JSON.parse(jlist.slice(jlist.indexOf('['))).map((p) => p.pid).sort((a, b) => a - b);
  await until('the PM2 cluster answering on its port', async () => (await get(port)) === 200, 30000, 100);
  return cluster;
}

/**
 * The nginx of the root filesystem root, for the stack in dir: argv(args) runs it
 * (dir bound at its own path, a directory of dir's over its default log directory,
 * so the cached tree is never written), bin is a script in dir that runs it with
 * the arguments it is given (doctor's `nginx -T -c FILE` and `-V`: no argument
 * with a space; they reach the chroot in NGINX_ARGS, as its shell takes none).
 */
function rootfsNginx(root, dir) {
  fs.mkdirSync(path.join(dir, 'log'));
  const binds = { [dir]: dir, [path.join(dir, 'log')]: '/var/log/nginx' };
  const argv = (args) => chrootArgv(root, `exec /usr/sbin/nginx ${args}`, binds, { pidNamespace: false });
  const quote = (a) => `'${a.replace(/'/g, "'\\''")}'`;
  const bin = path.join(dir, 'rootfs-nginx');
  fs.writeFileSync(bin, `#!/bin/sh\nexport NGINX_ARGS="$*"\nexec ${argv('$NGINX_ARGS').map(quote).join(' ')}\n`, { mode: 0o755 });
  return { argv, bin };
}

/**
 * The stack of FIXTURES/name running: { dir, nginxConf, target, targets, port, pm2 }. Stopped after the test.
 * apps: how many apps the site proxies to (TARGET, TARGET2, ...), each its own process;
 * pm2: the one app on a port under PM2 in cluster mode with that many instances;
 * wrap: the command nginx is started through (it execs nginx: the same pid);
 * rootfs: a root filesystem whose own nginx runs the stack instead of this
 * machine's (chrooted, dir bound at its own path, in this PID namespace so the pid
 * file names the master as /proc shows it); { nginxBin } then runs that nginx too.
 */
async function startForeign(t, name, { unix, apps = 1, pm2 = 0, wrap = [], rootfs = null }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-foreign-'));
  fs.chmodSync(dir, 0o755);
  const procs = [];
  const stops = []; // what else the stack started (PM2), stopped before dir goes
  t.after(async () => {
    for (const stop of stops) stop();
    for (const p of procs) signal(p.pid, 'SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode !== null || p.signalCode !== null ? null : new Promise((r) => p.once('exit', r)))));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const [listen, ...appPorts] = await freePorts(1 + apps);
  const run = path.join(dir, 'run'); // the apps' own directory, where they bind their sockets
  fs.mkdirSync(run);
  fs.chownSync(run, nobody.uid, nobody.gid);
  fs.copyFileSync(path.join(FIXTURES, 'app.js'), path.join(dir, 'app.js'));
  const targets = [];
  let site = fs.readFileSync(path.join(FIXTURES, name, 'site.conf'), 'utf8').replace('LISTEN', `127.0.0.1:${listen}`);
  for (const [i, appPort] of appPorts.entries()) {
    const socket = path.join(run, i ? `app${i + 1}.sock` : 'app.sock');
    const target = unix ? socket : String(appPort);
    targets.push(target);
    site = site.replace(new RegExp(`\\bTARGET${i ? i + 1 : ''}\\b`), unix ? `unix:${socket}` : `127.0.0.1:${appPort}`);
    if (pm2) continue;
    const app = spawn(process.execPath, [path.join(dir, 'app.js'), target], { uid: nobody.uid, gid: nobody.gid, stdio: ['ignore', 'pipe', 'inherit'] });
    procs.push(app);
    await new Promise((resolve, reject) => {
      app.stdout.once('data', resolve);
      app.once('exit', (code) => reject(new Error(`${name}'s app exited (${code}) before it listened`)));
    });
  }
  const cluster = pm2 ? await startPm2(stops, dir, appPorts[0], pm2) : null;

  const own = (file) => path.join(FIXTURES, name, file);
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
  const inRootfs = rootfs && rootfsNginx(rootfs, dir);
  if (inRootfs) stops.push(() => signal(Number(fs.readFileSync(path.join(dir, 'nginx.pid'), 'utf8')), 'SIGTERM'));
  const command = inRootfs ? inRootfs.argv(`-c ${nginxConf} -g 'daemon off;'`) : [...wrap, nginxBinary(), '-c', nginxConf, '-g', 'daemon off;'];
  const nginx = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  procs.push(nginx);
  await until(`${name} serving through nginx`, async () => (await get(listen)) === 200, 30000, 100);
  return { dir, nginxConf, target: targets[0], targets, port: listen, pm2: cluster, nginxBin: inRootfs ? inRootfs.bin : null };
}

function doctor(stack) {
  const env = stack.nginxBin ? { ...process.env, TUNEKIT_NGINX: stack.nginxBin } : process.env;
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--json', '--nginx-conf', stack.nginxConf], { encoding: 'utf8', env });
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

test('two apps behind one nginx: every rule evaluated for each app, the one the second breaks named with its socket and its location\'s line', { skip }, async (t) => {
  const stack = await startForeign(t, 'two-apps', { unix: true, apps: 2 });
  const { code, report } = doctor(stack);
  const [a, b] = stack.targets;
  const site = `${stack.dir}/site.conf`;
  // overload-bound has no check of its own: the generic evaluation must reach the second app.
  const bound = findings(report, 'overload-bound');
  const broken = bound.filter((f) => f.level === 'fail');
  assert.equal(broken.length, 1, JSON.stringify(bound));
  assert.match(broken[0].what, new RegExp(`^app on unix:${b} \\(location /b/ at ${site}:26\\): `), broken[0].what);
  assert.match(broken[0].what, new RegExp(`server unix:${b} max_conns=1000 at ${site}:12`), 'the user\'s line');
  assert.match(broken[0].what, new RegExp(`the live accept queue of ${b} \\(ss -l\\)`), 'its own socket\'s queue');
  assert.match(broken[0].fix, new RegExp(`${site}:12`));
  // In the user's words: the line and the setting to change, the kit's names only as "(the kit's tunekit_...)".
  assert.match(broken[0].what, /: server max_conns=1000 \(the kit's tunekit_nginx_upstream_max_conns\) is more than the app's accept queue \(the app's listen backlog 511 \(the kit's tunekit_app_backlog\)\)/);
  assert.doesNotMatch(broken[0].what.replace(/\(the kit's tunekit_\w+\)/g, ''), /tunekit_/, broken[0].what);
  assert.ok(bound.some((f) => f.level === 'ok' && f.what.startsWith(`app on unix:${a} (location / at ${site}:20): holds: `)), JSON.stringify(bound));
  assert.ok(report.rules.evaluated.includes('overload-bound'));
  // The race, a check of its own, compares each upstream with the app it reaches: each app measured on its own socket.
  const race = findings(report, 'keepalive-race');
  assert.deepEqual(race.map((f) => [f.level, /measured on (\S+):/.exec(f.what)[1], /upstream (\w+)/.exec(f.what)[1]]), [['ok', a, 'app_a'], ['ok', b, 'app_b']], JSON.stringify(race));
  // headers-timeout, a check of its own too, for each app: both measured, each named.
  const headers = findings(report, 'headers-timeout');
  assert.deepEqual(headers.map((f) => [f.level, /^app on unix:(\S+): the app's headers wait/.exec(f.what)[1]]), [['ok', a], ['ok', b]], JSON.stringify(headers));
  assert.equal(code, 1);
});

test('a PM2 cluster with its defaults behind PM2\'s nginx guide: the race against nginx\'s 60 s, measured through PM2\'s daemon; the workers\' Node and limits read from /proc', { skip: skip || (!fs.existsSync(PM2) && 'pm2 is not installed (npm ci)') }, async (t) => {
  const stack = await startForeign(t, 'pm2-cluster', { unix: false, pm2: 2 });
  const { code, report } = doctor(stack);
  const site = `${stack.dir}/site.conf`;
  // The app PM2 runs: ss names PM2's daemon (the cluster primary holds the port), and its workers are found under it.
  const app = report.facts.apps.find((a) => a.target === `127.0.0.1:${stack.target}`);
  assert.ok(app, JSON.stringify(report.facts.apps));
  assert.deepEqual(app.pids, [stack.pm2.daemon, ...stack.pm2.workers], 'the daemon, then its cluster workers');
  assert.deepEqual(app.workers, stack.pm2.workers);
  assert.equal(app.node.version, process.versions.node, "the workers' Node, from /proc/PID/exe");
  assert.deepEqual(app.limits['Max open files'].pids, app.pids);
  assert.ok(report.rules.evaluated.includes('nr-open'), JSON.stringify(report.rules.notEvaluated.find((r) => r.id === 'nr-open')));
  assert.match(findings(report, 'nr-open')[0].what, new RegExp(`in /proc/${app.pids.join(',')}/limits \\(the app's processes\\)`));
  // The race: nginx's pool keeps idle connections 60 s (no keepalive_timeout), the
  // workers close them after Node's 5 s (+ 1 s), measured through the daemon's port.
  const race = findings(report, 'keepalive-race');
  assert.deepEqual(race.map((f) => f.level), ['fail'], JSON.stringify(race));
  const measured = /closes idle connections at (\d+) ms \(measured on 127\.0\.0\.1:(\d+): closed after \d+\.\d s idle\)/.exec(race[0].what);
  assert.ok(measured, race[0].what);
  assert.equal(measured[2], stack.target);
  assert.ok(Number(measured[1]) >= 5000 && Number(measured[1]) < 60000, race[0].what);
  assert.match(race[0].what, new RegExp(`keeps them 60s \\(no keepalive_timeout in upstream my_nodejs_upstream at ${site}:7: nginx's default\\)`), 'the block the user opens');
  assert.match(race[0].fix, /^in the app, set server\.keepAliveTimeout above 60000 ms/);
  // Connection "upgrade" on every request still lets nginx keep the connection (only "close" ends it).
  assert.deepEqual(levels(report, 'keepalive-pool'), ['ok']);
  assert.deepEqual(levels(report, 'keepalive-connection'), []);
  t.diagnostic(`PM2 daemon ${stack.pm2.daemon}, workers ${stack.pm2.workers.join(', ')}; fails: ${report.findings.filter((f) => f.level === 'fail').map((f) => f.id).join(', ')}; rules evaluated live: ${report.rules.evaluated.length} of ${report.rules.total}`);
  assert.equal(code, 1);
});

// nginx in a container: Docker's default capabilities leave out CAP_SYS_RESOURCE
// (https://docs.docker.com/engine/containers/run/#runtime-privilege-and-linux-capabilities),
// so the workers' setrlimit() to worker_rlimit_nofile fails above the hard limit
// nginx started under, and they keep the soft limit they inherited.
const CAPSH = ['/usr/sbin/capsh', '/sbin/capsh'].find((p) => fs.existsSync(p));
test('nginx held under a hard open-files limit below worker_rlimit_nofile (no CAP_SYS_RESOURCE, as in a container): one cause, one finding, in the host\'s terms', { skip: skip || (!CAPSH && 'capsh is not installed (apt-get install libcap2-bin)') }, async (t) => {
  const stack = await startForeign(t, 'container-nofile', { unix: true,
    wrap: [CAPSH, '--drop=cap_sys_resource', '--', '-c', 'ulimit -Sn 1024 && ulimit -Hn 4096 && exec "$0" "$@"'] });
  const { report } = doctor(stack);
  // nofile (the workers' live limit), nginx-rlimit (the error log's alert) and nginx-limit-nofile (the
  // rule over the master's hard limit) all see the one cause: one finding, the rule's, with the others as its evidence.
  const seen = report.findings.filter((f) => ['nofile', 'nginx-rlimit', 'nginx-limit-nofile'].includes(f.id) && f.level !== 'ok');
  assert.deepEqual(seen.map((f) => [f.id, f.level]), [['nginx-limit-nofile', 'fail']], JSON.stringify(seen));
  const [f] = seen;
  assert.match(f.what, new RegExp(`^"Max open files" hard 4096 in /proc/\\d+/limits \\(nginx's master\\), worker_rlimit_nofile 8192 at ${stack.dir}/nginx\\.conf:8: `), f.what);
  assert.match(f.what, /: the hard "Max open files" limit of nginx's master 4096 \(the kit's tunekit_nginx_limit_nofile\) must be at least worker_rlimit_nofile 8192 \(the kit's tunekit_nginx_worker_rlimit_nofile\)/);
  assert.match(f.what, /; nginx's running workers show it: their open-files limit is 1024 \(\/proc of its workers\), under 2 x worker_connections 2048; its error log: ".*setrlimit\(RLIMIT_NOFILE, 8192\) failed \(1: Operation not permitted\)"$/);
  assert.doesNotMatch(f.what.replace(/\(the kit's tunekit_\w+\)/g, ''), /tunekit_/);
});

test('h5bp\'s nginx.conf (worker_rlimit_nofile 8192, worker_connections 8000) with a plain proxy location: no keep-alive pool, the open-files limit under 2 x worker_connections both configured and live', { skip }, async (t) => {
  const stack = await startForeign(t, 'h5bp', { unix: false });
  const { code, report } = doctor(stack);
  // proxy_pass straight to host:port: nginx opens a new connection to the app for every request.
  assert.deepEqual(levels(report, 'keepalive-pool'), ['warn']);
  assert.match(findings(report, 'keepalive-pool')[0].what, new RegExp(`^location / proxies to http://127\\.0\\.0\\.1:${stack.target} directly .*no keep-alive pool`));
  // No pool, so nothing races the app's idle close; h5bp's keepalive_timeout 20s is the clients' side.
  assert.ok(!levels(report, 'keepalive-race').includes('fail'), JSON.stringify(findings(report, 'keepalive-race')));
  // h5bp's comment says worker_connections "Should be < worker_rlimit_nofile"; a proxied request holds two fds.
  const nofile = findings(report, 'nofile');
  assert.deepEqual(nofile.map((f) => f.level), ['fail', 'fail'], JSON.stringify(nofile));
  assert.ok(nofile.some((f) => f.what === 'a running nginx worker has an open-files limit of 8192 < 16000'), JSON.stringify(nofile));
  const configured = nofile.find((f) => /^nginx worker_rlimit_nofile 8192, worker_connections 8000: /.test(f.what));
  assert.ok(configured, JSON.stringify(nofile));
  assert.equal(configured.fix, 'set worker_rlimit_nofile 16000');
  // listen without backlog=: nginx's 511, whatever somaxconn allows.
  assert.deepEqual(levels(report, 'backlog'), ['warn']);
  assert.match(findings(report, 'backlog')[0].what, new RegExp(`^nginx listen 127\\.0\\.0\\.1:${stack.port} uses backlog 511 \\(nginx's default\\)`));
  assert.equal(code, 1);
});

// nginx 1.29.7 (stable 1.30) changed what an upstream block with no keep-alive lines
// does (https://nginx.org/en/CHANGES-1.30): the same site means a pool on 1.30 and
// none on 1.22. doctor reads the version from the nginx that runs (`nginx -V`).
test('nginx 1.30\'s defaults (sid\'s nginx): an upstream block with no keep-alive lines pools, HTTP/1.1, and keeps idle connections 60 s against Node\'s 5 s + 1 s: the race, with the block\'s line', { skip }, async (t) => {
  const { sid } = await ensureRootfsAll(['sid']);
  const stack = await startForeign(t, 'nginx-130-defaults', { unix: false, rootfs: sid });
  const { code, report } = doctor(stack);
  const version = /-V \(nginx (1\.\d+\.\d+)\)$/.exec(report.facts.read.find((r) => r.startsWith(`${stack.nginxBin} -V`)) || '');
  assert.ok(version && Number(version[1].split('.')[1]) >= 30, `doctor read sid's nginx: ${report.facts.read.join('; ')}`);
  assert.ok(report.facts.nginx.masterPid && fs.readlinkSync(`/proc/${report.facts.nginx.masterPid}/exe`).startsWith(sid), 'the master doctor read is the rootfs nginx');
  // The pool nginx keeps on its own, in the user's terms: no keepalive line, 32 local, HTTP/1.1, no Connection header.
  assert.deepEqual(levels(report, 'keepalive-pool'), ['ok']);
  assert.equal(findings(report, 'keepalive-pool')[0].what,
    `location / reuses upstream app connections (nginx ${version[1]}'s default pool: no keepalive line, keepalive 32 local, HTTP/1.1, Connection "")`);
  for (const id of ['keepalive-http', 'keepalive-connection']) {
    assert.ok(report.rules.evaluated.includes(id), id);
    assert.deepEqual(findings(report, id), [], `${id} holds with 1.30's defaults`);
  }
  // The race 1.30 made the default: nginx keeps idle connections 60 s, the app closes them after 5 s + 1 s.
  const race = findings(report, 'keepalive-race');
  assert.deepEqual(race.map((f) => f.level), ['fail'], JSON.stringify(race));
  assert.match(race[0].what, new RegExp(`^nginx ${version[1].replace(/\./g, '\\.')} keeps upstream app's connections with no keepalive line \\(from 1\\.29\\.7, stable 1\\.30: keepalive 32, keepalive_timeout 60s\\)`));
  const measured = /the app closes idle connections at (\d+) ms \(measured on 127\.0\.0\.1:(\d+): closed after \d+\.\d s idle\)/.exec(race[0].what);
  assert.ok(measured, race[0].what);
  assert.equal(measured[2], stack.target);
  assert.ok(Number(measured[1]) >= 5000 && Number(measured[1]) < 60000, race[0].what);
  assert.match(race[0].what, new RegExp(`nginx upstream app keeps them 60s \\(no keepalive_timeout in upstream app at ${stack.dir}/site\\.conf:7: nginx's default\\)`), 'the block the user opens');
  assert.match(race[0].fix, /^in the app, set server\.keepAliveTimeout above 60000 ms/);
  assert.equal(code, 1);
});

test('the same site on this machine\'s nginx (before 1.29.7): the upstream block with no keepalive line keeps no pool, so no race', { skip: skip || (compareVersions(nginxVersion() || '0.0.0', '1.29.7') < 0 ? false : 'this machine\'s nginx pools by default (1.29.7 or later)') }, async (t) => {
  const stack = await startForeign(t, 'nginx-130-defaults', { unix: true });
  const { code, report } = doctor(stack);
  assert.deepEqual(levels(report, 'keepalive-pool'), ['warn']);
  assert.match(findings(report, 'keepalive-pool')[0].what, /^upstream app has no keepalive directive: nginx 1\.\d+\.\d+ opens a connection per request \(from 1\.29\.7 a block pools by default\)$/);
  assert.ok(!levels(report, 'keepalive-race').includes('fail'), JSON.stringify(findings(report, 'keepalive-race')));
  t.diagnostic(`exit ${code}; findings: ${report.findings.filter((f) => f.level !== 'ok').map((f) => `${f.id} ${f.level}`).join(', ')}`);
});
