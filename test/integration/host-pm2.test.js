'use strict';
// PM2 cluster mode behind the rendered nginx, on the rendered Unix socket:
// 3 x `pm2 reload` under GETs and POSTs of 0..64 KB through nginx (the bodies
// load of test/faults/bodies.js against the hash app) fail no request, and every
// POST body reaches the app whole, once; the socket is 0660 (group from its setgid directory) after every
// reload; `pm2 delete` removes it. A daemon with the wrong umask is refused by
// the ecosystem file, naming the fix.
//
// PM2 is node_modules/.bin/pm2 with a private PM2_HOME (mkdtemp); its daemon is
// killed (`pm2 kill` on that PM2_HOME) in cleanup, so no global PM2 is touched.
// The load goes to nginx on 127.0.0.1 only.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const config = require('../../lib/config');
const { render } = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const bodies = require('../faults/bodies');
const hashApp = require('../fixtures/faults/hash-app');
const { record } = require('../faults/report');
const { doctorAt } = require('../faults/stack');

const run = promisify(execFile);
const PM2 = path.join(ROOT, 'node_modules/.bin/pm2');
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));
const skip = !fs.existsSync(PM2) ? 'pm2 is not installed (npm install)'
  : !NGINX ? 'nginx is not installed (apt-get install nginx)'
    : false;

const { until, runCommand } = require('../lib/util');

const CLI = path.join(ROOT, 'bin/tunekit.js');
const { freePorts } = require('../../lib/proc');



