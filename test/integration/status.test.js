'use strict';
// `tunekit status` against a real local stack (nginx + the runner on a Unix
// socket, metrics on): its rows are the runner's workers, its request counts
// are the load's, nginx and the accept queue read true; an endpoint that is
// down is one line naming it, exit 1.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const autocannon = require('autocannon');
const { startStack } = require('../../lib/stack');
const { freePort, signal } = require('../../lib/proc');
const { stopAfter } = require('../faults/stack');
const { runCommand, until } = require('../lib/util');
const { ROOT } = require('../../lib/template');

const CLI = path.join(ROOT, 'bin/tunekit.js');
const REQUESTS = 2000;
// mtail's address for these runs: a free port, so the error log is what is counted.
let noMtail = null;

async function status(stack, extra = []) {
  const args = [CLI, 'status', '--nginx-conf', path.join(stack.renderDir, 'etc/nginx/nginx.conf'),
    '--app-config', stack.vars.tunekit_app_config_path, '--mtail', `http://127.0.0.1:${noMtail}/metrics`, ...extra];
  return runCommand(process.execPath, args, { timeoutMs: 60_000 });
}

async function statusJson(stack) {
  const r = await status(stack, ['--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// A reading in which every serving worker answered: the primary leaves a worker
// out of a scrape when it takes over a second to answer (a starved machine), and
// the next reading has it again.
function statusOfEvery(stack) {
  const pids = [...stack.ready.workers];
  return until('a status reading with every serving worker', async () => {
    const d = await statusJson(stack);
    return pids.every((pid) => d.workers.some((w) => w.pid === pid)) && d;
  }, 60_000, 200);
}

test('status reads the stack as Prometheus would: one row per worker, the load\'s requests, nginx, the queue; down is one line', { timeout: 180_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2 });
  stopAfter(t, stack);
  // Chosen once the stack listens, so it is none of the stack's ports.
  noMtail = await freePort();
  const before = await statusOfEvery(stack);
  // Count- and time-bounded load through nginx; keep-alive on both hops.
  const load = await autocannon({ url: stack.url, connections: 8, amount: REQUESTS, duration: 60, timeout: 30 });
  const answered = load['2xx'] + load.non2xx;
  assert.ok(answered > 0 && load.errors === 0, `the load ran (${answered} answered, ${load.errors} errors)`);
  const after = await statusOfEvery(stack);

  const serving = after.workers.filter((w) => w.worker !== 'spare');
  assert.deepEqual(serving.map((w) => w.pid).sort(), [...stack.ready.workers].sort(), 'one row per serving worker, with its pid');
  for (const w of after.workers) assert.ok(w.uptimeS > 0 && w.maxFds > w.fds && w.rssBytes > 0, `worker ${w.worker}: ${JSON.stringify(w)}`);
  const sum = (d) => d.workers.reduce((a, w) => a + w.requests, 0);
  // status itself sends nothing through nginx to the app: the difference is the load's, exactly.
  assert.equal(sum(after) - sum(before), answered);
  const reused = after.workers.reduce((a, w) => a + w.reused, 0) - before.workers.reduce((a, w) => a + w.reused, 0);
  assert.ok(reused / answered > 0.9, `nginx reuses its upstream connections: ${reused} of ${answered}`);
  assert.ok(after.nginx.accepted >= after.nginx.handled && after.nginx.requests >= answered, JSON.stringify(after.nginx));
  const backlog = Math.min(stack.vars.tunekit_app_backlog, Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8')));
  assert.deepEqual(after.acceptQueue.sockets.map((s) => [s.socket, s.limit]), [[stack.socketPath, backlog]], 'the queue\'s limit is the backlog');
  assert.match(after.upstreamErrors.source, /tunekit-error\.log|error\.log, the last 5 min/);
  assert.deepEqual(Object.values(after.upstreamErrors.byCause).filter((n) => n > 0), [], 'no failed attempt on a healthy stack');

  const table = await status(stack);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^ {2}worker +pid +uptime +restarts +rss MiB +loop p99 ms +fds\/limit +requests +reuse %$/m);
  assert.match(table.stdout, /^nginx {3}active \d+, waiting \d+, accepted - handled 0 /m);

  const watched = await status(stack, ['--json', '--watch', '1', '--count', '2']);
  assert.equal(watched.stdout.trim().split('\n').length, 2, 'two readings, then it stops by itself');

  // Workers killed under a request: nginx logs the failed attempt (the connection closed
  // under it), status counts it from the error log (no mtail here) and the runner's replacements.
  // (GET is idempotent: nginx may pass it on to a replacement, so its answer is not asserted.)
  const slow = http.get(new URL('/?delay_ms=20000', stack.url), { agent: false }, (res) => res.resume()).on('error', () => {});
  t.after(() => slow.destroy());
  // stub_status's writing counts its own request: above 1, the slow one is with the app.
  await until('the slow request to be with the app', async () => (await statusJson(stack)).nginx.writing >= 2);
  const killed = after.workers.filter((w) => w.worker !== 'spare').map((w) => w.pid);
  for (const pid of killed) signal(pid, 'SIGKILL');
  const replaced = await until('the runner to replace the killed workers', async () => {
    const d = await statusJson(stack);
    return d.app.restarts >= killed.length && d.workers.every((w) => !killed.includes(w.pid)) && d;
  });
  // Each slot's row counts its own restart (the killed worker's slot, once).
  for (const w of replaced.workers.filter((x) => x.worker !== 'spare')) {
    assert.equal(w.restarts, (after.workers.find((x) => x.worker === w.worker).restarts || 0) + 1, `slot ${w.worker}: ${JSON.stringify(replaced.workers)}`);
  }
  assert.ok(replaced.upstreamErrors.byCause.closed_early >= 1, JSON.stringify(replaced.upstreamErrors));
  assert.match(replaced.upstreamErrors.source, /the last 5 min \(mtail does not answer/);
  slow.destroy();

  const port = await freePort();
  const down = await status(stack, ['--metrics', `http://127.0.0.1:${port}/metrics`]);
  assert.equal(down.code, 1);
  assert.equal(down.stdout, '');
  assert.match(down.stderr, new RegExp(`^tunekit status: the app's metrics endpoint http://127\\.0\\.0\\.1:${port}/metrics is down \\(ECONNREFUSED\\): it is tunekit_metrics_listen .*\\n$`));
  const noNginx = await status(stack, ['--status', `http://127.0.0.1:${port}/stub_status`]);
  assert.equal(noNginx.code, 1);
  assert.match(noNginx.stderr, /^tunekit status: nginx's stub_status .* is down \(ECONNREFUSED\): it is tunekit_nginx_status_address\/_port\/_path/);

  // The runner stopped (its primary drains and exits): the endpoint app.json names is down.
  const primary = stack.pids().app[0];
  signal(primary, 'SIGTERM');
  await stack.appExited;
  const stopped = await status(stack);
  assert.equal(stopped.code, 1);
  assert.equal(stopped.stderr.split('\n').length, 2, stopped.stderr);
  assert.match(stopped.stderr, new RegExp(`^tunekit status: the app's metrics endpoint ${stack.metrics[0].url.replace(/\./g, '\\.')} is down \\(ECONNREFUSED\\)`));
});
