'use strict';
// Socket faults under a running stack: what the client gets, nginx's errno line,
// what `tunekit doctor` says. Figures recorded (report.js), never timings asserted.
//   - the socket file deleted (an operator's rm, a tmpfiles clean-up): requests
//     on nginx's pooled upstream connections still get 200; every request that
//     needs a new upstream connection is a 502 (connect() fails with ENOENT) until
//     the runner's check (socketCheckMs) binds the path again and moves its workers
//     onto the new socket: the outage measured. With the check off the app runs on,
//     unreachable by path, until a restart; doctor names it.
//   - the same under a steady load, and under one that makes nginx open new
//     upstream connections all along: the runner gives the new socket its path only
//     once a worker listens on it, so nginx never gets ECONNREFUSED from it; 502s
//     (ENOENT) only for requests that needed a new connection while the path was
//     gone, none for a request sent after it was back. Here rather than in the
//     integration lane (test/integration/runner-rebind.test.js connects straight to
//     the socket in a tight loop): this is what nginx and its clients see, measured
//     for docs/reliability.md.
//   - the app stopped (killed; its socket file left behind): ECONNREFUSED, 502;
//     started again, its runner replaces the stale file: the time until 200 measured.
//   - the socket's mode changed so nginx's workers (run as www-data, as on a
//     host) may not connect: EACCES, 502 on every new upstream connection.
//   - the app's workers stopped (SIGSTOP) with a tiny backlog: the accept queue
//     fills, and nginx's connect() fails at once with EAGAIN, 502.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const { spawn, execFileSync } = require('node:child_process');
const { startStack } = require('../../lib/stack');
const { signal } = require('../../lib/proc');
const { record } = require('./report');
const { stopAfter, doctor: findings, burst: burstOf } = require('./stack');
const client = require('./client');
const { sleep, until } = require('../lib/util');

const doctor = (stack) => findings(stack).filter((f) => f.level === 'fail');
const CLI = path.resolve(__dirname, '../../bin/tunekit.js');
const COMMAND = 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/socket.test.js';

async function startWatched(t, options = {}) {
  const stack = await startStack({ upstream: 'uds', workers: 2, ...options });
  stopAfter(t, stack);
  assert.equal((await fetch(stack.url)).status, 200);
  return stack;
}

const burst = (stack) => burstOf(stack.url);

/**
 * Bursts of 16 requests the app holds for 200 ms each, until one has a 502 (for at
 * most `withinMs`): that burst, or the last one. A request held at the app holds its
 * upstream connection, so nginx's few pooled connections cannot serve a whole burst
 * that reaches it at once; one whose requests came in one at a time, each answered
 * before the next, could be served by one pooled connection without a new connect.
 */
async function burstUntil502(stack, withinMs = 10_000) {
  let b;
  for (const end = Date.now() + withinMs; Date.now() < end;) {
    b = await burstOf(`${stack.url}?delay_ms=200`);
    if (b[502] > 0) break;
  }
  return b;
}

/**
 * Bursts until one is all 200 (`pauseMs` apart, for at most `withinMs`): how many it
 * took and the ms since `since`; null if none was by then. With `run` > 1, until
 * `run` bursts in a row are, counted to the first of them: a burst can be all 200
 * by luck, every request served on nginx's pooled upstream connections, while new
 * connections still fail. `possible()` says whether a new connection can succeed at
 * all (the socket file is there): a burst that starts when it cannot never counts,
 * however slowly its requests come in (one at a time, pooled connections serve them all).
 */
async function backAfter(stack, since, { withinMs = 30_000, pauseMs = 0, run = 1, possible = () => true } = {}) {
  let first = null;
  let inRow = 0;
  for (let i = 1, end = Date.now() + withinMs; Date.now() < end; i++) {
    const counts = possible();
    const b = await burst(stack);
    inRow = counts && b[200] === 16 ? inRow + 1 : 0;
    if (inRow === 1) first = { bursts: i, ms: Date.now() - since };
    if (inRow === run) return first;
    await sleep(pauseMs);
  }
  return null;
}

/**
 * Whether nothing is left unread (ss's Recv-Q 0) on either end of the TCP
 * connections between the client ports `ports` and nginx's `port` on loopback
 * (a closed end is not listed).
 */
