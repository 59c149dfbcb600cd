'use strict';
// The pacer's open loop (loadtest/pacer.js, maxConnections) and its ladder of
// rates (phases), against the fixture server holding each request 200 ms: about
// rate × 0.2 s requests are in flight at once, more than the pacer's starting
// connections on any machine (a slower one only holds more).

const test = require('node:test');
const assert = require('node:assert/strict');
const { startFixture } = require('../fixtures/loadtest/start');
const { runPaced } = require('../../loadtest/pacer');

const HOLD_MS = 200;

async function fixture(t) {
  const f = await startFixture({ delayMs: HOLD_MS });
  t.after(() => f.stop());
  return f;
}

test('open loop: a request due while every connection is busy gets a new connection, never a wait', async (t) => {
  const f = await fixture(t);
  const r = await runPaced({ url: f.url, rate: 100, duration: 2, connections: 2, maxConnections: 500, timeoutS: 20 });
  assert.equal(r.requests.sent, 200);
  assert.equal(r.requests.ok, 200, `every request answered 2xx: ${JSON.stringify(r.requests.kinds)}`);
  assert.equal(r.queue.queued, 0, 'no request waited for a connection');
  assert.ok(r.queue.opened > 0 && r.queue.peak === 2 + r.queue.opened, `connections opened: ${JSON.stringify(r.queue)}`);
});

test('closed pool (the default): the same load waits for its two connections', async (t) => {
  const f = await fixture(t);
  const r = await runPaced({ url: f.url, rate: 100, duration: 2, connections: 2, timeoutS: 20 });
  assert.equal(r.requests.ok, 200);
  assert.ok(r.queue.queued > 0, `requests waited: ${JSON.stringify(r.queue)}`);
  assert.equal(r.queue.opened, 0);
});

test('a ladder of rates: each request counts in its own step, the settling part of a step in none', async (t) => {
  const f = await fixture(t);
  const phases = [{ rate: 50, durationS: 2, settleS: 1 }, { rate: 100, durationS: 1, settleS: 0 }];
  const samples = [];
  const r = await runPaced({ url: f.url, phases, connections: 2, maxConnections: 500, timeoutS: 20, sample: async () => { samples.push(1); return { probe: samples.length }; } });
  assert.equal(r.requests.sent, 200, '50 × 2 + 100 × 1 requests');
  assert.equal(r.requests.ok, 200);
  const counted = r.phases.map((p) => p.ok + p.non2xx + p.errors + p.timeouts);
  assert.deepEqual(counted, [50, 100], 'the first step counts its second second only');
  assert.equal(r.timeline.length, 3);
  assert.deepEqual(r.timeline.map((s) => s.ok), [50, 50, 100], 'the timeline counts every second, by the time each request was due');
  assert.ok(samples.length >= 1 && r.timeline.some((s) => s.sample && s.sample.probe >= 1), 'the sampler ran and its value is in the timeline');
});

test('warm-up: a server slower than the warm-up\'s 50 requests per connection still starts the window idle: none sent after 2 s, every one answered before t0', async (t) => {
  // One request at a time, 20 ms each: at most 50 a second, on any machine. 20 connections × 50 warm requests would be 20 s of it.
  const http = require('node:http');
  const { slotted } = require('../fixtures/overload/slots-app');
  const serve = slotted({ slots: 1, slotMs: 20 });
  let arrivals = 0;
  const server = http.createServer((req, res) => {
    arrivals++;
    serve(req, res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  const r = await runPaced({ url: `http://127.0.0.1:${server.address().port}/`, rate: 10, duration: 2, connections: 20, timeoutS: 20 });
  assert.equal(r.requests.ok, 20);
  const { sent, answered, failed, givenUp } = r.warm;
  assert.equal(answered + failed + givenUp, sent, `every warm request settled before t0: ${JSON.stringify(r.warm)}`);
  assert.equal(givenUp, 0);
  // Sent: one per connection, then only while the 2 s lasted (at most 50 answered a second, plus the first 20 out at once).
  assert.ok(sent >= 20 && sent <= 20 + 50 * 3, `warm requests sent: ${sent}, not 20 × 50`);
  assert.equal(arrivals, sent + r.requests.sent, 'the server saw the warm requests and the measured ones, nothing after');
});
