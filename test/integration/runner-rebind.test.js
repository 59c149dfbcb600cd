'use strict';
// The socket file deleted under a running runner (an rm, a tmpfiles clean-up): the
// primary binds the path again, with its mode and group, logs socket-rebound and
// moves its workers onto the new socket one at a time; its old socket stays open in
// the primary, and at shutdown only the new one is removed. Another file at the path
// is never touched (socket-replaced, once). With the check off nothing happens.
// Per-worker binds only the deleted PATH.N again; round-robin says the path is gone
// and that a restart fixes it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const h = require('../fixtures/runner/harness');
const { listeners } = require('../../lib/doctor');
const { sleep, until } = require('../lib/util');

const group = h.someGroup();
const CHECK_MS = 100;
// Five check intervals in which nothing more may happen: a window, not a wait for
// an event (the absence in it is what the tests that use it assert).
const quietWindow = () => sleep(CHECK_MS * 5);

/** A runner of 2 workers on DIR/app.sock, checking every CHECK_MS (or checkMs), ready. */
async function startRunner(t, { extra = [], checkMs = CHECK_MS, module = null, env = {} } = {}) {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  const r = h.start(t, {
    args: [...(module ? [module] : []), '--listen', `unix:${sock}`, '--workers', '2', '--socket-group', group.name,
      '--socket-mode', '0660', '--set', `tunekit_app_socket_check_ms=${checkMs}`, ...extra],
    env,
  });
  return { sock, r, ready: await r.ready() };
}

const sorted = (pids) => [...new Set(pids)].sort((a, b) => a - b);

/**
 * The processes holding the socket bound to the file now at `p` (`current`), and
 * those holding sockets once bound to that path and since deleted from it (`old`).
 */
function holders(p) {
  const ino = fs.lstatSync(p).ino;
  const all = listeners().filter((l) => l.kind === 'unix' && l.local === p);
  return {
    current: sorted(all.filter((l) => l.ino === ino).flatMap((l) => l.pids)),
    old: sorted(all.filter((l) => l.ino !== ino).flatMap((l) => l.pids)),
  };
}

function assertModeAndGroup(p) {
  const st = fs.lstatSync(p);
  assert.ok(st.isSocket(), `${p} is a socket`);
  assert.equal((st.mode & 0o7777).toString(8), '660', `${p} mode`);
  assert.equal(st.gid, group.gid, `${p} group ${group.name}`);
}

/** Another process's server, bound beside `sock` and then renamed over it (atomically). */
async function theirServer(t, sock) {
  const other = net.createServer((c) => c.on('error', () => {}).end('theirs\n'));
  await new Promise((resolve) => other.listen(`${sock}.theirs`, resolve));
  t.after(() => new Promise((resolve) => other.close(resolve)));
  fs.renameSync(`${sock}.theirs`, sock);
  return fs.lstatSync(sock).ino;
}

const count = (r, event) => r.events.filter((e) => e.event === event).length;

/** One connect() to a socket path: 'ok' once accepted (then closed), else the error's code. */
function connectOnce(p) {
  return new Promise((resolve) => {
    const c = net.connect(p);
    c.once('connect', () => {
      c.destroy();
      resolve('ok');
    });
    c.once('error', (err) => resolve(err.code));
  });
}

/**
 * connect() to `p` in a tight loop, one attempt at a time, until `done()` is true,
 * at most `maxAttempts` attempts and `withinMs` ms (it stops by itself). Before each
 * connect the path is looked up (lstat), so each attempt is counted by what the
 * path held just before and how the connect ended:
 *   ok               accepted;
 *   absent           ENOENT: no file at the path (a deleted socket not back yet, or
 *                    none bound yet): expected, the path does not exist then;
 *   refused          ECONNREFUSED: a socket file nobody listens on, by the inode the
 *                    lstat found (`refusedOn`, inode -> count; null: none found);
 *   full             EAGAIN: a socket that listens, its accept queue full (the
 *                    loop's closed connections wait there until a worker accepts
 *                    them; a loaded machine's worker can fall behind the loop), by
 *                    inode as well (`fullOn`): not a refusal, and never the stale file;
 *   other            any other code, by code.
 * A socket file that the runner binds at the path before a worker listens on it is
 * what gets ECONNREFUSED; the runner publishes a socket only once it listens, so
 * a refusal can only come from a file that was not the runner's (a stale one).
 */