function nothingUnread(port, ports) {
  const mine = new Set(ports.flatMap((p) => [`127.0.0.1:${p} 127.0.0.1:${port}`, `127.0.0.1:${port} 127.0.0.1:${p}`]));
  return execFileSync('ss', ['-tnH'], { encoding: 'utf8' }).split('\n').every((line) => {
    const [, recvQ, , local, peer] = line.trim().split(/\s+/);
    return !mine.has(`${local} ${peer}`) || recvQ === '0';
  });
}

function errnoLine(stack, re) {
  const line = fs.readFileSync(stack.errorLogPath, 'utf8').split('\n').find((l) => re.test(l));
  return line ? line.replace(/^.*?\[(?:error|crit)\] \d+#\d+: \*\d+ /, '').replace(/, client:.*$/, '') : null;
}

/** The first of the runner's JSON events (in the stack's app log) that matches, waiting up to `ms`. */
async function appEvent(stack, match, ms = 30_000) {
  for (const end = Date.now() + ms; ; await sleep(100)) {
    const found = fs.readFileSync(stack.appLogPath, 'utf8').split('\n')
      .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find(match);
    if (found || Date.now() > end) return found || null;
  }
}

test('socket file deleted under a running stack: 502 with ENOENT until the runner binds the path again; the outage measured, no restart', { timeout: 120_000 }, async (t) => {
  const stack = await startWatched(t);
  const checkMs = JSON.parse(fs.readFileSync(stack.vars.tunekit_app_config_path, 'utf8')).socketCheckMs;
  assert.ok(checkMs > 0, 'the kit checks the socket path by default');
  const [primary] = stack.pids().app;
  const deletedAt = Date.now();
  fs.unlinkSync(stack.socketPath);
  // More requests at once than the pool holds idle: some need a new connection.
  const b = await burst(stack);
  assert.deepEqual(Object.keys(b).filter((k) => k !== '200' && k !== '502'), [], 'pooled connections answer 200, new ones 502');
  // From the unlink to the first of 5 bursts in a row of 16 all answered 200 (bursts 20 ms apart).
  const backRun = 5;
  const back = await backAfter(stack, deletedAt, { pauseMs: 20, run: backRun, possible: () => fs.existsSync(stack.socketPath) });
  assert.ok(back, 'every request is answered 200 again');
  assert.equal(stack.pids().app[0], primary, 'by the same runner: no restart');
  const st = fs.lstatSync(stack.socketPath);
  assert.ok(st.isSocket(), 'a socket at the path again');
  assert.equal((st.mode & 0o777).toString(8), stack.vars.tunekit_socket_mode.slice(1), 'with the mode of app.json');
  const rebound = await appEvent(stack, (e) => e.event === 'socket-rebound');
  assert.equal(rebound && rebound.path, stack.socketPath, 'the runner logged socket-rebound');
  // The rolling restart ends once the old workers have drained.
  const moved = await appEvent(stack, (e) => e.event === 'reload-done' && e.reason === 'socket-rebound');
  assert.ok(moved, 'the runner moved its workers onto the new socket');
  const line = errnoLine(stack, /connect\(\) to unix:.* failed \(2: No such file or directory\)/);
  const fails = doctor(stack).map((f) => f.id);
  assert.ok(!fails.includes('socket-deleted') && !fails.includes('socket'), `doctor finds nothing wrong with the socket afterwards: ${fails}`);
  const figures = {
    command: COMMAND, checkMs, burst: b, back, backRun, nginx: line, doctorAfter: fails,
    missingMs: { atLeast: rebound.missing_ms_at_least, atMost: rebound.missing_ms_at_most }, movedMs: Date.parse(moved.ts) - deletedAt,
  };
  t.diagnostic(JSON.stringify(figures));
  record('socket-deleted', figures);
});

/**
 * GETs of `url` through nginx in `connections` keep-alive loops, one request at a
 * time each, until stop(): every request's start (ms) and outcome (status, or the
 * error's code). `flowing` counts the answers, for a test to wait on.
 */
function timedLoad(url, connections, stop) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const results = [];
  const loop = async () => {
    while (!stop(results)) {
      const at = Date.now();
      const r = await client.once(agent, url, { method: 'GET' });
      results.push({ at, status: r.status, error: r.err ? r.err.code || r.err.message : undefined });
    }
  };
  const done = Promise.all(Array.from({ length: connections }, loop)).then(() => {
    agent.destroy();
    return results;
  });
  return { results, done };
}

