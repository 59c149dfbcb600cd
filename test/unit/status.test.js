'use strict';
// lib/status.js without a live stack: the text-format parser, the histogram
// quantile, stub_status, the error-log count by cause and the table.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const s = require('../../lib/status');
const { ROOT } = require('../../lib/template');

test('the text format: labels with escapes, +Inf, timestamps, comments; a broken line is named', () => {
  const text = [
    '# HELP x_total a counter',
    '# TYPE x_total counter',
    'x_total{worker="1",pid="42",path="a\\"b\\\\c\\nd"} 7',
    'up 1 1700000000000',
    'h_bucket{le="+Inf"} +Inf',
    '',
  ].join('\n');
  assert.deepEqual(s.parseExposition(text), [
    { name: 'x_total', labels: { worker: '1', pid: '42', path: 'a"b\\c\nd' }, value: 7 },
    { name: 'up', labels: {}, value: 1 },
    { name: 'h_bucket', labels: { le: '+Inf' }, value: Infinity },
  ]);
  assert.throws(() => s.parseExposition('x_total{worker=1} 3'), /labels not in the Prometheus text format: \{worker=1\}/);
  assert.throws(() => s.parseExposition('not a line at all'), /not a sample line/);
});

test('p99 of cumulative buckets as histogram_quantile computes it', () => {
  const b = [{ le: 0.01, count: 50 }, { le: 0.02, count: 100 }, { le: Infinity, count: 100 }];
  assert.equal(s.quantile(0.5, b), 0.01);
  assert.ok(Math.abs(s.quantile(0.99, b) - 0.0198) < 1e-12);
  assert.equal(s.quantile(0.99, [{ le: 0.01, count: 0 }, { le: Infinity, count: 0 }]), null, 'no observations');
  assert.equal(s.quantile(0.99, [{ le: 0.01, count: 1 }, { le: Infinity, count: 10 }]), 0.01, 'in +Inf: the highest finite bound');
});

test('workers from the runner\'s series: requests summed over classes, reuse from connection="reused"', () => {
  const text = [
    'tunekit_app_requests_total{worker="2",pid="11",class="2xx",connection="new"} 1',
    'tunekit_app_requests_total{worker="2",pid="11",class="2xx",connection="reused"} 8',
    'tunekit_app_requests_total{worker="2",pid="11",class="5xx",connection="reused"} 1',
    'tunekit_app_requests_total{worker="1",pid="10",class="2xx",connection="new"} 0',
    'tunekit_app_event_loop_delay_seconds_bucket{worker="2",pid="11",le="0.01"} 10',
    'tunekit_app_event_loop_delay_seconds_bucket{worker="2",pid="11",le="+Inf"} 10',
    'process_open_fds{worker="2",pid="11"} 21',
    'process_max_fds{worker="2",pid="11"} 1024',
    'process_resident_memory_bytes{worker="2",pid="11"} 1048576',
    'tunekit_app_worker_restarts_total{reason="crash"} 3',
  ].join('\n');
  const [w1, w2] = s.workersOf(s.parseExposition(text));
  assert.equal(w1.pid, 10);
  assert.equal(w1.reusePct, null, 'no requests: no reuse figure');
  assert.deepEqual({ ...w2, loopP99Ms: Math.round(w2.loopP99Ms * 10) / 10 },
    { worker: '2', pid: 11, requests: 10, reused: 9, reusePct: 90, loopP99Ms: 9.9, rssBytes: 1048576, fds: 21, maxFds: 1024 });
});

test('stub_status parsed; another page refused', () => {
  const page = 'Active connections: 3 \nserver accepts handled requests\n 10 9 120 \nReading: 0 Writing: 1 Waiting: 2 \n';
  assert.deepEqual(s.parseStubStatus(page), { active: 3, accepted: 10, handled: 9, requests: 120, reading: 0, writing: 1, waiting: 2 });
  assert.throws(() => s.parseStubStatus('<html>404</html>'), /not a stub_status page/);
});

