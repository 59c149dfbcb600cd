'use strict';
// The runner's metrics (app/metrics.js): what a worker counts, the Prometheus text
// format of every worker's sample (read back by Debian's promtool), the primary's
// counters as its log events drive them, and the refusals of the endpoint's setting.
// Real sockets on loopback for the meter; no runner processes.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const fs = require('node:fs');
const config = require('../../lib/config');
const settings = require('../../app/settings');
const metrics = require('../../app/metrics');
const { instanceEndpoint } = require('../../app/metrics-server');
const { settingsFor } = require('../../bin/commands/run');
const { runCommand, until } = require('../lib/util');
const { PROMTOOL } = require('../lib/prometheus');

const defaults = () => config.appSettings(config.resolve({}));

/** A server counted by a meter; `n` requests on one keep-alive connection, then one on a fresh one. */
async function metered(t, statuses) {
  const meter = metrics.createMeter();
  t.after(() => meter.monitor.disable());
  const srv = http.createServer((req, res) => {
    res.statusCode = Number(new URL(req.url, 'http://x').searchParams.get('status'));
    res.end('x');
  });
  srv.on('connection', (socket) => metrics.countConnection(meter, socket));
  // As the worker's dispatcher does: counted at the start, the class at its close.
  srv.on('request', (req, res) => {
    const connection = metrics.countRequest(meter, req);
    res.once('close', () => metrics.countResponse(meter, res.statusCode, connection));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  t.after(() => srv.close());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (status, a) => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: srv.address().port, path: `/?status=${status}`, agent: a }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
  for (const s of statuses) await get(s, agent);
  agent.destroy();
  await get(200, false); // a connection of its own (Connection: close)
  return meter;
}

test('the meter: a request on a connection that carried one before is reused, else new; by status class', async (t) => {
  const meter = await metered(t, [200, 204, 302, 404, 503]);
  // Responses are counted when they close; the connection's close follows.
  await new Promise((r) => setImmediate(r));
  const s = metrics.sample(meter, metrics.infoOf(defaults(), null));
  assert.equal(s.requests['2xx|new'], 2, 'the first on the keep-alive connection, and the lone one');
  assert.equal(s.requests['2xx|reused'], 1);
  assert.equal(s.requests['3xx|reused'], 1);
  assert.equal(s.requests['4xx|reused'], 1);
  assert.equal(s.requests['5xx|reused'], 1);
  assert.equal(s.accepted, 2, 'two connections accepted');
  assert.ok(s.openFds > 0);
  assert.equal(s.delay.counts.length, metrics.DELAY_BUCKETS.length);
});

test('event-loop delay: a blocked loop lands in the buckets at and above its length, cumulative', async (t) => {
  const meter = metrics.createMeter();
  t.after(() => meter.monitor.disable());
  metrics.watchLoop(meter);
  // Block the loop for 120 ms (at least: the wall clock decides), let the monitor's
  // timer record it, sample.
  await new Promise((r) => setImmediate(r));
  const end = Date.now() + 120;
  while (Date.now() < end) { /* blocking on purpose */ }
  await new Promise((r) => setTimeout(r, 30));
  const { delay } = metrics.sample(meter, {});
  const at = (le) => delay.counts[metrics.DELAY_BUCKETS.indexOf(le)];
  assert.ok(delay.count >= 1, `samples: ${delay.count}`);
  assert.ok(at(0.1) < delay.count, 'the 120 ms block is above the 0.1 s bucket');
  for (let i = 1; i < delay.counts.length; i++) assert.ok(delay.counts[i] >= delay.counts[i - 1], 'cumulative');
  assert.ok(delay.sum >= 0.1, `sum ${delay.sum} s includes the block`);
});

test('the text format: every family once, a series set per worker, read by promtool check metrics', async (t) => {
  const meter = await metered(t, [200, 500]);
  const s = defaults();
  const sample = metrics.sample(meter, metrics.infoOf(settings.normalize(s), 'r-1"x'));
  const primary = metrics.createPrimaryCounters();
  const text = metrics.render({ workers: [{ worker: '1', pid: 101, sample }, { worker: '2', pid: 102, sample }], primary });
  const lint = await runCommand(PROMTOOL, ['check', 'metrics'], { input: text, timeoutMs: 30000 });
  assert.equal(lint.code, 0, `promtool: ${lint.out}`);
  assert.equal(lint.out.trim(), '', 'no lint remarks');
  assert.match(text, /^tunekit_app_requests_total\{worker="1",pid="101",class="2xx",connection="new"\} 2$/m);
  assert.match(text, /^tunekit_app_requests_total\{worker="2",pid="102",class="5xx",connection="reused"\} 1$/m);
  assert.match(text, /^tunekit_app_event_loop_delay_seconds_bucket\{worker="1",pid="101",le="\+Inf"\} \d+$/m);
  assert.match(text, new RegExp(`^tunekit_app_info\\{worker="1",pid="101",strategy="shared",listen="unix:/run/tunekit-app/app.sock",backlog="${s.backlog}",keep_alive_timeout_ms="${s.keepAliveTimeoutMs}",headers_timeout_ms="${s.headersTimeoutMs}",release="r-1\\\\"x"\\} 1$`, 'm'));
  assert.match(text, /^tunekit_app_worker_restarts_total\{reason="crash"\} 0$/m);
  for (const name of ['tunekit_app_requests_total', 'tunekit_app_event_loop_delay_seconds', 'process_max_fds', 'tunekit_app_drains_total']) {
    assert.equal(text.split(`# TYPE ${name} `).length, 2, `${name}: one TYPE line`);
  }
  assert.doesNotMatch(metrics.render({ workers: [] }), /restarts/, 'no primary: no primary counters');
});

test('the primary\'s counters follow its log events', () => {
  const c = metrics.createPrimaryCounters();
  metrics.countEvent(c, 'warn', 'worker-exit', { code: 1, slot: 1, stage: 'serving' });
  metrics.countEvent(c, 'warn', 'worker-exit', { signal: 'SIGKILL', start_timeout: true, slot: 2, stage: 'starting' });
  metrics.countEvent(c, 'error', 'worker-start-timeout', {});
  metrics.countEvent(c, 'info', 'worker-exit', { code: 0, slot: 1, replaced: true });
  // Leaving because the runner stops, and the spare: no slot's restart.
  metrics.countEvent(c, 'info', 'worker-exit', { code: 0, slot: 2 });
  metrics.countEvent(c, 'info', 'worker-exit', { code: 0, slot: null, spare: true });
  metrics.countEvent(c, 'info', 'reload-done', { replaced: [1, 2] });
  metrics.countEvent(c, 'info', 'reload-done', { reason: 'socket-rebound', replaced: [3] });
  metrics.countEvent(c, 'info', 'socket-rebound', {});
  metrics.countEvent(c, 'info', 'ready', {});
  assert.deepEqual(c, {
    restarts: { crash: 1, start_timeout: 1, rolling: 2, rebind: 1 }, crashes: { starting: 1, young: 0, serving: 1 },
    slotRestarts: { 1: 2, 2: 1 }, rebinds: 1, drains: 3, startTimeouts: 1, shedShare: 0,
  });
  assert.match(metrics.render({ workers: [], primary: c }), /^tunekit_app_worker_crashes_total\{stage="serving"\} 1$/m);
});

test('the endpoint setting: refused by name with the fix, before anything starts', () => {
  const long = `unix:/tmp/${'m'.repeat(110)}.sock`;
  for (const [value, message] of [
    ['tcp:127.0.0.1:70000', /metricsListen "tcp:127.0.0.1:70000" \(tunekit_metrics_listen\): expected tcp:HOST:PORT with a port 1-65535/],
    ['tcp:127.0.0.1:0', /port 1-65535/],
    ['fd:3', /an inherited socket cannot serve metrics/],
    ['nonsense', /expected tcp:HOST:PORT/],
    [long, /the socket path is 120 bytes; the limit \(sun_path\) is 107: choose a shorter directory or name/],
    ['unix:/run/tunekit-app/app.sock', /is the app's own listener \(unix:\/run\/tunekit-app\/app.sock\): give the metrics endpoint an address of its own/],
  ]) {
    assert.throws(() => settingsFor(['--set', `tunekit_metrics_listen=${value}`]), { name: 'SettingsError', message }, value);
  }
  assert.throws(() => settingsFor(['--listen', 'tcp:127.0.0.1:9464']), { name: 'SettingsError', message: /app's own listener \(tcp:127.0.0.1:9464\)/ });
  // Off: the address is not read.
  assert.equal(settingsFor(['--set', 'tunekit_metrics=false', '--set', 'tunekit_metrics_listen=tcp:127.0.0.1:70000']).settings.metrics, false);
  assert.throws(() => settings.normalize({ ...defaults(), metrics: 'yes' }), { name: 'SettingsError', message: /metrics="yes" must be true or false/ });
});

test('under PM2, instance I serves on the base port + I, or PATH.(I + 1); past 65535 refused', () => {
  const tcp = settings.parseListen('tcp:127.0.0.1:9464');
  assert.equal(instanceEndpoint(tcp, 0).text, 'tcp:127.0.0.1:9464');
  assert.equal(instanceEndpoint(tcp, 3).text, 'tcp:127.0.0.1:9467');
  assert.equal(instanceEndpoint(settings.parseListen('tcp:[::1]:9464'), 1).text, 'tcp:[::1]:9465');
  assert.equal(instanceEndpoint(settings.parseListen('unix:/run/m.sock'), 1).path, '/run/m.sock.2');
  assert.throws(() => instanceEndpoint(settings.parseListen('tcp:127.0.0.1:65535'), 1), /instance 1 would listen on port 65536, above 65535: choose a lower base port/);
});

test('app.json renders the switch and the address from the definition', () => {
  const d = defaults();
  assert.equal(d.metrics, true);
  assert.equal(d.metricsListen, 'tcp:127.0.0.1:9464');
  assert.ok(fs.readFileSync(require.resolve('../../app/settings.json.j2'), 'utf8').includes('tunekit_metrics_listen'));
});

test('event-loop delay: sampled every loopResolutionMs (tunekit_metrics_loop_resolution_ms), that period subtracted; nothing before watchLoop', async (t) => {
  const meter = metrics.createMeter({ loopResolutionMs: 100 });
  t.after(() => meter.monitor.disable());
  // Not watched yet (a warm spare): no timer, no sample.
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(metrics.sample(meter, {}).delay.count, 0, 'no sample before watchLoop');
  const start = process.hrtime.bigint();
  metrics.watchLoop(meter);
  await until('three samples', async () => (meter.monitor.count >= 3 ? true : null));
  const elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;
  const { delay } = metrics.sample(meter, {});
  // A timer never fires more often than its period: at Node's 10 ms there would be
  // about ten times as many samples in the same time.
  assert.ok(delay.count <= elapsedMs / 100 + 1, `${delay.count} samples in ${Math.round(elapsedMs)} ms: more than one per 100 ms`);
  // An idle loop is late by almost nothing: the 100 ms period is not read as delay.
  assert.ok(delay.sum / delay.count < 0.05, `mean delay ${delay.sum / delay.count} s: the period was not subtracted`);
});

test('the event-loop sampling period comes from the definition, and an app.json with 0 is refused by name', () => {
  assert.equal(defaults().metricsLoopResolutionMs, 100, 'tunekit_metrics_loop_resolution_ms rendered into app.json');
  assert.throws(() => settings.normalize({ ...defaults(), metricsLoopResolutionMs: 0 }), /metricsLoopResolutionMs=0 must be at least 1/);
});

test('a sample at the open-files limit: no throw (a scrape must not kill the worker), every descriptor counted open, the last limit read', () => {
  // A child process at its soft limit (prlimit), every descriptor taken, samples itself.
  const script = `
    const fs = require('node:fs');
    const metrics = require(${JSON.stringify(require.resolve('../../app/metrics'))});
    const meter = metrics.createMeter();
    metrics.sample(meter, null); // the limit read while there is room
    const held = [];
    try { for (;;) held.push(fs.openSync('/dev/null', 'r')); } catch (err) { if (err.code !== 'EMFILE') throw err; }
    const s = metrics.sample(meter, null);
    process.stdout.write(JSON.stringify({ openFds: s.openFds, maxFds: s.maxFds, rss: s.rss, heapUsed: s.heapUsed }));
  `;
  const r = require('node:child_process').spawnSync('prlimit', ['--nofile=64:64', process.execPath, '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, `the sample at the limit threw: ${r.stderr.slice(-800)}`);
  const s = JSON.parse(r.stdout);
  assert.equal(s.maxFds, 64, 'the limit read before it was reached');
  assert.equal(s.openFds, 64, 'every descriptor of the limit open');
  assert.equal(s.rss, null, 'the rss left out (it needs /proc/self/stat)');
  assert.ok(s.heapUsed > 0, 'the heap from V8');
});