const nginxLines = (stack, re) => fs.readFileSync(stack.errorLogPath, 'utf8').split('\n').filter((l) => re.test(l)).length;

// Three loads, each against its own stack and re-bind, with two nginx workers:
//   steady           16 connections, GET /, the kit's values: nginx keeps up to
//                    tunekit_nginx_upstream_keepalive (64) idle upstream connections
//                    per worker and serves most requests on them (to the old socket's
//                    workers); it opens a new one only when a worker's pool runs short
//                    at that moment (its share of the 16 shifts);
//   new-connections  64 connections, GET /?delay_ms=20 (each held 20 ms by the app,
//                    so dozens are in flight upstream), nginx keeping only 2 idle
//                    upstream connections per worker: nearly every request opens a
//                    new one, as behind an nginx without upstream keep-alive, so
//                    nginx connects all through the re-bind;
//   no-spare         the same without the warm spare (tunekit_app_spare_workers=0):
//                    the new socket waits for a fresh worker to start, the window in
//                    which a socket bound at the path itself would refuse nginx.
const CHURN = ['tunekit_nginx_upstream_keepalive=2'];
const REBIND_LOADS = [
  { name: 'steady', connections: 16, urlPath: '/', set: [] },
  { name: 'new-connections', connections: 64, urlPath: '/?delay_ms=20', set: CHURN },
  { name: 'no-spare', connections: 64, urlPath: '/?delay_ms=20', set: [...CHURN, 'tunekit_app_spare_workers=0'] },
];
// The load goes on until this many requests have started after the workers were
// moved (reload-done), at most LOAD_MAX_MS: bounded by count and by time.
const AFTER_MOVED = 2000;
const LOAD_MAX_MS = 60_000;

for (const load of REBIND_LOADS) {
  test(`socket file deleted under load through nginx (${load.name}, ${load.connections} connections): never ECONNREFUSED from the new socket; 502 (ENOENT) only while the path is gone`, { timeout: 180_000 }, async (t) => {
    let stopping = false;
    let loadDone = null;
    // Registered before the stack's stop, so it runs first: the load ends before nginx does.
    t.after(() => { stopping = true; return loadDone; });
    const stack = await startWatched(t, { set: ['tunekit_nginx_worker_processes=2', ...load.set] });
    const started = Date.now();
    let moved = null; // reload-done's time, once the runner logged it
    let scanned = 0;
    let afterMoved = 0;
    const stop = (results) => {
      for (; moved !== null && scanned < results.length; scanned++) if (results[scanned].at > moved) afterMoved++;
      return stopping || Date.now() - started > LOAD_MAX_MS || afterMoved >= AFTER_MOVED;
    };
    const { results, done } = timedLoad(new URL(load.urlPath, stack.url).href, load.connections, stop);
    loadDone = done;
    await until('the load to flow', () => results.length >= 200, 30_000, 20);
    const deletedAt = Date.now();
    fs.unlinkSync(stack.socketPath);
    const rebound = await appEvent(stack, (e) => e.event === 'socket-rebound');
    assert.ok(rebound, 'the runner logged socket-rebound');
    const doneEvent = await appEvent(stack, (e) => e.event === 'reload-done' && e.reason === 'socket-rebound');
    assert.ok(doneEvent, 'the runner moved its workers onto the new socket');
    moved = Date.parse(doneEvent.ts);
    await done;
    const reboundAt = Date.parse(rebound.ts);
    const status = {};
    const errors = {};
    for (const r of results) {
      if (r.error) errors[r.error] = (errors[r.error] || 0) + 1;
      else status[r.status] = (status[r.status] || 0) + 1;
    }
    const failed = results.filter((r) => r.error || r.status !== 200);
    const failedAfterBack = failed.filter((r) => r.at > reboundAt).length;
    const enoent = nginxLines(stack, /connect\(\) to unix:.* failed \(2: No such file or directory\)/);
    const refused = nginxLines(stack, /connect\(\) to unix:.* failed \(111: Connection refused\)/);
    const fails = doctor(stack).map((f) => f.id);
    const figures = {
      command: COMMAND, connections: load.connections, path: load.urlPath, spareWorkers: stack.vars.tunekit_app_spare_workers,
      upstreamKeepalive: stack.vars.tunekit_nginx_upstream_keepalive,
      requests: results.length, seconds: (Date.now() - started) / 1000,
      status, errors, failed: failed.length, failedAfterBack, failedMs: failed.length ? [failed[0].at - deletedAt, failed[failed.length - 1].at - deletedAt] : null,
      nginx: { enoent, refused }, missingMs: { atLeast: rebound.missing_ms_at_least, atMost: rebound.missing_ms_at_most },
      reboundMs: reboundAt - deletedAt, movedMs: moved - deletedAt, doctorAfter: fails,
    };
    t.diagnostic(JSON.stringify(figures));
    record(`socket-rebind ${load.name}`, figures);
    assert.equal(refused, 0, 'nginx never got ECONNREFUSED: the path names a listening socket from its first moment');
    assert.deepEqual(errors, {}, 'no reset, no client error: every request got an answer');
    assert.deepEqual(Object.keys(status).filter((k) => k !== '200' && k !== '502'), [], 'a request is answered 200, or 502 when nginx could not connect');
    assert.equal(failedAfterBack, 0, 'no request sent after the path was back failed');
    // A 502 is a connect() nginx made while the path was gone: one ENOENT line each.
    assert.equal(status[502] || 0, enoent, '502s and nginx\'s ENOENT lines are the same connects');
    assert.ok(!fails.includes('socket-deleted') && !fails.includes('socket'), `doctor finds nothing wrong with the socket afterwards: ${fails}`);
  });
}

