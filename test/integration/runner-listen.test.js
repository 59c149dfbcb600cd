'use strict';
// Listen where asked, or stop. The runner's primary binds without listening, and
// libuv defers a TCP bind's EADDRINUSE to the listen() that follows: a primary that
// did not check its bind handed its workers a socket that never bound, and their
// listen() bound a random port on every interface while the runner logged `ready`
// (app/address.js). Here, with real processes on loopback:
//   - an address another process holds (a TCP port on 127.0.0.1 or ::1, a live Unix
//     socket), for every strategy, under a PM2-shaped primary and under PM2 itself:
//     exit 1, one line naming the address and the process that holds it, no worker
//     started, nothing of the runner's left listening, the other process untouched;
//   - a port below 1024 as an ordinary user: one line naming root or
//     CAP_NET_BIND_SERVICE and the fix;
//   - an inherited TCP socket that is not bound (fd:3): refused, not listened on;
//   - a free address: `listen` says where the workers accept, read back from the
//     kernel, before `ready`, and the kernel shows the runner there and nowhere else.
// Figures (how long each refusal took) go to the fault suite's report
// (TUNEKIT_FAULTS_REPORT, docs/reliability.md); no timing is asserted.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { promisify } = require('node:util');
const h = require('../fixtures/runner/harness');
const { record } = require('../faults/report');
const { users } = require('../../lib/accounts');
const { alive } = require('../../lib/proc');
const { sleep, until } = require('../lib/util');

const group = h.someGroup();
// A bound on the wait for an exit, generous for a loaded machine; not a timing assert.
const EXIT_WITHIN_MS = 30000;
const COMMAND = 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/integration/runner-listen.test.js';
const PM2 = path.join(h.ROOT, 'node_modules/.bin/pm2');

/**
 * Another process holding an address: { kind: 'tcp', host } listens on a port the
 * kernel picks, { kind: 'unix', path } at a path. Resolves { pid, port } once it listens.
 */
async function occupant(t, where) {
  const code = where.kind === 'tcp'
    ? `const s = require('node:net').createServer((c) => c.end('occupant\\n')).listen(0, ${JSON.stringify(where.host)}, () => console.log(JSON.stringify({ port: s.address().port })));`
    : `require('node:net').createServer((c) => c.on('error', () => {}).end('occupant\\n')).listen(${JSON.stringify(where.path)}, () => console.log('{}'));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  const line = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(String(d)));
    child.once('exit', (c) => reject(new Error(`the occupant exited ${c}`)));
  });
  return { pid: child.pid, ...JSON.parse(line) };
}

/** The listening sockets (TCP, Unix) of these processes, as `ss -lp` lists them. */
function listeningOf(pids) {
  const out = spawnSync('ss', ['-H', '-l', '-t', '-x', '-n', '-p'], { encoding: 'utf8' }).stdout;
  return out.split('\n').filter((line) => pids.some((pid) => new RegExp(`pid=${pid}[,)]`).test(line)));
}

/**
 * A runner that must refuse: its exit, awaited within EXIT_WITHIN_MS, and the
 * ms from its start to its exit (a figure, never asserted).
 */
async function refused(t, options) {
  const started = Date.now();
  const r = h.start(t, options);
  const exit = await Promise.race([r.exited, sleep(EXIT_WITHIN_MS).then(() => null)]);
  assert.ok(exit, `the runner did not exit within ${EXIT_WITHIN_MS} ms; its log: ${r.stdout}`);
  return { r, exit, ms: Date.now() - started };
}

/**
 * What every refusal of a taken address shows: exit 1, one line on stderr (matching
 * `line`), no worker started, none of its processes listening anywhere.
 */
function assertRefused({ r, exit }, line) {
  assert.deepEqual(exit, { code: 1, signal: null }, `exit 1; stderr: ${r.stderr}`);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line on stderr: ${r.stderr}`);
  assert.match(lines[0], line);
  for (const event of ['worker-start', 'ready']) assert.equal(r.events.filter((e) => e.event === event).length, 0, `no ${event}`);
  assert.deepEqual(listeningOf([r.pid, ...r.workerPids]), [], 'nothing of the runner\'s listens');
  return lines[0];
}

const figures = [];
test.after(() => {
  if (figures.length) record('listen-taken', { command: COMMAND, cases: figures });
});

// ---- a TCP port another process holds ----------------------------------------------