async function connectLoop(p, done, { maxAttempts = 200_000, withinMs = 30_000, tally = newTally() } = {}) {
  for (const end = Date.now() + withinMs; tally.attempts < maxAttempts && Date.now() < end && !done(tally);) {
    let ino = null;
    try {
      ino = fs.lstatSync(p).ino;
    } catch { /* absent */ }
    const result = await connectOnce(p);
    tally.attempts += 1;
    if (result === 'ok') tally.ok += 1;
    else if (result === 'ENOENT') tally.absent += 1;
    else if (result === 'ECONNREFUSED') {
      tally.refused += 1;
      tally.refusedOn.set(ino, (tally.refusedOn.get(ino) || 0) + 1);
    } else if (result === 'EAGAIN') {
      tally.full += 1;
      tally.fullOn.set(ino, (tally.fullOn.get(ino) || 0) + 1);
    } else tally.other[result] = (tally.other[result] || 0) + 1;
  }
  return tally;
}

const newTally = () => ({ attempts: 0, ok: 0, absent: 0, refused: 0, refusedOn: new Map(), full: 0, fullOn: new Map(), other: {} });

/** A tally as one line of JSON (its maps as objects), for the test's diagnostics. */
const tallyText = (tally) => JSON.stringify({ ...tally, refusedOn: Object.fromEntries(tally.refusedOn), fullOn: Object.fromEntries(tally.fullOn) });

/** `done` for connectLoop: the runner logged `event`, and `n` connects were accepted after it. */
function acceptedAfter(r, event, n = 200) {
  let okAt = null;
  return (tally) => {
    if (okAt === null && r.events.some((e) => e.event === event)) okAt = tally.ok;
    return okAt !== null && tally.ok - okAt >= n;
  };
}

test('socket file deleted (shared): bound again with its mode and group, logged, workers moved, served; shutdown removes only the new socket', async (t) => {
  const { sock, r, ready } = await startRunner(t);
  const first = fs.lstatSync(sock).ino;

  fs.unlinkSync(sock);
  const ev = await r.waitFor('socket-rebound');
  assert.equal(ev.path, sock);
  assert.ok(Number.isInteger(ev.missing_ms_at_most), `how long it was missing, as far as the runner can tell: ${JSON.stringify(ev)}`);
  assert.notEqual(fs.lstatSync(sock).ino, first, 'a new socket file');
  assertModeAndGroup(sock);

  const done = await r.waitFor('reload-done', (e) => e.reason === 'socket-rebound');
  assert.equal(done.workers.length, 2);
  for (const pid of ready.workers) assert.ok(!done.workers.includes(pid), `worker ${pid} of the old socket replaced`);
  const answers = await h.requests(sock, 20, { concurrency: 4 });
  for (const res of answers) {
    assert.equal(res.status, 200);
    assert.ok(done.workers.includes(res.json.pid), 'answered by a worker on the new socket');
  }
  // The workers listen on the new socket; the old one is held open by the primary
  // alone (closing it would unlink the path, now the new socket's).
  const held = holders(sock);
  assert.deepEqual(held.current, sorted([r.pid, ...done.workers]));
  assert.deepEqual(held.old, [r.pid]);

  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.equal(fs.existsSync(sock), false, 'the new socket is removed at shutdown');
  assert.deepEqual(r.events.filter((e) => e.event === 'socket-removed').map((e) => e.path), [sock], 'one removal, of the path');
  assert.equal(count(r, 'socket-kept'), 0, 'the old binding is not released (its inode is not at the path)');
});

