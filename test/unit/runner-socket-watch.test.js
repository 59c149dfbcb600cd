'use strict';
// The socket path check (app/socket-watch.js) alone, on real Unix socket files
// in a temp directory, bound the way the primary binds them (app/socket.js):
// deleted, replaced, their directory removed. The primary around it is a fake
// that counts the moves it is asked for (app/rolling.js moves the workers); a
// worker listening on a new socket is this process calling listen() on its handle,
// then what the primary does when a worker says it listens (app/listeners.js).
// test/integration/runner-rebind.test.js runs the same with real workers and clients.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const watch = require('../../app/socket-watch');
const sock = require('../../app/socket');
const listeners = require('../../app/listeners');
const { runnerSettings, recordingLog } = require('../lib/fake-workers');
const { until } = require('../lib/util');

/** A fake primary over real sockets bound in a temp dir (socketGroup '': no chgrp). */
function watched(t, overrides = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-watch-'));
  const socketPath = path.join(dir, 'run', 'app.sock');
  fs.mkdirSync(path.dirname(socketPath));
  const s = runnerSettings({ listen: `unix:${socketPath}`, socketGroup: '', socketCheckMs: 1000, ...overrides });
  const p = {
    s, listen: s.endpoint, log: recordingLog(), state: 'running', slots: [], bound: [], rrSocket: null,
    unreachable: [], checks: new Map(), checkTimer: null, moves: 0,
  };
  p.moveWorkers = () => { p.moves++; };
  p.publishListener = (b) => listeners.publishListener(p, b);
  // A binding as after the start: a worker listens on it, and it is at its path.
  // What the start logs (listen) is not what these tests look at.
  const bind = (where = socketPath) => {
    const b = sock.bindUnix(where, s);
    listens(p, b);
    p.log.events.length = 0;
    return b;
  };
  t.after(() => {
    clearInterval(p.checkTimer);
    for (const b of [...p.bound, ...p.unreachable]) b.handle.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { p, socketPath, bind, log: p.log };
}

/** A worker listens on binding b: listen() on its handle here, then what the primary does when told. */
function listens(p, b) {
  assert.equal(b.handle.listen(16), 0, 'listen() on the bound handle');
  p.publishListener(b);
}

test('our file: nothing to do; deleted: a new socket for the path, at the path once a worker listens (same mode), the workers moved, the old one held', (t) => {
  const { p, socketPath, bind, log } = watched(t);
  const first = bind();
  p.bound = [first];
  assert.equal(fs.lstatSync(socketPath).ino, Number(first.ino), 'published at its path');
  assert.deepEqual(fs.readdirSync(path.dirname(socketPath)), ['app.sock'], 'its bind name is gone');
  watch.checkSockets(p);
  assert.deepEqual(log.events, []);

  fs.rmSync(socketPath);
  watch.checkSockets(p);
  const fresh = p.bound[0];
  assert.notEqual(fresh, first);
  assert.equal(p.moves, 1, 'the workers are moved onto the new socket');
  assert.deepEqual(p.unreachable, [first], 'the old binding stays open: closing it would unlink its bind name');
  assert.equal(fs.existsSync(socketPath), false, 'not at the path while no worker listens on it: a connect() there would be refused');
  assert.equal(fs.lstatSync(sock.bindName(socketPath)).mode & 0o777, 0o660, 'bound beside the path with its mode from the first moment');
  assert.deepEqual(log.named('socket-rebound'), []);
  watch.checkSockets(p);
  assert.equal(p.moves, 1, 'a binding not at its path yet is left alone by the check');

  listens(p, fresh);
  const [rebound] = log.named('socket-rebound');
  assert.equal(rebound.path, socketPath);
  assert.ok(rebound.missing_ms_at_most >= 0, 'says how long the path may have been missing');
  const st = fs.lstatSync(socketPath);
  assert.ok(st.isSocket());
  assert.equal(st.mode & 0o777, 0o660);
  assert.equal(st.ino, Number(fresh.ino), 'the file bound beside the path, moved to it');
  assert.equal(sock.pathState(fresh), 'ours');
  assert.equal(fs.existsSync(sock.bindName(socketPath)), false, 'the bind name is gone');

  watch.checkSockets(p);
  assert.equal(log.events.length, 1, 'the new socket is ours: nothing more');
});

test('a file put at the path before the new socket is published is never replaced: socket-rebind-failed once, published once the path is free', (t) => {
  const { p, socketPath, bind, log } = watched(t);
  p.bound = [bind()];
  fs.rmSync(socketPath);
  watch.checkSockets(p);
  fs.writeFileSync(socketPath, 'someone else\'s\n');
  listens(p, p.bound[0]);
  watch.checkSockets(p);
  assert.deepEqual(log.events.map((e) => [e.event, e.code]), [['socket-rebind-failed', 'EADDRINUSE']]);
  assert.match(log.events[0].error, /was taken while the runner bound it: a regular file is there now; refusing to replace it/);
  assert.equal(fs.readFileSync(socketPath, 'utf8'), 'someone else\'s\n');

  fs.rmSync(socketPath);
  watch.checkSockets(p);
  assert.equal(log.named('socket-rebound').length, 1);
  assert.equal(fs.lstatSync(socketPath).ino, Number(p.bound[0].ino));
});

test('another file at the path is never touched, said once; once it is moved away the path is bound again', (t) => {
  const { p, socketPath, bind, log } = watched(t);
  p.bound = [bind()];
  fs.rmSync(socketPath);
  fs.writeFileSync(socketPath, 'someone else\'s\n');
  watch.checkSockets(p);
  watch.checkSockets(p);
  assert.deepEqual(log.events.map((e) => e.event), ['socket-replaced']);
  assert.match(log.events[0].fix, /move it away/);
  assert.equal(fs.readFileSync(socketPath, 'utf8'), 'someone else\'s\n');
  assert.equal(p.moves, 0);

  fs.rmSync(socketPath);
  watch.checkSockets(p);
  listens(p, p.bound[0]);
  assert.equal(log.named('socket-rebound').length, 1);
  assert.ok(fs.lstatSync(socketPath).isSocket());
});

test('the directory gone: socket-rebind-failed once per cause, bound again when it is back', (t) => {
  const { p, socketPath, bind, log } = watched(t);
  p.bound = [bind()];
  fs.rmSync(path.dirname(socketPath), { recursive: true });
  watch.checkSockets(p);
  watch.checkSockets(p);
  assert.deepEqual(log.events.map((e) => [e.event, e.code]), [['socket-rebind-failed', 'ENOENT']]);
  assert.equal(log.events[0].retry_ms, p.s.socketCheckMs);
  assert.equal(p.moves, 0);

  fs.mkdirSync(path.dirname(socketPath));
  watch.checkSockets(p);
  assert.equal(p.moves, 1);
  listens(p, p.bound[0]);
  assert.equal(log.named('socket-rebound').length, 1);
});

test('per-worker: only the deleted PATH.N is bound again', (t) => {
  const { p, socketPath, bind, log } = watched(t, { strategy: 'per-worker', workers: 2 });
  p.bound = [bind(`${socketPath}.1`), bind(`${socketPath}.2`)];
  const [one, two] = p.bound;
  fs.rmSync(`${socketPath}.2`);
  watch.checkSockets(p);
  listens(p, p.bound[1]);
  assert.deepEqual(log.named('socket-rebound').map((e) => e.path), [`${socketPath}.2`]);
  assert.equal(p.bound[0], one);
  assert.notEqual(p.bound[1], two);
  assert.deepEqual(p.unreachable, [two]);
});

test('round-robin: a deleted socket is reported once with the fix, never bound again by the runner', (t) => {
  const { p, socketPath, bind, log } = watched(t, { strategy: 'round-robin' });
  const nodes = bind(); // stands for the socket Node's cluster bound
  p.unreachable = [nodes]; // closed at the end, like the others
  p.rrSocket = { kind: 'unix', path: socketPath, ...sock.identity(socketPath), owned: true, boundAt: Date.now() };
  p.slots = [{ n: 1, current: { state: 'ready' } }];
  fs.rmSync(socketPath);
  watch.checkSockets(p);
  watch.checkSockets(p);
  assert.deepEqual(log.events.map((e) => e.event), ['socket-gone']);
  assert.match(log.events[0].fix, /restart the app/);
  assert.equal(fs.existsSync(socketPath), false);
  assert.equal(p.moves, 0);
});

test('the watch runs every socketCheckMs while running, and not at all with 0 or an inherited socket', async (t) => {
  const { p, socketPath, bind } = watched(t, { socketCheckMs: 20 });
  p.bound = [bind()];
  watch.watchSockets(p);
  fs.rmSync(socketPath);
  await until('a new socket bound by the timer', () => p.moves === 1);

  for (const overrides of [{ socketCheckMs: 0 }, { listen: 'fd:3' }]) {
    const other = watched(t, overrides).p;
    watch.watchSockets(other);
    assert.equal(other.checkTimer, null, JSON.stringify(overrides));
  }
});
