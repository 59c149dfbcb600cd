'use strict';
// The TLS bench's arithmetic without a server: h2load's summary, nginx's
// handshake counts from the access log, CPU per handshake (TLS minus plain,
// per round), the target verdicts and the limits it prints beside them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseSummary } = require('../../loadtest/h2load');
const bench = require('../../loadtest/tls-bench');
const table = require('../../loadtest/tls-table');
const kit = require('../../loadtest/handshakes-kit');

// h2load 1.52's summary, as printed for 20 HTTP/1.1 clients.
const H2LOAD_OUT = `
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: http/1.1
finished in 23.24ms, 860.51 req/s, 152.10KB/s
requests: 20 total, 20 started, 18 done, 17 succeeded, 3 failed, 2 errored, 0 timeout
status codes: 17 2xx, 0 3xx, 1 4xx, 0 5xx
traffic: 3.54KB (3620) total, 2.11KB (2160) headers (space savings 0.00%), 680B (680) data
`;

test('h2load summary: requests, failures and status classes are read, not guessed', () => {
  const s = parseSummary(H2LOAD_OUT);
  assert.equal(s.total, 20);
  assert.equal(s.done, 18);
  assert.equal(s.succeeded, 17);
  assert.equal(s.errored, 2);
  assert.equal(s.s2xx, 17);
  assert.equal(s.s4xx, 1);
  assert.equal(s.protocol, 'http/1.1');
  assert.equal(s.tls, 'TLSv1.3');
  assert.throws(() => parseSummary('connect error'), /h2load printed no summary/);
});

test('handshakes are counted from the access log written since the mark: r resumed, . full, - plain', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-tlsbench-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'access.log');
  const line = (v) => `127.0.0.1 - - [23/Nov/2026:13:44:31 +0000] "GET / HTTP/1.1" 200 34 "-" "-" rt=0.001 uct=0.000 urt=0.000 tls=TLSv1.3 resumed=${v} cr=1\n`;
  fs.writeFileSync(log, line('.').repeat(5));
  const mark = fs.statSync(log).size;
  fs.appendFileSync(log, line('r').repeat(7) + line('.').repeat(2) + line('-'));
  assert.deepEqual(bench.handshakesSince(log, mark), { full: 2, resumed: 7, lines: 10 });
  assert.equal(bench.handshakesSince(path.join(dir, 'missing.log'), 0), null);
});

test('handshakes --kit counts a measurement\'s own requests only: a late line of the readiness probe or of the previous measurement is left out', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-tlsbench-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'access.log');
  const line = (target, proto, v) => `127.0.0.1 - - [28/Nov/2026:08:58:01 +0000] "GET ${target} ${proto}" 200 34 "-" "-" rt=0.001 tls=TLSv1.3 resumed=${v} cr=1\n`;
  const url = { url: 'https://127.0.0.1:8443/', ca: '/tmp/ca.pem' };
  // nginx writes a line once the response has gone: these land after the next measurement's offset.
  fs.writeFileSync(log, line('/', 'HTTP/1.1', '.'));
  const h1 = new URL(kit.curlArgs(url, 'h1', 'h1-7-1').at(-1).replace('[1-1000000]', '3'));
  fs.appendFileSync(log, line(h1.pathname + h1.search, 'HTTP/1.1', '.'));
  const h3 = new URL(kit.curlArgs(url, 'h3', 'h3-7-2').at(-1));
  fs.appendFileSync(log, line(h3.pathname + h3.search, 'HTTP/3.0', '.').repeat(4) + line('/?tunekit-handshakes=h3-7-20', 'HTTP/3.0', '.'));
  assert.deepEqual(kit.logSince(log, 0, 'h3-7-2'), { requests: 4, full: 4, resumed: 0, protocols: { 'HTTP/3.0': 4 } });
  assert.deepEqual(kit.logSince(log, 0, 'h1-7-1').protocols, { 'HTTP/1.1': 1 });
});

// One run as measure() returns it, reduced to what the bench reads.
function run(round, front, client, { rps, nginxUs, appUs = 100, genUs = 500, n = 1000, full = 0, resumed = 0 }) {
  return {
    round, front, client, driver: 'x', reqPerSec: rps,
    latencyUs: { p50: 1000, p99: 5000 },
    requests: { completed: n, errors: 0, timeouts: 0, non2xx: 0 },
    server: { nginxCpuUs: nginxUs * n, appCpuUs: appUs * n, cpuUs: (nginxUs + appUs) * n },
    generator: { cpuUs: genUs * n, machineShare: 0.3 },
    handshakes: front === 'plain' ? { full: 0, resumed: 0, lines: n } : { full, resumed, lines: n },
    errorLog: { lines: 0 },
  };
}