test('another socket renamed over ours: left alone and answering, socket-replaced once; moved away, the path is bound again', async (t) => {
  const { sock, r } = await startRunner(t);

  const theirs = await theirServer(t, sock);
  const ev = await r.waitFor('socket-replaced');
  assert.equal(ev.path, sock);
  assert.equal(ev.level, 'warn');
  assert.match(ev.fix, /move it away \(the runner then binds .*app\.sock again within 100 ms\)/);
  await quietWindow();
  assert.equal(count(r, 'socket-replaced'), 1, 'said once');
  assert.equal(count(r, 'socket-rebound'), 0);
  assert.equal(fs.lstatSync(sock).ino, theirs, 'their socket is still at the path');
  assert.equal(await h.hello(sock), 'theirs\n', 'and still answers');

  // The fix it names: move their file away, and the runner binds the path again.
  fs.renameSync(sock, `${sock}.moved`);
  await r.waitFor('socket-rebound');
  assertModeAndGroup(sock);
  await r.waitFor('reload-done', (e) => e.reason === 'socket-rebound');
  assert.equal((await h.request(sock)).status, 200);
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.equal(fs.existsSync(sock), false);
  assert.equal(fs.lstatSync(`${sock}.moved`).ino, theirs, 'their socket, moved, is untouched');
});

test('a regular file renamed over our socket: left intact, socket-replaced once, kept at shutdown', async (t) => {
  const { sock, r } = await startRunner(t);
  fs.writeFileSync(`${sock}.tmp`, 'precious data\n');
  fs.renameSync(`${sock}.tmp`, sock);
  await r.waitFor('socket-replaced');
  await quietWindow();
  assert.equal(count(r, 'socket-replaced'), 1);
  assert.equal(count(r, 'socket-rebound'), 0);
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.ok(r.events.some((e) => e.event === 'socket-kept'), 'socket-kept logged');
  assert.equal(fs.readFileSync(sock, 'utf8'), 'precious data\n');
});

test('the check off (tunekit_app_socket_check_ms=0): a deleted socket stays deleted', async (t) => {
  const { sock, r } = await startRunner(t, { checkMs: 0 });
  fs.unlinkSync(sock);
  // A window longer than the default interval (1000 ms) in which nothing may rebind
  // the path (the absence is what is tested).
  await sleep(1500);
  assert.equal(fs.existsSync(sock), false, 'nothing bound the path again');
  await assert.rejects(h.request(sock), { code: 'ENOENT' });
  for (const event of ['socket-rebound', 'socket-gone', 'reload']) assert.equal(count(r, event), 0, `no ${event}`);
  r.signal('SIGTERM');
  assert.equal((await r.exited).code, 0);
  assert.equal(count(r, 'socket-removed'), 0);
});

test('per-worker: only the deleted PATH.N is bound again, and only its slot restarted', async (t) => {
  const { r, ready } = await startRunner(t, { extra: ['--strategy', 'per-worker'] });
  const [one, two] = ready.sockets;
  const inoOne = fs.lstatSync(one).ino;
  const slotWorkers = await Promise.all([one, two].map(async (p) => (await h.request(p)).json.pid));

  fs.unlinkSync(two);
  const ev = await r.waitFor('socket-rebound');
  assert.equal(ev.path, two);
  assertModeAndGroup(two);
  const done = await r.waitFor('reload-done', (e) => e.reason === 'socket-rebound');
  assert.deepEqual(done.replaced, [slotWorkers[1]], 'only the worker of the deleted socket was replaced');
  assert.equal(fs.lstatSync(one).ino, inoOne, `${one} untouched`);
  assert.equal((await h.request(one)).json.pid, slotWorkers[0], 'slot 1 keeps its worker');
  const res = await h.request(two);
  assert.equal(res.status, 200);
  assert.ok(done.workers.includes(res.json.pid) && res.json.pid !== slotWorkers[1], 'a new worker answers on the new socket');
});

test('round-robin: a deleted socket is said once (socket-gone, with the fix), not bound again', async (t) => {
  const { sock, r } = await startRunner(t, { extra: ['--strategy', 'round-robin'] });
  fs.unlinkSync(sock);
  const ev = await r.waitFor('socket-gone');
  assert.equal(ev.level, 'warn');
  assert.equal(ev.path, sock);
  assert.match(ev.reason, /round-robin/);
  assert.match(ev.fix, /restart the app/);
  await quietWindow();
  assert.equal(count(r, 'socket-gone'), 1, 'said once');
  assert.equal(count(r, 'socket-rebound'), 0);
  assert.equal(fs.existsSync(sock), false);
});

