'use strict';
// The runner's metrics endpoint with real runner processes: an address that is
// taken, a port out of range or a socket path too long is refused by name before
// anything starts (no app socket, no worker); the primary's endpoint carries every
// worker's series and its own counters through a kill -9 and a SIGHUP; requests
// pipelined on one keep-alive connection are counted once each, by their own status
// and as new or reused, while that connection stays open.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const http = require('node:http');
const h = require('../fixtures/runner/harness');
const { freePort } = require('../../lib/proc');
const { until } = require('../lib/util');

const group = h.someGroup();

function runArgs(sock, metricsListen, extra = []) {
  return ['--listen', `unix:${sock}`, '--workers', '2', '--socket-group', group.name,
    '--set', 'tunekit_metrics=true', '--set', `tunekit_metrics_listen=${metricsListen}`, ...extra];
}

/** A runner of 2 workers on DIR/app.sock with metrics on a free port, ready. */
async function startWithMetrics(t) {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  const url = `http://127.0.0.1:${await freePort()}/metrics`;
  const r = h.start(t, { args: runArgs(sock, `tcp:${new URL(url).host}`) });
  return { sock, url, r, ready: await r.ready() };
}

function scrape(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { timeout: 10000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body }));
    }).on('error', reject);
  });
}

/** value of the one sample line `name{labels}` (labels as written), or null. */
function valueOf(body, series) {
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : null;
}

/** { slot: pid } of the workers the text carries. */
function workersIn(body) {
  return Object.fromEntries([...body.matchAll(/^tunekit_app_connections_active\{worker="([^"]+)",pid="(\d+)"\}/gm)].map((m) => [m[1], Number(m[2])]));
}

test('a metrics address another process holds: refused by name, nothing bound, no worker forked', async (t) => {
  const holder = net.createServer();
  await new Promise((r) => holder.listen(0, '127.0.0.1', r));
  t.after(() => holder.close());
  const taken = `tcp:127.0.0.1:${holder.address().port}`;
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const r = h.start(t, { args: runArgs(sock, taken) });
  assert.deepEqual(await r.exited, { code: 1, signal: null });
  assert.match(r.stderr, new RegExp(`tunekit: metrics endpoint ${taken} \\(tunekit_metrics_listen\\) is in use by another process \\(EADDRINUSE\\): choose another with --set tunekit_metrics_listen=tcp:127.0.0.1:PORT, or turn metrics off \\(tunekit_metrics=false\\)`));
  assert.equal(fs.existsSync(sock), false, 'the app socket was never bound');
  assert.equal(r.events.filter((e) => e.event === 'worker-start' || e.event === 'listen').length, 0, 'no listener, no worker');
});

test('a live Unix socket at the metrics path: refused and left alone', async (t) => {
  const dir = h.tmpDir(t);
  const metricsSock = path.join(dir, 'metrics.sock');
  const other = net.createServer();
  await new Promise((r) => other.listen(metricsSock, r));
  t.after(() => other.close());
  const r = h.start(t, { args: runArgs(path.join(dir, 'app.sock'), `unix:${metricsSock}`) });
  assert.deepEqual(await r.exited, { code: 1, signal: null });
  assert.match(r.stderr, /metrics endpoint unix:.*metrics\.sock \(tunekit_metrics_listen\): a server is already answering on/);
  assert.ok(fs.statSync(metricsSock).isSocket(), 'the other server\'s socket is still there');
  assert.equal(fs.existsSync(path.join(dir, 'app.sock')), false);
});

test('a port out of range, a socket path too long: refused before anything starts (exit 2)', async (t) => {
  const dir = h.tmpDir(t);
  for (const [listen, message] of [
    ['tcp:127.0.0.1:65536', /tunekit_metrics_listen\): expected tcp:HOST:PORT with a port 1-65535/],
    [`unix:${dir}/${'m'.repeat(120)}.sock`, /tunekit_metrics_listen\): the socket path is \d+ bytes; the limit \(sun_path\) is 107/],
  ]) {
    const r = h.start(t, { args: runArgs(path.join(dir, 'app.sock'), listen) });
    assert.equal((await r.exited).code, 2, listen);
    assert.match(r.stderr, message);
    assert.deepEqual(r.events, [], 'not even a start line');
    assert.deepEqual(fs.readdirSync(dir), [], 'nothing created');
  }
});