test('CPU per full handshake is nginx CPU per connection over TLS minus plain, per round; the ratio is tuned over stock', () => {
  const results = [];
  for (const round of [1, 2]) {
    results.push(run(round, 'plain', 'new', { rps: 2000, nginxUs: 100 }));
    results.push(run(round, 'tls-stock', 'new', { rps: 500, nginxUs: 100 + 1400 * round, full: 1000 }));
    results.push(run(round, 'tls-tuned', 'new', { rps: 1500, nginxUs: 100 + 400 * round, full: 1000 }));
  }
  const summary = bench.summarise(results, ['new'], 2);
  const tuned = summary.find((s) => s.front === 'tls-tuned');
  assert.deepEqual(tuned.handshakeCpuUs, { median: 600, min: 400, max: 800, n: 2 });
  assert.deepEqual(tuned.handshakes, { full: 2000, resumed: 0, resumedShare: 0 });
  assert.equal(summary.find((s) => s.front === 'plain').handshakeCpuUs, null);
  const [r] = bench.ratios(results, ['new'], 2);
  assert.equal(r.name, 'tls-tuned/tls-stock new');
  assert.equal(r.reqPerSec.median, 3);
  // Round 1: 400/1400, round 2: 800/2800: both 2/7.
  assert.ok(Math.abs(r.handshakeCpuUs.median - 2 / 7) < 1e-9);
});

test('verdicts: a target is judged on the 95% interval over the rounds, and resumption on tls-tuned', () => {
  const results = [];
  for (const round of [1, 2, 3]) {
    results.push(run(round, 'plain', 'new', { rps: 2000, nginxUs: 100 }));
    // Round 3 gives the tuned front only 2.5x the stock rate.
    results.push(run(round, 'tls-stock', 'new', { rps: 400, nginxUs: 1500, full: 1000 }));
    results.push(run(round, 'tls-tuned', 'new', { rps: round === 3 ? 1000 : 1400, nginxUs: 500, full: 1000 }));
    results.push(run(round, 'plain', 'returning', { rps: 5000, nginxUs: 60 }));
    results.push(run(round, 'tls-stock', 'returning', { rps: 1000, nginxUs: 500, full: 600, resumed: 400 }));
    results.push(run(round, 'tls-tuned', 'returning', { rps: 1100, nginxUs: 450, full: 5, resumed: 995 }));
  }
  const clients = ['new', 'returning'];
  const doc = {
    host: { cores: 2 },
    summary: bench.summarise(results, clients, 3),
    ratios: bench.ratios(results, clients, 3),
    crypto: { rsa2048SignUs: 800, ecdsaP256SignUs: 30 },
  };
  const lines = table.verdicts(doc);
  const find = (re) => lines.find((l) => re.test(l));
  // 3.5, 3.5 and 2.5: the median meets 3×, the interval (t, 2 degrees of freedom) holds it.
  assert.match(find(/^new-client connections per second/),
    /: 3\.13 \(1\.93–5\.07, 95%\) \(target ≥ 3×: not resolved by this run \(interval 1\.93–5\.07 holds 3\)\)$/);
  // (500-100)/(1500-100) = 0.29 in every round: a zero-width interval below 0.33.
  assert.match(find(/^nginx CPU per full handshake/), /: 0\.29 \(0\.29–0\.29, 95%\) \(target ≤ 0\.33×: met\)$/);
  assert.deepEqual(table.ratioRow(doc.ratios[0]).slice(0, 2), ['tls-tuned/tls-stock new', '3.13 (1.93–5.07)']);
  assert.match(find(/resumed on tls-tuned/), /99\.5% of 3,000 handshakes \(target ≥ 90%: met\)/);
  assert.match(find(/resumed on tls-stock/), /40\.0% of 3,000 handshakes$/);
  // The limits: total CPU per connection (server + generator) and the signature share.
  assert.match(find(/^why: a new connection/), /2,100 µs on tls-stock, 1,100 µs on tls-tuned .* at most 1\.91×/);
  assert.match(find(/^why: of tls-tuned's 400 µs/), /the other 370 µs .* best ratio here at 0\.34×/);
});