test('the error log\'s causes are mtail\'s, in its order, counted in the window only', () => {
  const mtail = fs.readFileSync(path.join(ROOT, 'metrics/nginx.mtail'), 'utf8');
  const inMtail = [...mtail.matchAll(/tunekit_nginx_upstream_errors_total\["(\w+)"\]/g)].map((m) => m[1]);
  assert.deepEqual(s.CAUSES.map(([c]) => c), inMtail);
  const now = new Date(2026, 0, 2, 12, 0, 0).getTime();
  const log = [
    '2026/01/02 11:59:00 [error] 7#7: *1 connect() to unix:/run/a.sock failed (11: Resource temporarily unavailable) while connecting to upstream, client: 127.0.0.1, upstream: "http://unix:/run/a.sock:/"',
    '2026/01/02 11:58:00 [error] 7#7: *2 upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, upstream: "http://unix:/run/a.sock:/"',
    '2026/01/02 11:58:30 [crit] 7#7: *3 connect() to unix:/run/a.sock failed (13: Permission denied) while connecting to upstream, client: 127.0.0.1, upstream: "http://unix:/run/a.sock:/"',
    '2026/01/02 11:40:00 [error] 7#7: *4 connect() to unix:/run/a.sock failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, upstream: "http://unix:/run/a.sock:/"',
    '2026/01/02 11:59:30 [warn] 7#7: *5 an upstream response is buffered to a temporary file, upstream: "http://unix:/run/a.sock:/"',
    '2026/01/02 11:59:40 [error] 7#7: *6 no live upstreams while connecting to upstream, client: 127.0.0.1, upstream: "http://tunekit_app/"',
  ].join('\n');
  assert.deepEqual(s.causesInLog(log, 5, now), { closed_early: 1, eagain: 1, refused: 0, eacces: 1, enoent: 0, timeout: 0, max_conns: 1, other: 0 });
});

test('the stub_status URL from nginx\'s tree; the metrics URL of a PM2 instance', () => {
  const nginxconf = require('../../lib/nginxconf');
  const tree = nginxconf.parse('http { server { listen 127.0.0.1:8080 backlog=4096; location = /stub_status { stub_status; } } }');
  assert.equal(s.statusUrlOf(tree), 'http://127.0.0.1:8080/stub_status');
  assert.equal(s.statusUrlOf(nginxconf.parse('http { server { listen 80; } }')), null);
  assert.equal(s.metricsUrl('tcp:127.0.0.1:9464', 2), 'http://127.0.0.1:9466/metrics');
  assert.equal(s.metricsUrl('unix:/run/m.sock', 1), 'unix:/run/m.sock.2:/metrics');
  assert.throws(() => s.metricsUrl('9464'), /neither tcp:HOST:PORT nor unix:PATH \(tunekit_metrics_listen\)/);
});

test('the table: the headers, one row per worker, nginx, the queue and the source of the causes', () => {
  const text = s.format({
    app: { listen: 'unix:/run/a.sock', appConfig: '/etc/a.json', runBy: 'systemd', pid: 5, restarts: 2 },
    workers: [{ worker: '1', pid: 10, uptimeS: 4000, restarts: 2, rssBytes: 52428800, loopP99Ms: 12.34, fds: 20, maxFds: 1024, requests: 99, reusePct: 98.99 }],
    nginx: { url: 'http://127.0.0.1:8080/stub_status', active: 3, waiting: 2, accepted: 10, handled: 9 },
    acceptQueue: { backlog: 4096, sockets: [{ socket: '/run/a.sock', queued: 1, limit: 4096 }] },
    upstreamErrors: { source: 'mtail', byCause: { eagain: 4 } },
  });
  const lines = text.split('\n');
  assert.match(lines[0], /systemd, pid 5\), workers replaced 2$/);
  assert.deepEqual(lines[1].trim().split(/\s{2,}/), ['worker', 'pid', 'uptime', 'restarts', 'rss MiB', 'loop p99 ms', 'fds/limit', 'requests', 'reuse %']);
  assert.deepEqual(lines[2].trim().split(/\s{2,}/), ['1', '10', '1h', '2', '50.0', '12.3', '20/1024', '99', '99.0']);
  assert.match(text, /^nginx {3}active 3, waiting 2, accepted - handled 1 /m);
  assert.match(text, /^queue {3}\/run\/a.sock 1\/4096 /m);
  assert.match(text, /^errors .*eagain 4 \(mtail\)$/m);
});

test('the command line: --count without --watch, and a --watch of 0, are one line each, exit 2', () => {
  const { spawnSync } = require('node:child_process');
  const cli = (...a) => spawnSync(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'status', ...a], { encoding: 'utf8' });
  const c = cli('--count', '2');
  assert.equal(c.status, 2);
  assert.equal(c.stderr, 'tunekit: --count N goes with --watch S (how many readings, S seconds apart)\n');
  const w = cli('--watch', '0');
  assert.equal(w.status, 2);
  assert.match(w.stderr, /^tunekit: --watch 0: expected a whole number from 1 to 3600\n$/);
});