test('the primary serves every worker\'s series and its own counters: kill -9 is a crash restart, SIGHUP a rolling one', async (t) => {
  const { sock, url, r, ready } = await startWithMetrics(t);
  assert.equal(ready.metrics, `tcp:${new URL(url).host}`, 'the ready line names the endpoint');
  await h.requests(sock, 20, { concurrency: 4 });

  let m = await scrape(url);
  assert.equal(m.status, 200);
  assert.equal(m.type, 'text/plain; version=0.0.4; charset=utf-8');
  assert.deepEqual([workersIn(m.body)['1'], workersIn(m.body)['2']].sort(), [...ready.workers].sort(), 'slots 1 and 2 with their pids');
  const served = [...m.body.matchAll(/^tunekit_app_requests_total\{[^}]*class="2xx",connection="new"\} (\d+)$/gm)].reduce((s, x) => s + Number(x[1]), 0);
  assert.equal(served, 20, 'every request counted once, each on its own connection');
  assert.equal((await scrape(url.replace('/metrics', '/'))).status, 404);

  const victim = workersIn(m.body)['1'];
  process.kill(victim, 'SIGKILL');
  await r.waitFor('worker-exit', (ev) => ev.worker_pid === victim);
  m = await until('slot 1 served by a new worker', async () => {
    const x = await scrape(url);
    return workersIn(x.body)['1'] && workersIn(x.body)['1'] !== victim ? x : null;
  });
  assert.equal(valueOf(m.body, 'tunekit_app_worker_restarts_total{reason="crash"}'), 1);
  assert.doesNotMatch(m.body, new RegExp(`pid="${victim}"`), 'the dead worker\'s series are gone');

  const before = r.events.length;
  r.signal('SIGHUP');
  await r.waitFor('reload-done', () => true, h.READY_TIMEOUT_MS, { after: before });
  m = await scrape(url);
  assert.equal(valueOf(m.body, 'tunekit_app_worker_restarts_total{reason="rolling"}'), 2, 'two slots replaced');
  assert.ok(valueOf(m.body, 'tunekit_app_drains_total') >= 2, 'the replaced workers left by a drain');
  assert.equal(valueOf(m.body, 'tunekit_app_socket_rebinds_total'), 0);
});

test('a warm spare samples no event-loop delay until it serves; promoted, it does', async (t) => {
  const { url, r } = await startWithMetrics(t);
  const spareReady = await r.waitFor('spare-ready', () => true);
  const samples = (body, worker) => {
    const m = new RegExp(`^tunekit_app_event_loop_delay_seconds_count\\{worker="${worker}",pid="(\\d+)"\\} (\\d+)$`, 'm').exec(body);
    return m ? { pid: Number(m[1]), count: Number(m[2]) } : null;
  };
  // The serving workers sample their loop; the spare, loaded and waiting, runs no timer.
  const m = await until('both serving workers sampled', async () => {
    const x = await scrape(url);
    return samples(x.body, '1')?.count > 0 && samples(x.body, '2')?.count > 0 ? x : null;
  });
  assert.deepEqual(samples(m.body, 'spare'), { pid: spareReady.worker_pid, count: 0 }, 'the spare took no sample');

  // Slot 1's worker dies: the spare takes its place and samples from then on.
  process.kill(samples(m.body, '1').pid, 'SIGKILL');
  await until('the promoted spare samples its loop', async () => {
    const x = samples((await scrape(url)).body, '1');
    return x && x.pid === spareReady.worker_pid && x.count > 0;
  });
});

/** Sum of tunekit_app_requests_total over the workers, by "class|connection". */
function requestsIn(body) {
  const out = {};
  for (const m of body.matchAll(/^tunekit_app_requests_total\{[^}]*class="([^"]+)",connection="([^"]+)"\} (\d+)$/gm)) {
    const key = `${m[1]}|${m[2]}`;
    out[key] = (out[key] || 0) + Number(m[3]);
  }
  for (const k of Object.keys(out)) if (!out[k]) delete out[k];
  return out;
}

test('one keep-alive connection, its requests pipelined: each response counted once, by its own status, while the connection is still open', async (t) => {
  const { sock, url } = await startWithMetrics(t);
  // One write, three requests: the first answers after 200 ms, so the next two come
  // while it is still being written (Node answers them in order after it); the
  // second is refused by the example app (400).
  const c = net.connect(sock);
  t.after(() => c.destroy());
  let text = '';
  c.setEncoding('utf8');
  c.on('data', (d) => { text += d; });
  await new Promise((resolve) => c.once('connect', resolve));
  const get = (p) => `GET ${p} HTTP/1.1\r\nHost: app\r\n\r\n`;
  // Each response's status line (a body ends right before the next one's).
  const statuses = () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
  c.write(get('/?delay_ms=200') + get('/?delay_ms=x') + get('/'));
  await until('three responses on the connection', () => statuses().length === 3, 10_000, 20);
  assert.deepEqual(statuses(), ['200', '400', '200'], 'answered in order');
  // The connection stays open and idle: its last response is counted all the same.
  const m = await until('the three responses counted', async () => {
    const x = await scrape(url);
    const counted = requestsIn(x.body);
    return Object.values(counted).reduce((a, b) => a + b, 0) >= 3 ? counted : null;
  }, 10_000, 50);
  assert.deepEqual(m, { '2xx|new': 1, '4xx|reused': 1, '2xx|reused': 1 });
  assert.equal(c.destroyed, false, 'the connection was never closed');
  // Another request on it: one more, reused; none counted twice.
  c.write(get('/'));
  await until('a fourth response', () => statuses().length === 4, 10_000, 20);
  const after = await until('the fourth counted', async () => {
    const counted = requestsIn((await scrape(url)).body);
    return counted['2xx|reused'] === 2 ? counted : null;
  }, 10_000, 50);
  assert.deepEqual(after, { '2xx|new': 1, '4xx|reused': 1, '2xx|reused': 2 });
});