test('socket file deleted, the runner\'s check off: 502 with ENOENT until a restart, named by doctor', { timeout: 120_000 }, async (t) => {
  const stack = await startWatched(t, { set: ['tunekit_app_socket_check_ms=0'] });
  fs.unlinkSync(stack.socketPath);
  const b = await burstUntil502(stack);
  assert.deepEqual(Object.keys(b).filter((k) => k !== '200' && k !== '502'), [], 'pooled connections answer 200, new ones 502');
  assert.ok(b[502] > 0, `a request needing a new upstream connection got 502: ${JSON.stringify(b)}`);
  const line = errnoLine(stack, /connect\(\) to unix:.* failed \(2: No such file or directory\)/);
  assert.ok(line, 'nginx logged connect() ... (2: No such file or directory)');
  // Twice the default check interval later: still gone, still 502 (a window, not a
  // wait for an event: the absence in it is what is tested).
  const waitedMs = 2000;
  await sleep(waitedMs);
  assert.equal(fs.existsSync(stack.socketPath), false, 'nothing bound the path again');
  const later = await burstUntil502(stack);
  assert.ok(later[502] > 0, `still 502: ${JSON.stringify(later)}`);
  const named = doctor(stack).find((f) => f.id === 'socket-deleted');
  assert.ok(named, 'doctor names the deleted socket');
  assert.ok(named.what.includes(`socket file ${stack.socketPath} was deleted`));
  assert.match(named.fix, /the runner's check is off; restart the app/);
  t.diagnostic(`burst after delete: ${JSON.stringify(b)}; ${waitedMs} ms later: ${JSON.stringify(later)}; doctor: ${named.what} | fix: ${named.fix}`);
  record('socket-deleted check-off', { command: COMMAND, burst: b, waitedMs, later, nginx: line, doctor: named.what, fix: named.fix });
});

test('app stopped, its socket file left behind: 502 with ECONNREFUSED, named by doctor; started again, served again', { timeout: 120_000 }, async (t) => {
  const stack = await startWatched(t);
  for (const pid of stack.pids().app.reverse()) signal(pid, 'SIGKILL');
  for (let i = 0; i < 50 && stack.pids().app.length; i++) await new Promise((res) => setTimeout(res, 100));
  assert.ok(fs.statSync(stack.socketPath).isSocket(), 'the killed app left its socket file');
  // Every request is a 502. The first may go out on a pooled connection whose
  // close nginx has not read yet (logged as a reset or premature close, not a
  // refused connect): a few more requests need new connections, and are refused.
  let res;
  let line = null;
  for (let i = 0; i < 10 && !line; i++) {
    res = await fetch(stack.url);
    assert.equal(res.status, 502);
    line = errnoLine(stack, /connect\(\) to unix:.* failed \(111: Connection refused\)/);
  }
  assert.ok(line, 'nginx logged connect() ... (111: Connection refused)');
  const named = doctor(stack).find((f) => f.id === 'socket-listener');
  assert.ok(named, 'doctor names the stopped app');
  assert.match(named.what, /ECONNREFUSED/);

  // The cause removed: the app started again (as systemd's Restart= or an operator
  // would), on the same app.json. Its runner finds the socket file nobody accepts
  // on, removes it and binds the path; the time until nginx serves again measured
  // from the start of the process (node's start and the app's load included).
  const startedAt = Date.now();
  const out = fs.openSync(stack.appLogPath, 'a');
  const again = spawn(process.execPath, [CLI, 'run', '--config', stack.vars.tunekit_app_config_path], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  t.after(async () => {
    if (again.exitCode !== null || again.signalCode) return;
    const gone = new Promise((res) => again.once('exit', res));
    again.kill('SIGTERM');
    await Promise.race([gone, sleep(20_000)]);
    if (again.exitCode === null && !again.signalCode) again.kill('SIGKILL');
  });
  const back = await backAfter(stack, startedAt, { pauseMs: 20, run: 5 });
  assert.ok(back, 'nginx serves again once the app is started again');
  const removed = await appEvent(stack, (e) => e.event === 'stale-socket-removed');
  assert.ok(removed, 'the new runner removed the socket file nobody accepted on');
  t.diagnostic(`doctor: ${named.what} | fix: ${named.fix}; started again: all 200 after ${back.ms} ms (burst ${back.bursts})`);
  record('app-stopped', { command: COMMAND, status: res.status, nginx: line, doctor: named.what, fix: named.fix, backMs: back.ms, backBursts: back.bursts });
});

test('socket mode changed so nginx\'s workers may not connect: 502 with EACCES, named by doctor; back once restored', { timeout: 120_000 }, async (t) => {
  // Root's workers pass every permission check (CAP_DAC_OVERRIDE), and a prefixed
  // stack runs nginx as its caller: the same chmod changes nothing there.
  const asRoot = await startWatched(t);
  fs.chmodSync(asRoot.socketPath, 0o000);
  const rootBurst = await burst(asRoot);
  assert.deepEqual(rootBurst, { 200: 16 }, 'workers running as root connect to a mode 0000 socket');
  await asRoot.stop();

  // As on a host: workers as www-data, the socket 0660 in www-data's group.
  const stack = await startWatched(t, { nginxUser: 'www-data' });
  assert.equal(doctor(stack).find((f) => f.id === 'socket-access'), undefined, 'www-data may connect before the change');
  const mode = fs.statSync(stack.socketPath).mode & 0o777;
  fs.chmodSync(stack.socketPath, 0o600);
  const b = await burstUntil502(stack);
  assert.deepEqual(Object.keys(b).filter((k) => k !== '200' && k !== '502'), [], 'pooled connections answer 200, new ones 502');
  assert.ok(b[502] > 0, `a request needing a new upstream connection got 502: ${JSON.stringify(b)}`);
  const line = errnoLine(stack, /connect\(\) to unix:.* failed \(13: Permission denied\)/);
  assert.ok(line, 'nginx logged connect() ... (13: Permission denied)');
  const named = doctor(stack).find((f) => f.id === 'socket-access');
  assert.ok(named, 'doctor names the socket nginx may not connect to');
  assert.ok(named.what.startsWith(`EACCES: www-data has no write permission on ${stack.socketPath} (mode 600, owner root, group www-data;`), named.what);
  assert.match(named.what, /the socket has mode 0600 \(app\.json binds it 0660\): changed after the runner bound it/);
  assert.match(named.fix, new RegExp(`chmod 0660 ${stack.socketPath}.*or restart the app`));

  const restored = Date.now();
  fs.chmodSync(stack.socketPath, mode);
  const back = await backAfter(stack, restored);
  assert.ok(back, 'every request is answered 200 again once the mode is restored');
  t.diagnostic(`root workers, mode 0000: ${JSON.stringify(rootBurst)}; www-data, mode 0600: ${JSON.stringify(b)}; doctor: ${named.what} | fix: ${named.fix}; back: ${JSON.stringify(back)}`);
  record('socket-eacces', { command: COMMAND, rootBurst, burst: b, nginx: line, doctor: named.what, fix: named.fix, back });
});

test('app workers stopped, a tiny backlog: the accept queue fills and nginx gets EAGAIN at once, 502; named by doctor', { timeout: 120_000 }, async (t) => {
  const backlog = 2;
  const stopped = [];
  // Registered before the stack's own stop, so it runs first: a stopped worker never drains.
  t.after(() => { for (const pid of stopped) signal(pid, 'SIGCONT'); });
  const stack = await startWatched(t, { set: [`tunekit_app_backlog=${backlog}`] });
  stopped.push(...stack.pids().app.slice(1)); // the workers (and a spare, if the runner keeps one)
  assert.ok(stopped.length >= 2, 'two app workers');
  for (const pid of stopped) signal(pid, 'SIGSTOP');

  // 24 requests at once, each on its own connection: a few go out on nginx's idle
  // upstream connections or wait in the accept queue (backlog + 1); the rest are
  // refused with EAGAIN.
  const n = 24;
  const settled = {};
  let done = 0;
  const ports = []; // the client port of each request written
  const all = Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const req = http.get(stack.url, { agent: false }, (res) => {
      res.resume();
      settled[res.statusCode] = (settled[res.statusCode] || 0) + 1;
      done += 1;
      resolve(res.statusCode);
    });
    req.on('finish', () => ports.push(req.socket.localPort));
    req.on('error', reject);
  })));
  // The refused ones come back at once. That is over when nginx has read every
  // request (nginx answers a refused one as it reads it) and this process every
  // answer: nothing unread on either side of the connections, seen in two polls in
  // a row (an answer sent during the first is read before the second).
  let quiet = false;
  await until('nginx to read every request and this process every answer', () => {
    const was = quiet;
    quiet = ports.length === n && nothingUnread(stack.port, ports);
    return was && quiet;
  }, 30_000, 50);
  const whileStopped = { ...settled };
  const waiting = n - done;
  assert.deepEqual(Object.keys(whileStopped), ['502'], `while the workers are stopped only 502s come back: ${JSON.stringify(whileStopped)}`);
  assert.ok(waiting >= backlog + 1, `at least the accept queue's ${backlog + 1} requests wait (${waiting} wait)`);
  const line = errnoLine(stack, /connect\(\) to unix:.* failed \(11: Resource temporarily unavailable\)/);
  assert.ok(line, 'nginx logged connect() ... (11: Resource temporarily unavailable)');
  const named = doctor(stack).find((f) => f.id === 'accept-queue');
  assert.ok(named, 'doctor names the full accept queue');
  assert.ok(named.what.startsWith(`accept queue of ${stack.socketPath} is full (${backlog + 1} connections waiting, backlog ${backlog}): app processes `), named.what);
  const pids = /app processes ([\d, ]+) are stopped/.exec(named.what)[1].split(', ').map(Number);
  assert.ok(pids.length >= 2 && pids.every((p) => stopped.includes(p)), `doctor names the stopped workers: ${pids} of ${stopped}`);
  assert.match(named.fix, new RegExp(`kill -CONT ${pids.join(' ')}`));

  const resumed = Date.now();
  for (const pid of stopped) signal(pid, 'SIGCONT');
  const statuses = await all;
  const waitedMs = Date.now() - resumed;
  assert.equal(statuses.filter((s) => s === 200).length, waiting, 'every request that waited is answered 200 once the workers run');
  const back = await backAfter(stack, resumed);
  assert.ok(back, 'every request is answered 200 again');
  t.diagnostic(`while stopped: ${JSON.stringify(whileStopped)}, ${waiting} waiting; doctor: ${named.what} | fix: ${named.fix}; waiting ones answered ${waitedMs} ms after SIGCONT; back: ${JSON.stringify(back)}`);
  record('accept-queue', { command: COMMAND, backlog, requests: n, whileStopped, waiting, nginx: line, doctor: named.what, fix: named.fix, waitedMs, back });
});
