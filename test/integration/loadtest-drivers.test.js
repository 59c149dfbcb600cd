'use strict';
// The load generators against a small Node cluster on loopback (the fixture
// server, two workers): totals add up, nothing fails on a healthy server,
// every worker is served, the paced mode keeps its rate. Invariants only.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startFixture } = require('../fixtures/loadtest/start');
const { measure } = require('../../loadtest/measure');
const { available: wrkAvailable } = require('../../loadtest/wrk');

function target(fx, name) {
  return { name, url: fx.url, socketPath: fx.socketPath, pids: fx.pids, errorLogPath: null };
}

function assertTotals(r) {
  const q = r.requests;
  assert.ok(q.completed > 0, 'some responses');
  assert.equal(q.ok + q.non2xx, q.completed, 'ok + non-2xx = completed');
  assert.equal(q.errors, 0, 'no errors');
  assert.equal(q.timeouts, 0, 'no timeouts');
  assert.equal(q.non2xx, 0, 'no non-2xx');
  assert.equal(r.latencyUs.count, q.ok, 'one latency per 2xx response');
  assert.ok(r.latencyUs.min <= r.latencyUs.p50 && r.latencyUs.p50 <= r.latencyUs.p90 &&
    r.latencyUs.p90 <= r.latencyUs.p99 && r.latencyUs.p99 <= r.latencyUs.p999 && r.latencyUs.p999 <= r.latencyUs.max);
  assert.ok(r.server.cpuUs > 0 && r.server.cpuUsPerReq > 0, 'server CPU accounted');
  assert.ok(r.generator.cpuUs > 0, 'generator CPU accounted');
}

test('autocannon over 2 generator processes: merged totals add up, every worker served', async (t) => {
  const fx = await startFixture({ workers: 2 });
  t.after(() => fx.stop());
  const r = await measure(target(fx, 'fixture'), { mode: 'saturation', driver: 'autocannon', connections: 8, duration: 2, procs: 2, timeoutS: 10 });
  assertTotals(r);
  assert.equal(r.generator.processes, 2);
  assert.equal(r.workers.sampled, r.requests.completed, 'every body counted');
  const counted = Object.values(r.workers.byPid).reduce((a, b) => a + b, 0);
  assert.equal(counted, r.workers.sampled);
  assert.deepEqual(r.workers.missing, [], 'every worker served');
  assert.equal(r.workers.served, 2);
});

test('autocannon drives a Unix socket too', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lt-uds-'));
  const fx = await startFixture({ workers: 2, listen: path.join(dir, 'app.sock') });
  t.after(async () => {
    await fx.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const r = await measure(target(fx, 'fixture-uds'), { mode: 'saturation', driver: 'autocannon', connections: 4, duration: 1, procs: 1, timeoutS: 10 });
  assertTotals(r);
  assert.deepEqual(r.workers.missing, []);
});

test('wrk: its own totals and µs percentiles come through', { skip: !wrkAvailable() && 'wrk is not installed (apt-get install -y wrk)' }, async (t) => {
  const fx = await startFixture({ workers: 2 });
  t.after(() => fx.stop());
  const r = await measure(target(fx, 'fixture'), { mode: 'saturation', driver: 'wrk', connections: 8, duration: 1, timeoutS: 10 });
  assertTotals(r);
  assert.equal(r.driver, 'wrk');
  assert.equal(r.workers, null, 'wrk reads no bodies');
  await assert.rejects(
    measure({ ...target(fx, 'x'), socketPath: '/tmp/x.sock' }, { mode: 'saturation', driver: 'wrk', connections: 1, duration: 1 }),
    /wrk cannot connect to a Unix socket/,
  );
});

test('paced mode: the achieved rate is within 2% of the target, every request answered', async (t) => {
  const fx = await startFixture({ workers: 2 });
  t.after(() => fx.stop());
  const rate = 400;
  const r = await measure(target(fx, 'fixture'), { mode: 'paced', rate, connections: 8, duration: 3, timeoutS: 10 });
  assertTotals(r);
  assert.equal(r.driver, 'pacer');
  assert.equal(r.requests.sent, rate * 3, 'exactly rate × duration requests');
  assert.equal(r.requests.completed, r.requests.sent);
  assert.ok(Math.abs(r.achievedRate - rate) / rate <= 0.02, `achieved ${r.achievedRate} req/s for a target of ${rate}`);
  assert.equal(r.sendLagUs.count, r.requests.sent, 'one send-lag sample per request');
  // Latency from the intended send time is never shorter than from the actual one.
  assert.ok(r.latencyUs.p50 >= r.serviceUs.p50);
  assert.deepEqual(r.workers.missing, []);
});

test('paced past capacity: requests queue for a connection, the wait counts, the report says so', async (t) => {
  // 4 connections to a server that takes 20 ms: at most ~200 req/s, asked for 400.
  const fx = await startFixture({ workers: 2, delayMs: 20 });
  t.after(() => fx.stop());
  const r = await measure(target(fx, 'fixture'), { mode: 'paced', rate: 400, connections: 4, duration: 2, timeoutS: 10 });
  assert.equal(r.requests.completed, r.requests.sent, 'every request answered in the end');
  assert.ok(r.queue.queued > 0, 'requests waited for a free connection');
  assert.ok(r.latencyUs.p50 > r.serviceUs.p50, 'latency from the intended time includes the wait');
  assert.ok(r.warnings.some((w) => /did not keep up with 400 req\/s/.test(w)), r.warnings.join('\n'));
});
