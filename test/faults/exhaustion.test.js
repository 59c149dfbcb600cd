'use strict';
// Exhaustion: the app's open-files limit (RLIMIT_NOFILE) too low for the load.
// When accept() fails with EMFILE, libuv closes a descriptor it keeps in reserve,
// accepts the waiting connections and closes them at once, then takes the reserve
// back (uv__emfile_trick in src/unix/stream.c,
// https://github.com/libuv/libuv/blob/v1.x/src/unix/stream.c): Node's code never
// sees the error, so the runner logs nothing and keeps serving. nginx sees each
// such connection reset with its request unread: a 502.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const { startStack } = require('../../lib/stack');
const { record } = require('./report');
const { stopAfter, doctor, errorLog, burst } = require('./stack');
const { until } = require('../lib/util');

const COMMAND = 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/exhaustion.test.js';

test('app open-files limit too low (EMFILE): 502 for the connections past it, the runner keeps serving and logs nothing, doctor names the limit', { timeout: 120_000 }, async (t) => {
  // The limits are given back before the stack stops (hooks run in order), so a
  // worker drains with the descriptors it needs.
  const lowered = [];
  t.after(() => {
    for (const { pid, was } of lowered) spawnSync('prlimit', ['--pid', String(pid), `--nofile=${was}`]);
  });
  const stack = await startStack({ upstream: 'uds', workers: 1 });
  stopAfter(t, stack);
  assert.equal((await fetch(stack.url)).status, 200);
  // Room for 8 more descriptors in each app child (the worker, and a spare if the
  // runner keeps one), set on the running processes as a low LimitNOFILE= would.
  const children = stack.pids().app.slice(1);
  const limits = [];
  for (const pid of children) {
    const room = fs.readdirSync(`/proc/${pid}/fd`).length + 8;
    const [soft, hard] = /Max open files\s+(\S+)\s+(\S+)/.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8')).slice(1);
    lowered.push({ pid, was: `${soft}:${hard}` });
    const r = spawnSync('prlimit', ['--pid', String(pid), `--nofile=${room}:${room}`], { encoding: 'utf8' });
    assert.equal(r.status, 0, `prlimit --pid ${pid}: ${r.stderr}`);
    limits.push(room);
  }

  // 40 requests held 500 ms each: far more upstream connections than 8 descriptors.
  const n = 40;
  const b = await burst(`${stack.url}?delay_ms=500`, n);
  assert.deepEqual(Object.keys(b).filter((k) => k !== '200' && k !== '502'), [], `only 200 and 502: ${JSON.stringify(b)}`);
  assert.ok(b[502] > 0 && b[200] > 0, `some connections past the limit got 502, the others 200: ${JSON.stringify(b)}`);
  const resets = errorLog(stack).filter((l) => /recv\(\) failed \(104: Connection reset by peer\) while reading response header from upstream/.test(l));
  assert.ok(resets.length > 0, 'nginx logged the reset connections');
  const appLog = fs.readFileSync(stack.appLogPath, 'utf8');
  const emfileLines = appLog.split('\n').filter((l) => /EMFILE|too many open files/i.test(l)).length;

  // The same worker serves on: nothing crashed, nothing was restarted.
  assert.deepEqual(stack.pids().app.slice(1), children, 'the app workers are the same processes');
  // One at a time (nginx's idle upstream connections hold some of the worker's few
  // descriptors, so a new burst would overflow it again).
  const after = {};
  for (let i = 0; i < 8; i++) {
    const { status } = await fetch(stack.url);
    after[status] = (after[status] || 0) + 1;
  }
  assert.deepEqual(after, { 200: 8 }, 'requests one at a time are answered 200 after the burst');

  const named = doctor(stack).find((f) => f.id === 'app-nofile' && f.level !== 'ok');
  assert.ok(named, 'doctor names the app\'s low open-files limit');
  const limit = Number((/open-files limit of (\d+)/.exec(named.what) || [])[1]);
  assert.ok(limits.includes(limit), `doctor names a limit set on a worker (${limits}): ${named.what}`);
  assert.match(named.what, /\(104: Connection reset by peer\)/, 'doctor says what nginx logs for it');
  t.diagnostic(`limit ${limit}: ${JSON.stringify(b)}; ${resets.length} resets in nginx's log; ${emfileLines} app log lines about EMFILE; after: ${JSON.stringify(after)}; doctor: ${named.level}: ${named.what} | fix: ${named.fix}`);
  record('app-emfile', {
    command: COMMAND, limit, requests: n, burst: b, nginx: resets[0].replace(/^.*?\[error\] \d+#\d+: \*\d+ /, '').replace(/, client:.*$/, ''),
    nginxResets: resets.length, appLogLines: emfileLines, after, doctorLevel: named.level, doctor: named.what, fix: named.fix,
  });
});

test('nginx worker_connections too low: nginx logs that they are not enough, doctor names it from the error log with the fix', { timeout: 60_000 }, async (t) => {
  // One nginx worker with 32 connections: each proxied request holds a client and
  // an upstream connection, so 40 requests held 500 ms need far more.
  const stack = await startStack({ upstream: 'uds', workers: 1, set: ['tunekit_nginx_worker_processes=1', 'tunekit_nginx_worker_connections=32', 'tunekit_nginx_upstream_keepalive=8'] });
  stopAfter(t, stack);
  const n = 40;
  const settled = await Promise.allSettled(Array.from({ length: n }, () => fetch(`${stack.url}?delay_ms=500`, { signal: AbortSignal.timeout(3000) })));
  const seen = {};
  for (const r of settled) {
    const k = r.status === 'fulfilled' ? String(r.value.status) : (r.reason.name === 'TimeoutError' ? 'no answer in 3 s' : 'closed without an answer');
    seen[k] = (seen[k] || 0) + 1;
  }
  const alert = () => errorLog(stack).filter((l) => /worker_connections are not enough/.test(l));
  await until('nginx to log that its worker_connections are not enough', () => alert().length > 0, 5000);
  assert.ok((seen[200] || 0) < n, `not every request could be served: ${JSON.stringify(seen)}`);
  const named = doctor(stack).find((f) => f.id === 'worker-connections');
  assert.ok(named, 'doctor names the exhausted worker_connections');
  assert.equal(named.level, 'fail');
  assert.match(named.what, /worker_connections are not enough/, 'doctor quotes nginx\'s alert');
  assert.match(named.what, /worker_connections 32 serve about 16 requests at once/);
  assert.match(named.fix, /tunekit_nginx_worker_connections/);
  t.diagnostic(`${JSON.stringify(seen)}; nginx: ${alert()[0]}; doctor: ${named.what} | fix: ${named.fix}`);
  record('nginx-worker-connections', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/exhaustion.test.js', requests: n, seen,
    nginx: alert()[0].replace(/^.*?\[(\w+)\] \d+#\d+: /, '[$1] '), alerts: alert().length, doctor: named.what, fix: named.fix,
  });
});
