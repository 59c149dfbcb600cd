'use strict';
// nginx 1.29.7 (stable 1.30) keeps upstream connections alive by default: measured
// with Debian's own nginx binaries (the cached root filesystems, chrooted in a
// private mount and PID namespace; test/lib/nspawn.js runInRootfs) in front of
// Node processes of this machine, on loopback and Unix sockets in a scratch dir:
// - sid's nginx 1.30 serves 5 requests through a bare `upstream { server unix:…; }`
//   over 1 upstream connection, and 5 over 5 through an implicit upstream
//   (`proxy_pass http://unix:…:` or `http://127.0.0.1:PORT`); bookworm's 1.22: 5 over 5
//   everywhere, HTTP/1.0 with "Connection: close";
// - a stock Node `http.createServer` (one process, keepAliveTimeout 5 s + its 1 s
//   buffer) behind that bare block: the keep-alive race's load (test/faults/
//   race-load.js) loses POSTs to 502 through sid's nginx 1.30, none through
//   bookworm's 1.22 (no pool);
// - `tunekit doctor`, run on sid against that nginx.conf, measures the app's idle
//   close over its socket and says first that nginx 1.30's default pool made the
//   race the default.
// The root filesystems are built by the checks lane when missing (ensureRootfsAll).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');
const { ROOT } = require('../../lib/template');
const { freePorts } = require('../../lib/proc');
const { ensureRootfsAll, runInRootfs } = require('../lib/nspawn');
const { until } = require('../lib/util');
const { pacedLoad, RACE_LOG } = require('../faults/race-load');

const STOCK_APP = path.join(ROOT, 'test/fixtures/stock/node-app.js');
const SUITES = { sid: '1.30', bookworm: '1.22' };
const REQUESTS = 5;
const ROUNDS = 10; // 160 POSTs, as measured by hand; the racing nginx's load also stops at its first lost POST past these
// Node closes an idle connection keepAliveTimeout (its default, 5 s) + 1 s after the
// last response from 20.18 (this machine's Node is checked below).
const NODE_CLOSE_MS = 5000 + 1000;
const versions = {};

// What a test started, stopped in the reverse order after it (node:test runs
// t.after hooks in the order added: the scratch dir must go after the servers in it).
function cleanups(t) {
  const list = [];
  t.after(async () => {
    for (const fn of list.reverse()) await fn();
  });
  return (fn) => list.push(fn);
}

function scratch(later, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  later(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An nginx.conf as a user writes it by hand: an upstream block, locations with proxy_pass, nothing about keep-alive. */
function nginxConf(dir, port, upstream, locations) {
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((k) => `    ${k}_temp_path ${dir}/${k};`).join('\n');
  // user root: the cached root filesystem's own directory is mode 0700 (debootstrap's),
  // so a worker of another user cannot resolve a path inside the chroot at all.
  return `user root;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 256; }
http {
    access_log off;
${temp}
${upstream}
    server {
        listen 127.0.0.1:${port};
        location /nginx-up { return 204; }
${locations.map((l) => `        ${l}`).join('\n')}
    }
}
`;
}

/**
 * nginx of `suite` running `conf` until the test ends: started inside the
 * rootfs, which waits for the stop file and then has nginx quit (its PID
 * namespace is the script's; a SIGKILL of the script on its time bound ends it too).
 */
async function startNginx(later, suite, dir, conf, port) {
  const stop = path.join(dir, 'stop');
  const script = [
    `nginx -c ${conf} || exit 3`,
    `while [ ! -e ${stop} ]; do sleep 0.1; done`,
    `nginx -c ${conf} -s quit`,
    `while [ -e ${dir}/nginx.pid ]; do sleep 0.1; done`,
  ].join('\n');
  const done = runInRootfs(suite, script, { binds: { [dir]: dir }, timeoutMs: 240_000 });
  later(async () => {
    fs.writeFileSync(stop, '');
    const r = await done;
    assert.equal(r.code, 0, `${suite} nginx ended: ${r.stderr}`);
  });
  await until(`${suite}'s nginx on 127.0.0.1:${port}`, () => Promise.race([
    done.then((r) => { throw new Error(`nginx exited: ${r.stderr}`); }),
    get(`http://127.0.0.1:${port}/nginx-up`).then(() => true, () => false),
  ]), 30_000);
}

function get(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); }).on('error', reject);
  });
}