/** A port P on 127.0.0.1 with P + 1 free too (PM2's two instances serve metrics on P and P + 1), neither of `except`. */
async function freePortPair(except) {
  const net = require('node:net');
  const free = (port) => new Promise((resolve) => {
    const srv = net.createServer().once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
  for (;;) {
    const [p] = await freePorts(1, except);
    if (p < 65535 && !except.includes(p + 1) && await free(p + 1)) return p;
  }
}

function getText(url) {
  return new Promise((resolve, reject) => {
    const req = require('node:http').get(url, { timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function httpGet(opts) {
  return new Promise((resolve, reject) => {
    const req = require('node:http').get({ ...opts, path: '/', timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

// A fresh tree: nginx + app settings + the ecosystem file, rendered with
// --prefix, with <tree>/opt/tunekit-app/app pointing at this checkout's app/.
// The app is the hash app (test/fixtures/faults/hash-app.js), writing what it
// saw into <tree>/seen.
async function setUp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-pm2-'));
  const pm2Home = path.join(dir, 'pm2-home');
  const seenDir = path.join(dir, 'seen');
  const env = { ...process.env, PM2_HOME: pm2Home, FAULTS_SEEN_DIR: seenDir };
  delete env.TUNEKIT_CONFIG;
  const ctx = { dir, env, pm2Home, seenDir, nginx: null };
  // Registered first: a set-up that fails half-way leaves nothing behind either.
  t.after(async () => {
    if (ctx.nginx && ctx.nginx.exitCode === null) {
      ctx.nginx.kill('SIGTERM');
      await new Promise((r) => { ctx.nginx.once('exit', r); setTimeout(r, 5000); });
    }
    await run(PM2, ['kill'], { env, timeout: 30000 }).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  });
  fs.mkdirSync(pm2Home);
  const [port, statusPort] = await freePorts(2);
  const metricsPort = await freePortPair([port, statusPort]);
  const vars = config.resolve({
    set: [
      'tunekit_process_manager=pm2',
      'tunekit_app_workers=2',
      `tunekit_app_module=${path.join(ROOT, 'test/fixtures/faults/hash-app.js')}`,
      'tunekit_nginx_listen_address=127.0.0.1',
      `tunekit_nginx_listen_port=${port}`,
      `tunekit_nginx_status_port=${statusPort}`,
      'tunekit_nginx_worker_processes=1',
      // Instance I serves its metrics on this port + I.
      `tunekit_metrics_listen=tcp:127.0.0.1:${metricsPort}`,
      // autocannon ignores nginx's "Connection: close" at the client keepalive_requests
      // limit and may see ECONNRESET there; that is not what this test measures.
      'tunekit_nginx_keepalive_requests=10000000',
    ],
  });
  const { vars: pv } = render(vars, dir, { prefix: true, layers: ['nginx', 'app', 'pm2'] });
  fs.symlinkSync(path.join(ROOT, 'app'), path.join(pv.tunekit_app_install_dir, 'app'));
  // The socket directory: 0750 plus setgid, so the socket PM2's daemon binds
  // takes the directory's group from birth (here "nogroup": any group but the
  // daemon's own proves the point).
  const sockDir = pv.tunekit_socket_dir;
  fs.chownSync(sockDir, -1, 65534);
  fs.chmodSync(sockDir, 0o2750);
  Object.assign(ctx, { port, metricsPort, vars, pv, eco: path.join(pv.tunekit_app_install_dir, 'ecosystem.config.js') });
  return ctx;
}

// `pm2 <args>` started under a umask: a daemon launched here inherits it.
function pm2(ctx, args, umask = '0117') {
  return run('sh', ['-c', `umask ${umask} && exec "$0" "$@"`, PM2, ...args], { env: ctx.env, timeout: 60000 });
}

async function jlist(ctx) {
  const { stdout } = await run(PM2, ['jlist'], { env: ctx.env, timeout: 30000 });
  return JSON.parse(stdout.slice(stdout.indexOf('[')));
}

function startNginx(ctx) {
  const conf = path.join(ctx.pv.tunekit_nginx_conf_dir, 'nginx.conf');
  ctx.nginx = spawn(NGINX, ['-c', conf, '-e', path.join(ctx.dir, 'nginx-startup.log'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  ctx.nginx.stderr.on('data', (d) => { err += d; });
  return until('nginx to answer 200 on 127.0.0.1', async () => {
    if (ctx.nginx.exitCode !== null) throw new Error(`nginx exited ${ctx.nginx.exitCode}: ${err}`);
    return (await httpGet({ host: '127.0.0.1', port: ctx.port })) === 200;
  });
}

test('3 x pm2 reload under GETs and POSTs of 0..64 KB through nginx: 0 failed, every body whole and once; socket 0660 after each; pm2 delete removes it', { skip, timeout: 300000 }, async (t) => {
  const ctx = await setUp(t);
  const sock = ctx.pv.tunekit_socket_path;
  const name = ctx.vars.tunekit_app_name;

  await pm2(ctx, ['start', ctx.eco]);
  await until('the socket to answer', async () => (await httpGet({ socketPath: sock })) === 200);
  const born = fs.statSync(sock);
  assert.equal(born.mode & 0o7777, 0o660, 'mode 0660 from birth (the daemon\'s umask)');
  assert.equal(born.gid, 65534, 'group of the setgid directory from birth');
  await startNginx(ctx);

  const before = (await jlist(ctx)).filter((p) => p.name === name);
  assert.equal(before.length, 2, 'two instances in cluster mode');
  assert.ok(before.every((p) => p.pm2_env.exec_mode === 'cluster_mode'));
  // The app's own umask is 0007 again (app/pm2/worker-umask.js), not the daemon's 0117.
  for (const p of before) {
    assert.match(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'), /^Umask:\s+0007$/m);
  }

  // Bounded load: stopped once the reloads are done, or after 120 s.
  const started = Date.now();
  let done = false;
  const live = {};
  const connections = 12;
  const load = bodies.load(`http://127.0.0.1:${ctx.port}/`, () => done || Date.now() - started > 120_000, { connections, live });
  let pids = before.map((p) => p.pid).sort();
  try {
    for (let i = 1; i <= 3; i++) {
      // Each reload goes out once the load flows (a request a connection finished since the last one).
      await bodies.flowing(live, `before reload ${i}`, connections);
      // The second reload goes through the ecosystem file, whose stale-socket
      // check must leave the live socket alone; the third is `tunekit reload`,
      // which finds PM2's daemon on the app.json's socket and runs pm2 reload.
      if (i === 3) {
        const r = await runCommand(process.execPath, [CLI, 'reload', '--app-config', ctx.pv.tunekit_app_config_path], { env: ctx.env, timeoutMs: 120000 });
        assert.equal(r.code, 0, r.out);
        assert.match(r.stdout, new RegExp(`^tunekit reload: PM2 app ${name} \\(PM2_HOME ${ctx.pm2Home}\\) reloaded \\(\\d+\\.\\d s\\)\\n$`));
      } else {
        await pm2(ctx, ['reload', i === 2 ? ctx.eco : name]);
      }
      const after = (await jlist(ctx)).filter((p) => p.name === name);
      const now = after.map((p) => p.pid).sort();
      assert.equal(after.length, 2);
      assert.ok(after.every((p) => p.pm2_env.status === 'online'), `reload ${i}: all online`);
      assert.ok(now.every((pid) => !pids.includes(pid)), `reload ${i} replaced every worker (${pids} -> ${now})`);
      pids = now;
      const st = fs.statSync(sock);
      assert.equal((st.mode & 0o7777).toString(8), '660', `socket mode after reload ${i}`);
      assert.equal(st.gid, 65534, `socket group after reload ${i}`);
      assert.equal(st.ino, born.ino, `reload ${i} kept the same socket (the daemon holds it)`);
      assert.equal(st.birthtimeMs, born.birthtimeMs, `reload ${i} did not re-create the socket`);
    }
    await bodies.flowing(live, 'after the last reload', connections);
  } finally {
    done = true;
  }
  const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
  const c = bodies.summary(await load, hashApp.seen(ctx.seenDir));
  t.diagnostic(`${seconds} s: ${JSON.stringify(c)}`);
  const errorLog = fs.readFileSync(ctx.pv.tunekit_nginx_error_log_path, 'utf8');
  bodies.assertWhole(c, '3 x pm2 reload', errorLog);
  // PM2 replaces the app's workers only; nginx keeps every client connection, so
  // nothing the client sends is reset and nothing needs a retry.
  assert.equal(c.getRetried + c.postRetried, 0, 'no request needed a retry');
  // nginx logged nothing about the reloads but, rarely, a GET it sent on a pooled
  // connection as the old worker closed it, and sent again (bodies.errorLines).
  const { buffered, retriedGets, other } = bodies.errorLines(errorLog);
  assert.deepEqual(other, [], 'nginx logged nothing about the reloads');
  const fails = doctorAt(path.join(ctx.pv.tunekit_nginx_conf_dir, 'nginx.conf'), ctx.pv.tunekit_app_config_path)
    .filter((f) => f.level === 'fail').map((f) => f.id);
  record('restart-bodies-pm2', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/integration/host-pm2.test.js',
    restarts: '3 x pm2 reload (PM2 cluster mode, 2 instances)',
    connections: 12,
    seconds,
    ...bodies.figures(c),
    errorLogLevel: ctx.pv.tunekit_nginx_error_log_level,
    errorLogBuffered: buffered,
    errorLogRetriedGets: retriedGets,
    errorLogOther: other.length,
    doctorFails: fails,
  });

  // `tunekit logs` shows PM2's log of the app: its workers' lines.
  const logs = await runCommand(process.execPath, [CLI, 'logs', '--app-config', ctx.pv.tunekit_app_config_path, '-n', '5'], { env: ctx.env, timeoutMs: 60000 });
  assert.equal(logs.code, 0, logs.out);
  assert.match(logs.stdout, new RegExp(`${ctx.pm2Home}/logs/${name}-out`));

  await pm2(ctx, ['delete', name]);
  await until('pm2 delete to remove the socket', () => !fs.existsSync(sock), 15000);
});

test('the ecosystem file refuses a daemon whose umask would give the socket the wrong mode', { skip, timeout: 120000 }, async (t) => {
  const ctx = await setUp(t);
  await assert.rejects(pm2(ctx, ['start', ctx.eco], '0022'), (err) => {
    const out = `${err.stdout}${err.stderr}`;
    assert.match(out, /the socket would be created with mode 0755, not 0660: .* has umask 0022/);
    assert.match(out, /umask 0117 && pm2 start/);
    return true;
  });
  assert.equal(fs.existsSync(ctx.pv.tunekit_socket_path), false, 'nothing was started');
});

test('a socket left by a SIGKILLed daemon is removed at the next start (connect refused), then served again', { skip, timeout: 120000 }, async (t) => {
  const ctx = await setUp(t);
  const sock = ctx.pv.tunekit_socket_path;
  await pm2(ctx, ['start', ctx.eco]);
  await until('the socket to answer', async () => (await httpGet({ socketPath: sock })) === 200);
  // Our own daemon (private PM2_HOME), killed the way a crash would.
  const daemon = Number(fs.readFileSync(path.join(ctx.pm2Home, 'pm2.pid'), 'utf8'));
  process.kill(daemon, 'SIGKILL');
  await until('the daemon to be gone', () => !fs.existsSync(`/proc/${daemon}`) || /\) Z /.test(fs.readFileSync(`/proc/${daemon}/stat`, 'utf8')));
  await until('its workers to be gone', async () => {
    await assert.rejects(httpGet({ socketPath: sock }), /ECONNREFUSED/);
    return true;
  });
  assert.ok(fs.existsSync(sock), 'the stale socket file is still there');

  const { stderr } = await pm2(ctx, ['start', ctx.eco]);
  assert.match(stderr, /removed the stale socket .*connect\(\) was refused/);
  await until('the new daemon to serve', async () => (await httpGet({ socketPath: sock })) === 200);
  assert.equal(fs.statSync(sock).mode & 0o777, 0o660);
});

/** The pids and worker labels an instance's endpoint reports (tunekit_app_info lines). */
async function scrapeInstance(ctx, i) {
  const { status, body } = await getText(`http://127.0.0.1:${ctx.metricsPort + i}/metrics`);
  assert.equal(status, 200);
  const info = [...body.matchAll(/^tunekit_app_info\{worker="(\d+)",pid="(\d+)"/gm)].map((m) => ({ worker: m[1], pid: Number(m[2]) }));
  const served = [...body.matchAll(/^tunekit_app_requests_total\{[^}]*class="2xx",connection="(new|reused)"\} (\d+)$/gm)]
    .reduce((sum, m) => sum + Number(m[2]), 0);
  return { body, info, served };
}

test('metrics under PM2: instance I serves its own on the base port + I, in the text format promtool reads; pm2 reload hands each port to the new instance', { skip, timeout: 180000 }, async (t) => {
  const ctx = await setUp(t);
  const sock = ctx.pv.tunekit_socket_path;
  const name = ctx.vars.tunekit_app_name;
  await pm2(ctx, ['start', ctx.eco]);
  await until('the socket to answer', async () => (await httpGet({ socketPath: sock })) === 200);
  for (let k = 0; k < 20; k++) assert.equal(await httpGet({ socketPath: sock }), 200);

  const check = async (label) => {
    const procs = (await jlist(ctx)).filter((p) => p.name === name);
    const byInstance = new Map(procs.map((p) => [p.pm2_env.NODE_APP_INSTANCE, p.pid]));
    const scraped = [];
    for (const i of [0, 1]) {
      // Until the instance's port answers with its own pid (during a reload the
      // old and the new process of instance I share the port through PM2's daemon).
      const s = await until(`${label}: instance ${i} on port ${ctx.metricsPort + i}`, async () => {
        const r = await scrapeInstance(ctx, i);
        return r.info.length === 1 && r.info[0].pid === byInstance.get(i) ? r : null;
      });
      assert.equal(s.info[0].worker, String(i + 1), `${label}: instance ${i} is worker ${i + 1}`);
      assert.doesNotMatch(s.body, /tunekit_app_worker_restarts_total/, 'no primary of ours: no primary counters');
      const lint = await runCommand('/usr/bin/promtool', ['check', 'metrics'], { input: s.body, timeoutMs: 30000 });
      assert.equal(lint.code, 0, `promtool check metrics: ${lint.out}`);
      scraped.push(s);
    }
    return scraped;
  };
  const first = await check('after start');
  // `tunekit status` reads PM2's instances from app.json's base port upward: a row each, with its pid.
  await startNginx(ctx);
  const st = await runCommand(process.execPath, [CLI, 'status', '--json', '--app-config', ctx.pv.tunekit_app_config_path,
    '--nginx-conf', path.join(ctx.pv.tunekit_nginx_conf_dir, 'nginx.conf')], { env: ctx.env, timeoutMs: 60000 });
  assert.equal(st.code, 0, st.out);
  const seen = JSON.parse(st.stdout);
  assert.equal(seen.app.runBy, 'pm2');
  assert.deepEqual(seen.workers.map((w) => w.pid).sort(), first.map((s) => s.info[0].pid).sort());
  assert.equal(seen.app.restarts, null, 'no primary of ours: pm2 ls has the restarts');
  assert.equal(first[0].served + first[1].served, 20 + 1, 'the two instances together counted every request sent to the socket');
  await pm2(ctx, ['reload', name]);
  const second = await check('after pm2 reload');
  assert.ok(second.every((s, i) => s.info[0].pid !== first[i].info[0].pid), 'each port now reports the new instance');
  await pm2(ctx, ['delete', name]);
});