for (const [host, text] of [['127.0.0.1', (p) => `tcp:127.0.0.1:${p}`], ['::1', (p) => `tcp:[::1]:${p}`]]) {
  for (const strategy of ['shared', 'round-robin']) {
    test(`${text('PORT')} held by another process, strategy ${strategy}: exit 1, one line naming it and its holder, nothing left listening`, async (t) => {
      const occ = await occupant(t, { kind: 'tcp', host });
      const listen = text(occ.port);
      const run = await refused(t, { args: ['--listen', listen, '--workers', '2', '--strategy', strategy] });
      const line = assertRefused(run, new RegExp(`^tunekit: ${listen.replace(/[[\]]/g, '\\$&')} is already in use, held by pid ${occ.pid} \\(\\S*node -e .*\\): stop that process or choose another port`));
      assert.equal(await h.hello({ host, port: occ.port }), 'occupant\n', 'the other process still answers');
      figures.push({ form: `${listen.replace(String(occ.port), 'PORT')}, ${strategy}`, code: run.exit.code, ms: run.ms, line: line.replace(String(occ.port), 'PORT').replace(/held by pid \d+ \(.*?\)(?=[:;] )/, 'held by pid N (node -e ...)') });
    });
  }
}

// ---- a live Unix socket another process holds ------------------------------------

for (const strategy of ['shared', 'round-robin', 'per-worker']) {
  test(`a live Unix socket held by another process, strategy ${strategy}: exit 1, one line naming its holder, the socket untouched`, async (t) => {
    const sock = path.join(h.tmpDir(t), 'app.sock');
    // per-worker binds PATH.1 and PATH.2: the second one is taken.
    const taken = strategy === 'per-worker' ? `${sock}.2` : sock;
    const occ = await occupant(t, { kind: 'unix', path: taken });
    const ino = fs.lstatSync(taken).ino;
    const run = await refused(t, { args: ['--listen', `unix:${sock}`, '--workers', '2', '--strategy', strategy, '--socket-group', group.name] });
    const line = assertRefused(run, new RegExp(`^tunekit: a server is already answering on ${taken}, held by pid ${occ.pid} \\(\\S*node -e .*\\); refusing to start a second one: stop that process, or choose another socket path$`));
    assert.equal(fs.lstatSync(taken).ino, ino, 'its socket file is untouched');
    assert.equal(await h.hello(taken), 'occupant\n', 'and still answers');
    assert.deepEqual(fs.readdirSync(path.dirname(sock)), [path.basename(taken)], 'the runner left no file of its own');
    figures.push({ form: `unix:PATH, ${strategy}`, code: run.exit.code, ms: run.ms, line: line.replaceAll(path.dirname(sock), 'DIR').replace(/held by pid \d+ \(.*?\)(?=[:;] )/, 'held by pid N (node -e ...)') });
  });
}

// ---- PM2's shape: Node's cluster in another primary binds ------------------------

test('tcp:127.0.0.1:PORT held by another process, under a foreign cluster primary (PM2\'s shape): each worker exits 1 with one line naming the holder; nothing listens', async (t) => {
  const occ = await occupant(t, { kind: 'tcp', host: '127.0.0.1' });
  const config = h.writeConfig(h.tmpDir(t), { listen: `tcp:127.0.0.1:${occ.port}` });
  const primary = spawn(process.execPath, [path.join(h.FIXTURES, 'foreign-primary.js'), config, '2'], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => primary.kill('SIGKILL'));
  let stderr = '';
  primary.stderr.on('data', (d) => { stderr += d; });
  const line = new RegExp(`^tunekit: tcp:127\\.0\\.0\\.1:${occ.port} is already in use, held by pid ${occ.pid} \\(\\S*node -e .*\\): stop that process or choose another port`);
  await until('both workers to say why they cannot listen', () => stderr.split('\n').filter((l) => line.test(l)).length === 2, EXIT_WITHIN_MS, 50);
  assert.deepEqual(stderr.trimEnd().split('\n').filter((l) => !line.test(l)), [], 'nothing else on stderr');
  assert.deepEqual(listeningOf([primary.pid]), [], 'the foreign primary holds nothing');
  assert.equal(await h.hello({ host: '127.0.0.1', port: occ.port }), 'occupant\n');
});

