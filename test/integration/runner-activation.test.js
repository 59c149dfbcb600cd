'use strict';
// An inherited listening socket (systemd socket activation, LISTEN_FDS/LISTEN_PID,
// fd 3): the primary takes it, shares it with the workers like `shared`, and never
// unlinks it (systemd owns it). And a foreign cluster primary (PM2's shape): the
// worker reads TUNEKIT_CONFIG, listens through that primary, never unlinks.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { alive } = require('../../lib/proc');
const { until } = require('../lib/util');

function hasCommand(cmd) {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function waitForFile(p, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(p)) {
    if (Date.now() > deadline) throw new Error(`${p} did not appear`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('systemd-socket-activate: the runner serves on the inherited fd 3 and leaves the socket to its owner',
  { skip: hasCommand('systemd-socket-activate') ? false : 'systemd-socket-activate is not installed (package systemd)' },
  async (t) => {
    const dir = h.tmpDir(t);
    const sock = path.join(dir, 'app.sock');
    const config = h.writeConfig(dir, { listen: 'systemd' });
    // systemd-socket-activate binds and listens, waits for a first connection,
    // then execs the runner with LISTEN_FDS=1, LISTEN_PID=<its own pid>, fd 3.
    const r = h.start(t, {
      via: 'argv',
      argv: ['systemd-socket-activate', '-l', sock, process.execPath, h.CLUSTER, '--config', config],
    });
    await waitForFile(sock);
    const first = await h.request(sock, '/healthz'); // queued until the runner starts
    assert.equal(first.status, 200);
    const ready = await r.ready();
    assert.equal(ready.listen, 'systemd');
    const listen = r.events.find((e) => e.event === 'listen');
    assert.equal(listen.owner, 'inherited');
    assert.equal(listen.pid, r.pid, 'LISTEN_PID was the runner itself (exec in place)');
    // Read back from the kernel before `ready`: where the inherited socket accepts.
    assert.equal(listen.accepting, `unix:${sock}`);
    assert.ok(r.events.indexOf(listen) < r.events.indexOf(ready), '`listen` before `ready`');

    // Until both workers have answered (at most 30 s), not a count.
    const results = await h.requestsUntil(sock, h.fromWorkers(2), { concurrency: 10 });
    assert.ok(results.every((res) => res.status === 200));
    assert.deepEqual(new Set(results.map((res) => res.json.pid)), new Set(ready.workers), 'both workers accept on the inherited socket');

    const ino = fs.lstatSync(sock).ino;
    r.signal('SIGTERM');
    assert.deepEqual(await r.exited, { code: 0, signal: null });
    assert.equal(fs.lstatSync(sock).ino, ino, 'the inherited socket is not unlinked: systemd owns it');
    assert.equal(r.events.some((e) => e.event === 'socket-removed'), false);
  });

test('a listening socket passed as fd 3 with LISTEN_FDS=1 and LISTEN_PID set by a tiny exec wrapper', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const config = h.writeConfig(dir, { listen: 'systemd' });
  // Bind (without accepting here) and hand the fd over as the child's fd 3, as systemd does.
  const handle = net._createServerHandle(sock, -1, -1);
  assert.equal(typeof handle, 'object', 'bound');
  const r = h.start(t, {
    via: 'argv',
    // $$ of the shell is the runner's pid after exec, so LISTEN_PID matches.
    argv: ['sh', '-c', 'LISTEN_PID=$$ exec "$@"', 'sh', process.execPath, h.CLUSTER, '--config', config],
    env: { LISTEN_FDS: '1' },
    stdio: ['ignore', 'pipe', 'pipe', handle.fd],
  });
  const ready = await r.ready();
  const listen = r.events.find((e) => e.event === 'listen');
  assert.equal(listen.accepting, `unix:${sock}`, 'the address the inherited socket accepts on, read back from the kernel');
  assert.ok(r.events.indexOf(listen) < r.events.indexOf(ready), '`listen` before `ready`');
  const results = await h.requests(sock, 100, { concurrency: 10 });
  assert.ok(results.every((res) => res.status === 200));
  assert.ok(results.every((res) => ready.workers.includes(res.json.pid)));
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.ok(fs.lstatSync(sock).isSocket(), 'not unlinked by the runner');
});

test('LISTEN_PID of another process is refused', async (t) => {
  const dir = h.tmpDir(t);
  const config = h.writeConfig(dir, { listen: 'systemd' });
  const r = h.start(t, { via: 'cluster', args: ['--config', config], env: { LISTEN_FDS: '1', LISTEN_PID: '1' } });
  const { code } = await r.exited;
  assert.notEqual(code, 0);
  assert.match(r.stderr, /LISTEN_PID=1 is not this process/);
});

test('a foreign cluster primary (PM2 cluster mode\'s shape): worker.js reads TUNEKIT_CONFIG and never unlinks', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const config = h.writeConfig(dir, { listen: `unix:${sock}` });
  // A bare Node cluster primary, as PM2's God daemon is: forks app/worker.js twice.
  const primary = spawn(process.execPath, [path.join(h.FIXTURES, 'foreign-primary.js'), config, '2'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const pids = [];
  t.after(() => {
    for (const pid of [primary.pid, ...pids]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch { /* gone */ }
    }
  });
  const ready = await new Promise((resolve, reject) => {
    let out = '';
    primary.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"event":"ready"') && l.includes('"workers"'));
      if (line) resolve(JSON.parse(line));
    });
    primary.on('exit', (code) => reject(new Error(`foreign primary exited ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`no ready: ${out}`)), h.READY_TIMEOUT_MS);
  });
  pids.push(...ready.workers);
  const results = await h.requests(sock, 60, { concurrency: 6 });
  assert.ok(results.every((res) => res.status === 200));
  const ino = fs.lstatSync(sock).ino;
  // A worker's own shutdown (PM2 sends SIGINT) drains and exits without unlinking:
  // the foreign primary still holds the socket for the other worker.
  process.kill(ready.workers[0], 'SIGINT');
  await until(`worker ${ready.workers[0]} to exit after SIGINT`, () => !alive(ready.workers[0]));
  assert.equal(fs.lstatSync(sock).ino, ino, 'socket still there after one worker left');
  const after = await h.request(sock, '/');
  assert.equal(after.json.pid, ready.workers[1]);
});