/** A Node server on `listen` counting connections, requests, HTTP versions and Connection headers; closed after the test. */
async function counter(later, listen) {
  const c = { connections: 0, requests: 0, versions: {}, connection: {} };
  const server = http.createServer((req, res) => {
    c.requests += 1;
    c.versions[req.httpVersion] = (c.versions[req.httpVersion] || 0) + 1;
    const h = req.headers.connection || '(none)';
    c.connection[h] = (c.connection[h] || 0) + 1;
    res.end('ok\n');
  });
  server.keepAliveTimeout = 60_000; // the count must not depend on Node closing first
  server.on('connection', () => { c.connections += 1; });
  await new Promise((resolve) => server.listen(listen, resolve));
  if (typeof listen === 'string') fs.chmodSync(listen, 0o666);
  later(() => { server.closeAllConnections(); server.close(); });
  return c;
}

/** The stock app (test/fixtures/stock/node-app.js) as a child process on `socket`; stopped by its pid after the test. */
async function stockApp(later, socket) {
  const child = spawn(process.execPath, [STOCK_APP, socket], { stdio: ['ignore', 'pipe', 'inherit'] });
  later(() => { if (child.exitCode === null) child.kill('SIGTERM'); });
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve);
    child.once('exit', (code) => reject(new Error(`the stock app exited (${code}) before it listened`)));
  });
  return child;
}

test.before(async () => {
  await ensureRootfsAll(Object.keys(SUITES));
  for (const suite of Object.keys(SUITES)) {
    const r = await runInRootfs(suite, 'nginx -v 2>&1');
    assert.equal(r.code, 0, `${suite}: ${r.stderr}`);
    versions[suite] = /nginx\/(\d+\.\d+\.\d+)/.exec(r.stdout)[1];
    assert.ok(versions[suite].startsWith(`${SUITES[suite]}.`), `${suite} carries nginx ${SUITES[suite]}: ${versions[suite]}`);
  }
  process.stderr.write(`nginx: ${JSON.stringify(versions)}; Node here: ${process.versions.node}\n`);
});

for (const suite of Object.keys(SUITES)) {
  test(`${suite}'s nginx: ${REQUESTS} requests through a bare upstream block, an implicit unix: upstream and an implicit host:port`, { timeout: 120_000 }, async (t) => {
    const later = cleanups(t);
    const dir = scratch(later, `tunekit-pool-${suite}-`);
    const [port, appPort] = await freePorts(2);
    const block = await counter(later, path.join(dir, 'block.sock'));
    const implicitUnix = await counter(later, path.join(dir, 'implicit.sock'));
    const implicitTcp = await counter(later, { host: '127.0.0.1', port: appPort });
    const conf = path.join(dir, 'nginx.conf');
    fs.writeFileSync(conf, nginxConf(dir, port, `    upstream app { server unix:${dir}/block.sock; }`, [
      'location /block { proxy_pass http://app; }',
      `location /implicit-unix { proxy_pass http://unix:${dir}/implicit.sock:; }`,
      `location /implicit-tcp { proxy_pass http://127.0.0.1:${appPort}; }`,
    ]));
    await startNginx(later, suite, dir, conf, port);
    for (const p of ['block', 'implicit-unix', 'implicit-tcp']) {
      for (let i = 0; i < REQUESTS; i++) assert.equal(await get(`http://127.0.0.1:${port}/${p}`), 200, `${suite} /${p}`);
    }
    t.diagnostic(`${suite} nginx ${versions[suite]}: ${JSON.stringify({ block, implicitUnix, implicitTcp })}`);
    const pooled = suite === 'sid';
    assert.equal(block.requests, REQUESTS);
    assert.equal(block.connections, pooled ? 1 : REQUESTS, `bare upstream block: ${block.connections} connections for ${REQUESTS} requests`);
    for (const [name, c] of [['implicit unix:', implicitUnix], ['implicit host:port', implicitTcp]]) {
      assert.equal(c.connections, REQUESTS, `${name}: a connection per request on every version`);
    }
    for (const c of [block, implicitUnix, implicitTcp]) {
      assert.deepEqual(c.versions, { [pooled ? '1.1' : '1.0']: REQUESTS });
      assert.deepEqual(c.connection, { [pooled ? '(none)' : 'close']: REQUESTS });
    }
  });
}

