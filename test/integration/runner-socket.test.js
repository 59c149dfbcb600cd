'use strict';
// Acceptance 2: the socket's lifecycle. Stale file removed and logged; a live
// socket of another process refused and left answering; a regular file refused and
// intact; a too-long path refused with its length and the limit; mode 0660 and the
// asked group from the start. Plus: worker exits never unlink the primary's socket.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const h = require('../fixtures/runner/harness');

const group = h.someGroup();

function args(sock, extra = []) {
  return ['--listen', `unix:${sock}`, '--workers', '2', '--socket-group', group.name, ...extra];
}

/** A socket file nobody listens on: a process binds it and dies by SIGKILL. */
async function makeStaleSocket(sock) {
  const child = spawn(process.execPath, ['-e', `
    require('node:net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'));
  `], { stdio: 'ignore' });
  await new Promise((resolve) => child.on('exit', resolve));
  assert.ok(fs.lstatSync(sock).isSocket(), 'the stale socket file exists');
}

test('a stale socket file is removed, logged, and the runner starts', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  await makeStaleSocket(sock);
  const r = h.start(t, { args: args(sock) });
  await r.ready();
  const ev = r.events.find((e) => e.event === 'stale-socket-removed');
  assert.ok(ev, 'stale-socket-removed logged');
  assert.equal(ev.path, sock);
  assert.equal((await h.request(sock)).status, 200);
});

test('a live socket owned by another process: refused, non-zero exit, the other server still answers', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  // The runner's probe connects and hangs up at once: ignore that reset.
  const other = net.createServer((c) => c.on('error', () => {}).end('other server\n'));
  await new Promise((resolve) => other.listen(sock, resolve));
  t.after(() => new Promise((resolve) => other.close(resolve)));

  const r = h.start(t, { args: args(sock) });
  const { code } = await r.exited;
  assert.notEqual(code, 0);
  assert.match(r.stderr, new RegExp(`already answering on .*app\\.sock, held by pid ${process.pid} \\(.*\\); refusing to start a second one`));
  assert.ok(r.events.some((e) => e.event === 'listen-refused'), 'listen-refused logged');
  assert.equal(r.events.some((e) => e.event === 'ready'), false);

  assert.equal(await h.hello(sock), 'other server\n', 'the other server still answers on its socket');
});

test('a regular file at the path is refused and left intact', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  fs.writeFileSync(sock, 'precious data\n');
  const r = h.start(t, { args: args(sock) });
  const { code } = await r.exited;
  assert.notEqual(code, 0);
  assert.match(r.stderr, /app\.sock exists and is a regular file, not a socket; refusing to touch it/);
  assert.equal(fs.readFileSync(sock, 'utf8'), 'precious data\n');
});

test('a 120-byte socket path is refused with its length and the limit', async (t) => {
  const dir = h.tmpDir(t);
  const name = 'x'.repeat(120 - dir.length - 1);
  const sock = path.join(dir, name);
  assert.equal(Buffer.byteLength(sock), 120);
  const r = h.start(t, { args: args(sock) });
  const { code } = await r.exited;
  // --listen sets tunekit_socket_path, so the definition's rule refuses it first.
  assert.equal(code, 2);
  assert.match(r.stderr, new RegExp(`tunekit_socket_path=${sock} is 120 bytes; the limit \\(sun_path\\) is 107`));
  assert.equal(fs.readdirSync(dir).length, 0, 'nothing created');
});

test('a missing socket directory is named in the error', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'missing', 'app.sock');
  const r = h.start(t, { args: args(sock) });
  const { code } = await r.exited;
  assert.notEqual(code, 0);
  assert.match(r.stderr, new RegExp(`socket directory ${path.join(dir, 'missing')} does not exist`));
});

test('an unknown socket group is named in the error, before anything is created', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: ['--listen', `unix:${sock}`, '--workers', '1', '--socket-group', 'tk-no-such-group'] });
  const { code } = await r.exited;
  assert.notEqual(code, 0);
  assert.match(r.stderr, /socket group "tk-no-such-group" does not exist/);
  assert.equal(fs.existsSync(sock), false);
});

test('mode 0660 and the asked group, for the shared socket and every per-worker socket', async (t) => {
  for (const strategy of ['shared', 'per-worker', 'round-robin']) {
    const dir = h.tmpDir(t);
    const sock = path.join(dir, 'app.sock');
    const r = h.start(t, { args: args(sock, ['--strategy', strategy, '--socket-mode', '0660']) });
    const ready = await r.ready();
    const paths = ready.sockets || [sock];
    for (const p of paths) {
      const st = fs.lstatSync(p);
      assert.ok(st.isSocket());
      assert.equal((st.mode & 0o7777).toString(8), '660', `${strategy}: ${p} mode`);
      assert.equal(st.gid, group.gid, `${strategy}: ${p} group ${group.name}`);
    }
    r.signal('SIGTERM');
    assert.equal((await r.exited).code, 0);
  }
});

test('worker exits never unlink the socket: kill -9 both workers, the same inode keeps serving', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: args(sock) });
  const ready = await r.ready();
  const ino = fs.lstatSync(sock).ino;
  for (const pid of ready.workers) process.kill(pid, 'SIGKILL');
  // While no worker is alive the socket stays (connections wait in the backlog).
  assert.equal(fs.lstatSync(sock).ino, ino);
  const res = await h.request(sock, '/');
  assert.equal(res.status, 200, 'a connection made while both workers were dead is served by a respawned one');
  assert.ok(!ready.workers.includes(res.json.pid));
  assert.equal(fs.lstatSync(sock).ino, ino, 'still the socket the primary bound');
});

test('shutdown leaves a socket that replaced ours alone', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: args(sock) });
  await r.ready();
  // Someone moves our socket away and puts theirs at the path.
  fs.renameSync(sock, `${sock}.old`);
  const other = net.createServer((c) => c.on('error', () => {}).end('theirs\n'));
  await new Promise((resolve) => other.listen(sock, resolve));
  t.after(() => new Promise((resolve) => other.close(resolve)));
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.ok(r.events.some((e) => e.event === 'socket-kept'), 'socket-kept logged');
  assert.ok(fs.lstatSync(sock).isSocket(), 'their socket is still there');
});
