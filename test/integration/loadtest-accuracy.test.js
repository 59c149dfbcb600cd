'use strict';
// Microsecond percentiles are right: against a server that holds every
// response for exactly 50 ms (timer, then a spin to the hrtime deadline), the
// kit's p50 is within 5% of that known delay, never below it, agrees with an
// independent reference (the same requests timed one by one with
// process.hrtime on one raw keep-alive socket), and carries sub-millisecond
// digits (autocannon's own percentiles are whole ms).
//
// Why 50 ms and not the 2 ms the issue gives as an example: two costs on
// this kind of VM are not the kit's error, and at 2 ms they exceed 5%.
// - A plain setTimeout(2) fires anywhere from 1.2 ms (libuv counts from the
//   loop's cached time) to 2.2 ms, so the fixture sleeps to about 1 ms before
//   the deadline and spins the rest (x-server-us: deadline + 10–40 µs).
// - Waking a client whose vCPU sat idle costs 0.1–0.8 ms, more after longer
//   waits (raw-socket client, median over the wait: +0.22–0.31 ms after a
//   2 ms wait, +0.42–0.53 ms after 10 ms, +0.53–0.60 ms after 20 ms), and it
//   moves between runs: CI once saw the kit at 2715 µs and the reference at
//   2417 µs against the same 2 ms server. Spinners at SCHED_IDLE holding the
//   cores awake did not remove it. At 50 ms it is about 1–2% and the 5% bound
//   tests the kit, not the hypervisor; resolution is tested separately (a
//   loopback round trip reported as tens of µs, digits below the ms).

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { startFixture } = require('../fixtures/loadtest/start');
const { measure } = require('../../loadtest/measure');
const { median } = require('../../loadtest/stats');

// n sequential requests on one raw keep-alive TCP connection, like
// autocannon's clients (no http.Agent, no ClientRequest): client-side time
// from the write to the last body byte (hrtime, µs), and server-side time
// (x-server-us). The response is complete when content-length bytes of body
// have arrived.
function reference(url, n) {
  const u = new URL(url);
  const request = Buffer.from(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  return new Promise((resolve, reject) => {
    const client = [];
    const server = [];
    const sock = net.connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    let t0 = 0n;
    const send = () => {
      t0 = process.hrtime.bigint();
      sock.write(request);
    };
    sock.setNoDelay(true);
    sock.on('connect', send);
    sock.on('error', reject);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buf.subarray(0, end).toString('latin1');
      const len = Number(/content-length: (\d+)/i.exec(head)[1]);
      if (buf.length < end + 4 + len) return;
      client.push(Number(process.hrtime.bigint() - t0) / 1000);
      server.push(Number(/x-server-us: ([\d.]+)/i.exec(head)[1]));
      buf = buf.subarray(end + 4 + len);
      if (client.length < n) send();
      else {
        sock.destroy();
        resolve({ client: median(client), server: median(server) });
      }
    });
  });
}

const DELAY_US = 50000;

test('p50 against a 50 ms server is within 5% of the delay and of an independent hrtime reference, in µs', async (t) => {
  const fx = await startFixture({ workers: 1 });
  t.after(() => fx.stop());
  const run = (path, duration) => measure({ name: 'fixture', url: `${fx.url}${path}`, socketPath: null, pids: null },
    { mode: 'saturation', driver: 'autocannon', connections: 1, procs: 1, duration, timeoutS: 10 });

  const base = await run('?delay_ms=0', 2);
  const delayed = await run(`?delay_ms=${DELAY_US / 1000}`, 4);
  const ref = await reference(`${fx.url}?delay_ms=${DELAY_US / 1000}`, 80);
  const p50 = delayed.latencyUs.p50;
  t.diagnostic(`server-side delay p50 ${ref.server} µs, reference client p50 ${ref.client} µs, kit min ${delayed.latencyUs.min} p50 ${p50} µs, kit p50 without delay ${base.latencyUs.p50} µs`);

  assert.ok(ref.server >= DELAY_US && ref.server < DELAY_US * 1.005, `the fixture held responses ${ref.server} µs, not ${DELAY_US}`);
  assert.ok(delayed.latencyUs.min >= DELAY_US, `kit min ${delayed.latencyUs.min} µs is shorter than the server's ${DELAY_US} µs`);
  // Within 5% of the delay, or of what the independent client saw when the
  // machine itself added to it (other tenants: a full CI run measured the
  // reference at 52.4 ms and the kit at 53.3 ms for this 50 ms server).
  const bound = Math.max(DELAY_US, ref.client) * 1.05;
  assert.ok(p50 <= bound, `kit p50 ${p50} µs is more than 5% above the known ${DELAY_US} µs and the reference ${ref.client} µs`);
  assert.ok(Math.abs(p50 - ref.client) / ref.client <= 0.05, `kit p50 ${p50} µs vs reference ${ref.client} µs`);
  // Sub-millisecond digits: the distribution is not quantised to whole ms.
  assert.ok([delayed.latencyUs.min, p50, delayed.latencyUs.p90].some((v) => v % 1000 !== 0));
  assert.ok(base.latencyUs.p50 > 0 && base.latencyUs.p50 < 1000, `a loopback round trip of ${base.latencyUs.p50} µs is reported in µs, below 1 ms`);
});