test('tcp:127.0.0.1:PORT held by another process, under PM2 cluster mode: the instances exit 1 with one line naming the holder; PM2 listens on no port',
  { skip: fs.existsSync(PM2) ? false : 'pm2 is not installed (npm ci)', timeout: 120000 }, async (t) => {
    // Its own directory, removed only once PM2's daemon is gone: `pm2 kill` reaches the
    // daemon through PM2_HOME, so a directory removed first would leave it running.
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'tkr-pm2-'));
    const env = { ...process.env, PM2_HOME: path.join(dir, 'pm2-home') };
    delete env.TUNEKIT_CONFIG;
    const pm2 = (...args) => promisify(execFile)(PM2, args, { env, timeout: 60000 });
    t.after(async () => {
      let daemon = null;
      try {
        daemon = Number(fs.readFileSync(path.join(env.PM2_HOME, 'pm2.pid'), 'utf8'));
      } catch { /* never started */ }
      await pm2('kill').catch(() => {});
      if (daemon && alive(daemon)) process.kill(daemon, 'SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const occ = await occupant(t, { kind: 'tcp', host: '127.0.0.1' });
    // PM2 passes its instances the environment it is started with.
    env.TUNEKIT_CONFIG = h.writeConfig(dir, { listen: `tcp:127.0.0.1:${occ.port}` });
    await pm2('start', path.join(h.ROOT, 'app/worker.js'), '--name', 'tk-taken', '-i', '2', '--no-autorestart', '--merge-logs',
      '--error', path.join(dir, 'err.log'), '--output', path.join(dir, 'out.log'));
    const line = new RegExp(`^tunekit: tcp:127\\.0\\.0\\.1:${occ.port} is already in use, held by pid ${occ.pid} \\(\\S*node -e .*\\): stop that process or choose another port`, 'm');
    const errLog = () => (fs.existsSync(path.join(dir, 'err.log')) ? fs.readFileSync(path.join(dir, 'err.log'), 'utf8') : '');
    await until('the instances to say why they cannot listen', () => errLog().split('\n').filter((l) => line.test(l)).length >= 2, EXIT_WITHIN_MS, 100);
    const { stdout } = await pm2('jlist');
    const apps = JSON.parse(stdout.slice(stdout.indexOf('['))).filter((a) => a.name === 'tk-taken');
    assert.equal(apps.length, 2);
    for (const a of apps) assert.equal(a.pm2_env.status, 'stopped', 'exited and, with --no-autorestart, not started again');
    const daemon = Number(fs.readFileSync(path.join(env.PM2_HOME, 'pm2.pid'), 'utf8'));
    // Its own RPC sockets (PM2_HOME/rpc.sock, pub.sock) aside.
    assert.deepEqual(listeningOf([daemon]).filter((l) => !l.startsWith('u_str')), [], 'PM2\'s daemon listens on no TCP port');
    assert.equal(await h.hello({ host: '127.0.0.1', port: occ.port }), 'occupant\n');
  });

// ---- a port below 1024, as an ordinary user ---------------------------------------

const nobody = users().get('nobody');
const asNobody = process.getuid() !== 0 ? 'needs root to run a command as the user nobody (setpriv)'
  : !nobody ? 'no user nobody here'
    : spawnSync('setpriv', ['--reuid', String(nobody.uid), '--regid', String(nobody.gid), '--clear-groups', 'test', '-r', h.CLI]).status !== 0
      ? `nobody cannot read ${h.CLI}` : false;

test('a port below 1024 as an ordinary user: one line naming root or CAP_NET_BIND_SERVICE and the fix, exit 1', { skip: asNobody }, async (t) => {
  const port = 999;
  const run = await refused(t, {
    via: 'argv',
    argv: ['setpriv', '--reuid', String(nobody.uid), '--regid', String(nobody.gid), '--clear-groups',
      process.execPath, h.CLI, 'run', '--listen', `tcp:127.0.0.1:${port}`, '--workers', '1', '--set', 'tunekit_metrics=false'],
    env: { TUNEKIT_LOG: 'json' },
  });
  const start = fs.readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8').trim();
  assertRefused(run, new RegExp(`^tunekit: cannot bind tcp:127\\.0\\.0\\.1:${port}: binding a port below ${start} needs root or CAP_NET_BIND_SERVICE; use a port >= ${start} .*AmbientCapabilities=CAP_NET_BIND_SERVICE in its systemd unit\\)$`));
});

// ---- an inherited socket that is not bound ------------------------------------------

test('listen fd:3 with a TCP socket that is not bound: refused in one line, never listened on', async (t) => {
  // A socket whose bind failed is one that never bound: what libuv hands over after a deferred EADDRINUSE.
  const occ = await occupant(t, { kind: 'tcp', host: '127.0.0.1' });
  const handle = net._createServerHandle('127.0.0.1', occ.port, 4);
  assert.equal(typeof handle, 'object');
  t.after(() => handle.close());
  const config = h.writeConfig(h.tmpDir(t), { listen: 'fd:3' });
  const run = await refused(t, { via: 'cluster', args: ['--config', config], stdio: ['ignore', 'pipe', 'pipe', handle.fd] });
  assertRefused(run, /^tunekit: listen fd:3: refusing the TCP socket passed there: it is not bound, and listening on it would take a random port on every interface; pass a bound, listening socket \(systemd's ListenStream=\)$/);
});

// ---- a free address: confirmed before ready ------------------------------------------

/** The `listen` events before `ready`, and the TCP/Unix addresses the runner's processes listen on (ss). */
function whereItListens(r, ready) {
  const before = r.events.slice(0, r.events.indexOf(ready)).filter((e) => e.event === 'listen');
  const lines = listeningOf([r.pid, ...ready.workers]);
  return { before, lines };
}

for (const [host, text] of [['127.0.0.1', (p) => `tcp:127.0.0.1:${p}`], ['::1', (p) => `tcp:[::1]:${p}`]]) {
  for (const strategy of ['shared', 'round-robin']) {
    test(`${text('PORT')} free, strategy ${strategy}: \`listen\` says where the workers accept before \`ready\`; the kernel shows the runner there and nowhere else`, async (t) => {
      // A port the kernel just gave out and took back: free a moment ago.
      const probe = net.createServer();
      await new Promise((resolve) => probe.listen(0, host, resolve));
      const { port } = probe.address();
      await new Promise((resolve) => probe.close(resolve));
      const listen = text(port);
      const r = h.start(t, { args: ['--listen', listen, '--workers', '2', '--strategy', strategy] });
      const ready = await r.ready();
      const { before, lines } = whereItListens(r, ready);
      assert.deepEqual(before.map((e) => [e.listen, e.accepting]), [[listen, listen]]);
      const local = host === '::1' ? `[::1]:${port}` : `127.0.0.1:${port}`;
      // Netid State Recv-Q Send-Q Local Peer users
      assert.ok(lines.length >= 1 && lines.every((l) => l.trim().split(/\s+/)[4] === local), `only ${local}: ${lines.join('\n')}`);
      const res = await new Promise((resolve, reject) => {
        require('node:http').get({ host, port, path: '/', agent: false }, (x) => {
          let b = '';
          x.on('data', (d) => { b += d; });
          x.on('end', () => resolve({ status: x.statusCode, json: JSON.parse(b) }));
        }).on('error', reject);
      });
      assert.equal(res.status, 200);
      assert.ok(ready.workers.includes(res.json.pid), 'answered by a worker');
    });
  }
}

for (const strategy of ['shared', 'round-robin', 'per-worker']) {
  test(`unix:PATH, strategy ${strategy}: \`listen\` says each socket path before \`ready\`; each is a socket the runner listens on`, async (t) => {
    const sock = path.join(h.tmpDir(t), 'app.sock');
    const r = h.start(t, { args: ['--listen', `unix:${sock}`, '--workers', '2', '--strategy', strategy, '--socket-group', group.name] });
    const ready = await r.ready();
    const paths = ready.sockets || [sock];
    const { before } = whereItListens(r, ready);
    assert.deepEqual(before.map((e) => e.accepting).sort(), paths.map((p) => `unix:${p}`).sort());
    const listening = require('../../lib/doctor').listeners().filter((l) => l.kind === 'unix' && paths.includes(l.local));
    for (const p of paths) {
      const l = listening.find((x) => x.local === p && x.ino === fs.lstatSync(p).ino);
      assert.ok(l && l.pids.includes(r.pid), `${p}: a listening socket of the runner, bound to the file at the path`);
    }
    assert.deepEqual(fs.readdirSync(path.dirname(sock)).sort(), paths.map((p) => path.basename(p)).sort(), 'nothing else in the directory');
  });
}
