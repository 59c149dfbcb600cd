'use strict';
// Socket faults under a running stack: what the client gets, nginx's errno line,
// what `tunekit doctor` says. Figures recorded (report.js), never timings asserted.
//   - the socket file deleted (an operator's rm, a tmpfiles clean-up): requests
//     on nginx's pooled upstream connections still get 200; every request that
//     needs a new upstream connection is a 502 (connect() fails with ENOENT) while
//     the app runs on, unreachable by path.
//   - the app stopped (killed; its socket file left behind): ECONNREFUSED, 502.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startStack } = require('../../lib/stack');
const { signal } = require('../../lib/proc');
const { record } = require('./report');
const { stopAfter, doctor: findings } = require('./stack');

const doctor = (stack) => findings(stack).filter((f) => f.level === 'fail');

async function startWatched(t) {
  const stack = await startStack({ upstream: 'uds', workers: 2 });
  stopAfter(t, stack);
  assert.equal((await fetch(stack.url)).status, 200);
  return stack;
}

function errnoLine(stack, re) {
  const line = fs.readFileSync(stack.errorLogPath, 'utf8').split('\n').find((l) => re.test(l));
  return line ? line.replace(/^.*?\[(?:error|crit)\] \d+#\d+: \*\d+ /, '').replace(/, client:.*$/, '') : null;
}

test('socket file deleted under a running stack: 502 with ENOENT, named by doctor', { timeout: 120_000 }, async (t) => {
  const stack = await startWatched(t);
  fs.unlinkSync(stack.socketPath);
  // More requests at once than the pool holds idle: some need a new connection.
  const burst = {};
  for (const r of await Promise.all(Array.from({ length: 16 }, () => fetch(stack.url)))) burst[r.status] = (burst[r.status] || 0) + 1;
  assert.deepEqual(Object.keys(burst).filter((k) => k !== '200' && k !== '502'), [], 'pooled connections answer 200, new ones 502');
  assert.ok(burst[502] > 0, `a request needing a new upstream connection got 502: ${JSON.stringify(burst)}`);
  const line = errnoLine(stack, /connect\(\) to unix:.* failed \(2: No such file or directory\)/);
  assert.ok(line, 'nginx logged connect() ... (2: No such file or directory)');
  const fails = doctor(stack);
  const named = fails.find((f) => f.id === 'socket-deleted');
  assert.ok(named, `doctor names the deleted socket: ${JSON.stringify(fails)}`);
  assert.ok(named.what.includes(`socket file ${stack.socketPath} was deleted`));
  assert.match(named.fix, /restart the app/);
  t.diagnostic(`burst after delete: ${JSON.stringify(burst)}; doctor: ${named.what} | fix: ${named.fix}`);
  record('socket-deleted', { command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/socket.test.js', burst, nginx: line, doctor: named.what, fix: named.fix });
});

test('app stopped, its socket file left behind: 502 with ECONNREFUSED, named by doctor', { timeout: 120_000 }, async (t) => {
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
  t.diagnostic(`doctor: ${named.what} | fix: ${named.fix}`);
  record('app-stopped', { command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/socket.test.js', status: res.status, nginx: line, doctor: named.what, fix: named.fix });
});