test("a stock Node app behind a bare upstream block: sid's nginx 1.30 loses POSTs to the race, bookworm's 1.22 none; doctor on sid says so first", { timeout: 420_000 }, async (t) => {
  assert.ok(Number(process.versions.node.split('.')[0]) >= 20, `Node here (${process.versions.node}) adds the 1 s buffer NODE_CLOSE_MS counts`);
  const later = cleanups(t);
  const runs = {};
  for (const suite of ['sid', 'bookworm']) {
    const dir = scratch(later, `tunekit-race-${suite}-`);
    const [port] = await freePorts(1);
    await stockApp(later, path.join(dir, 'app.sock'));
    const conf = path.join(dir, 'nginx.conf');
    fs.writeFileSync(conf, nginxConf(dir, port, `    upstream app { server unix:${dir}/app.sock; }`, ['location / { proxy_pass http://app; }']));
    await startNginx(later, suite, dir, conf, port);
    // The racing nginx (sid) runs until a POST is lost; bookworm gets as many rounds.
    const load = await pacedLoad(`http://127.0.0.1:${port}/`, { closeAtMs: NODE_CLOSE_MS, rounds: suite === 'sid' ? ROUNDS : runs.sid.load.rounds, untilLost: suite === 'sid' });
    const raceLines = fs.readFileSync(path.join(dir, 'error.log'), 'utf8').split('\n').filter((l) => RACE_LOG.test(l));
    runs[suite] = { dir, conf, load, raceLines };
    t.diagnostic(`${suite} nginx ${versions[suite]}: ${load.rounds} rounds; POST ${JSON.stringify(load.post)}; GET ${JSON.stringify(load.get)}; race lines in error.log: ${raceLines.length}${raceLines[0] ? ` (${raceLines[0].replace(/^.*?\[error\] \d+#\d+: \*\d+ /, '').replace(/, client:.*$/, '')})` : ''}`);
    if (suite === 'sid') {
      // doctor on that host, as its root would run it: sid's Node, sid's nginx -T, the live socket.
      const r = await runInRootfs('sid', `node /tmp/kit/bin/tunekit.js doctor --json --nginx-conf ${conf}`, { binds: { [ROOT]: '/tmp/kit', [dir]: dir }, timeoutMs: 60_000 });
      assert.ok(r.stdout, `doctor printed JSON (exit ${r.code}; stderr: ${r.stderr})`);
      runs.sid.doctor = JSON.parse(r.stdout).findings;
    }
  }
  const { sid, bookworm } = runs;
  assert.ok(sid.load.post.status[502] > 0, `nginx ${versions.sid} answered POSTs 502: ${JSON.stringify(sid.load.post)}`);
  assert.deepEqual(Object.keys(sid.load.post.status).filter((s) => s !== '200' && s !== '502'), [], 'a lost POST is a 502, nothing else');
  assert.ok(sid.raceLines.length >= sid.load.post.status[502], `nginx logged each lost POST (${sid.raceLines.length} lines)`);
  assert.deepEqual(bookworm.load.post.status, { 200: bookworm.load.post.sent }, `nginx ${versions.bookworm}: every POST answered`);
  assert.deepEqual(bookworm.load.get.status, { 200: bookworm.load.get.sent });
  assert.equal(bookworm.raceLines.length, 0);

  const race = sid.doctor.filter((f) => f.id === 'keepalive-race');
  t.diagnostic(`doctor on sid: ${race.map((f) => `${f.level}: ${f.what}`).join(' | ')}`);
  assert.equal(race.length, 1, JSON.stringify(sid.doctor, null, 1));
  // The app has no app.json and no /healthz: doctor measures its idle close over the socket (lib/probe.js).
  assert.equal(race[0].level, 'fail');
  assert.match(race[0].what, new RegExp(`^nginx ${versions.sid.replace(/\./g, '\\.')} keeps upstream app's connections with no keepalive line \\(from 1\\.29\\.7, stable 1\\.30: keepalive 32, keepalive_timeout 60s\\): nginx 1\\.30 made this race the default`));
  assert.match(race[0].what, /the app closes idle connections at \d+ ms \(.*measured/);
  const pool = sid.doctor.find((f) => f.id === 'keepalive-pool');
  assert.equal(pool.level, 'ok');
  assert.match(pool.what, /default pool: no keepalive line, keepalive 32 local, HTTP\/1\.1, Connection ""/);
});