test('deleted during a rolling restart (SIGHUP): the workers started before the re-bind are moved too', async (t) => {
  // No spare, and 1.5 s to load: each new worker of the restart gives a known window.
  const { sock, r, ready } = await startRunner(t, {
    module: path.join(h.FIXTURES, 'slow-start-app.js'), extra: ['--set', 'tunekit_app_spare_workers=0'], env: { SLOW_START_MS: '1500' },
  });
  r.signal('SIGHUP');
  // Slot 1's new worker listens on the socket about to be deleted.
  await r.waitFor('worker-ready', (e) => !ready.workers.includes(e.worker_pid));
  fs.unlinkSync(sock);
  await r.waitFor('socket-rebound');
  const moved = await r.waitFor('reload-done', (e) => e.reason === 'socket-rebound');
  assert.ok(r.events.some((e) => e.event === 'reload-done' && e.reason === undefined), 'the SIGHUP restart finished');
  const res = await h.request(sock);
  assert.equal(res.status, 200);
  assert.ok(moved.workers.includes(res.json.pid));
  assert.deepEqual(holders(sock).current, sorted([r.pid, ...moved.workers]), 'every worker listens on the new socket');
});

for (const spare of [1, 0]) {
  test(`a client connecting in a tight loop across a re-bind (spare workers: ${spare}): never refused; ENOENT only while the path is gone`, async (t) => {
    // Without a spare the new socket waits for a fresh worker to load: a long window
    // in which a socket bound at the path would refuse every connect().
    const { sock, r } = await startRunner(t, { extra: ['--set', `tunekit_app_spare_workers=${spare}`] });
    if (spare) await r.waitFor('spare-ready');
    const tally = newTally();
    const seen = connectLoop(sock, acceptedAfter(r, 'socket-rebound'), { tally });
    await until('the loop to be accepted a few times', () => tally.ok >= 20, 30_000, 5);
    fs.unlinkSync(sock);
    await seen;
    t.diagnostic(tallyText(tally));
    assert.ok(r.events.some((e) => e.event === 'socket-rebound'), 'the path was bound again while the loop ran');
    assert.equal(tally.refused, 0, `no connect() refused: ${JSON.stringify(Object.fromEntries(tally.refusedOn))}`);
    assert.deepEqual(tally.other, {}, 'no other error');
    assert.ok(tally.ok >= 200, 'connects accepted after the re-bind');
    // The ENOENTs are the connects made while the file was gone; how many depends
    // on how fast this machine loops, not a figure to assert.
  });
}

test('a client connecting in a tight loop while the runner starts over a stale socket file: the path is never absent, and only the stale file refuses', async (t) => {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  // A socket file nobody listens on: a process binds it and dies by SIGKILL.
  const child = require('node:child_process').spawn(process.execPath, ['-e', `
    require('node:net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'));
  `], { stdio: 'ignore' });
  await new Promise((resolve) => child.on('exit', resolve));
  const stale = fs.lstatSync(sock).ino;
  const r = h.start(t, { args: ['--listen', `unix:${sock}`, '--workers', '2', '--socket-group', group.name] });
  const tally = await connectLoop(sock, acceptedAfter(r, 'ready'));
  t.diagnostic(tallyText(tally));
  assert.ok(r.events.some((e) => e.event === 'stale-socket-removed'), 'the stale file was replaced');
  assert.equal(tally.absent, 0, 'the stale file was replaced in one step: no moment without a file at the path');
  assert.deepEqual([...tally.refusedOn.keys()].filter((ino) => ino !== stale), [], 'refused only by the stale file');
  assert.ok(!tally.fullOn.has(stale) && !tally.fullOn.has(null), `a full accept queue only on the runner's socket: ${tallyText(tally)}`);
  assert.deepEqual(tally.other, {});
  assert.ok(tally.ok >= 200);
});
