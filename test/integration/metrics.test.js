'use strict';
// metrics/ against the real parts: Debian's prometheus-nginx-exporter scraping
// the rendered stub_status of a real nginx in front of the real runner; real
// mtail tailing that nginx's logs while its upstream fails (the socket's mode
// changed: EACCES; the app killed: refused), its counters equal to the lines
// nginx wrote; the queue sampler against a Unix socket and a TCP listener with
// known backlogs and connections nobody accepts, read back through
// prometheus-node-exporter's textfile collector. Every wait is bound by the
// event it waits for; every process started here is stopped by its pid.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const http = require('node:http');
const https = require('node:https');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startStack } = require('../../lib/stack');
const { freePort, signal, alive } = require('../../lib/proc');
const { stopAfter, burst, errorLog } = require('../faults/stack');
const { until, runCommand } = require('../lib/util');
const { ROOT } = require('../../lib/template');

const METRICS = path.join(ROOT, 'metrics');
const SAMPLER = path.join(METRICS, 'queue-sampler.js');
const BIN = {
  nginxExporter: '/usr/bin/prometheus-nginx-exporter',
  nodeExporter: '/usr/bin/prometheus-node-exporter',
  mtail: '/usr/bin/mtail',
};
const SETUP = 'run: node bin/setup.js test';

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-metrics-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Start a long-running command; stopped by its pid after the test (SIGTERM, then SIGKILL). */
function daemon(t, cmd, args) {
  assert.ok(fs.existsSync(cmd), `${cmd} is not installed; ${SETUP}`);
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    if (child.exitCode !== null || child.signalCode) return;
    signal(child.pid, 'SIGTERM');
    await Promise.race([exited, until(`${cmd} to exit`, () => !alive(child.pid), 10_000).catch(() => null)]);
    if (alive(child.pid)) signal(child.pid, 'SIGKILL');
  });
  return { child, stderr: () => stderr };
}

/** Prometheus text from url: Map of "name{labels}" → value (null when it does not answer). */
async function scrape(url) {
  let text;
  try {
    const res = await fetch(url);
    if (res.status !== 200) return null;
    text = await res.text();
  } catch {
    return null;
  }
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  out.text = text;
  return out;
}

/** One GET on a connection of its own (fetch would reuse its pool's): the status code. */
function newConnectionGet(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); }).on('error', reject);
  });
}

test('prometheus-nginx-exporter reads the rendered stub_status: accepted and handled count the connections, the listener serves nothing else', { timeout: 120_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2 });
  stopAfter(t, stack);
  const status = `http://127.0.0.1:${stack.vars.tunekit_nginx_status_port}`;
  assert.equal(stack.vars.tunekit_nginx_status_address, '127.0.0.1');
  const page = await (await fetch(`${status}${stack.vars.tunekit_nginx_status_path}`)).text();
  assert.match(page, /^Active connections: \d+/);
  assert.equal((await fetch(`${status}/`)).status, 404, 'the status listener answers only its path');
  const site = await (await fetch(new URL(stack.vars.tunekit_nginx_status_path, stack.url))).text();
  assert.doesNotMatch(site, /Active connections/, 'the site does not serve the counters');

  const port = await freePort();
  const exp = daemon(t, BIN.nginxExporter, ['-nginx.scrape-uri', `${status}${stack.vars.tunekit_nginx_status_path}`, '-web.listen-address', `127.0.0.1:${port}`]);
  const url = `http://127.0.0.1:${port}/metrics`;
  const before = await until(`the exporter on :${port} (${exp.stderr()})`, async () => { const m = await scrape(url); return m && m.get('nginx_up') === 1 && m; });
  const n = 20;
  for (let i = 0; i < n; i++) assert.equal(await newConnectionGet(stack.url), 200);
  const after = await scrape(url);
  // Debian 12's exporter (0.11) names them so, as counters without _total.
  assert.match(after.text, /^# TYPE nginx_connections_accepted counter$/m);
  assert.match(after.text, /^# TYPE nginx_connections_handled counter$/m);
  for (const name of ['nginx_connections_active', 'nginx_connections_reading', 'nginx_connections_writing', 'nginx_connections_waiting', 'nginx_http_requests_total']) {
    assert.ok(after.has(name), `${name} exported`);
  }
  const grew = (name) => after.get(name) - before.get(name);
  // Each request opened its own connection; the exporter's own scrapes add theirs.
  assert.ok(grew('nginx_connections_accepted') >= n, `accepted grew by ${grew('nginx_connections_accepted')}`);
  assert.equal(after.get('nginx_connections_handled'), after.get('nginx_connections_accepted'), 'worker_connections never ran out');
  assert.ok(grew('nginx_http_requests_total') >= n);
  t.diagnostic(`exporter: ${[...after].filter(([k]) => k.startsWith('nginx_')).map(([k, v]) => `${k} ${v}`).join(', ')}`);
});

/** mtail on the stack's two logs, once it has counted a line of the access log. */
async function startMtail(t, stack) {
  const port = await freePort();
  const m = daemon(t, BIN.mtail, ['-progs', METRICS, '-logs', `${stack.errorLogPath},${stack.accessLogPath}`,
    '-address', '127.0.0.1', '-port', String(port), '-emit_prog_label=false', '-logtostderr']);
  const url = `http://127.0.0.1:${port}/metrics`;
  await until(`mtail on :${port} (${m.stderr()})`, () => scrape(url));
  // It tails from the end of the files: a request logged now proves it reads the access log.
  await until('mtail to count a 2xx from the access log', async () => {
    assert.equal((await fetch(stack.url)).status, 200);
    return ((await scrape(url)).get('tunekit_nginx_responses_total{status_class="2xx"}') || 0) > 0;
  }, 30_000, 200);
  return url;
}

/** Wait until mtail's counter for `cause` equals the number of nginx's error lines matching re (and that is above 0). */
async function causeCounted(stack, url, cause, re) {
  let lines = 0;
  let counted;
  await until(`mtail's ${cause} counter to equal nginx's lines`, async () => {
    lines = errorLog(stack).filter((l) => re.test(l)).length;
    counted = (await scrape(url)).get(`tunekit_nginx_upstream_errors_total{cause="${cause}"}`);
    return lines > 0 && counted === lines;
  }, 30_000, 200).catch((err) => { throw new Error(`${err.message}; nginx logged ${lines}, mtail counted ${counted}`); });
  return lines;
}

test('mtail over the stack\'s logs: EACCES and refused connects counted by cause, as many as nginx logged; 502s in the 5xx class', { timeout: 180_000 }, async (t) => {
  // nginx's workers as www-data, as on a host: root's workers pass every permission check.
  const stack = await startStack({ upstream: 'uds', workers: 2, nginxUser: 'www-data' });
  stopAfter(t, stack);
  const url = await startMtail(t, stack);
  const five = () => scrape(url).then((m) => m.get('tunekit_nginx_responses_total{status_class="5xx"}') || 0);
  const client502 = { n: 0 };
  const hit = async () => { const b = await burst(stack.url); client502.n += b[502] || 0; return b; };

  // The socket's mode changed: nginx's new upstream connections are refused with EACCES.
  const mode = fs.statSync(stack.socketPath).mode & 0o777;
  fs.chmodSync(stack.socketPath, 0o600);
  await until('a 502 with EACCES', async () => ((await hit())[502] || 0) > 0, 30_000, 50);
  const eacces = await causeCounted(stack, url, 'eacces', /connect\(\) to unix:.* failed \(13: Permission denied\)/);
  fs.chmodSync(stack.socketPath, mode);

  // The app killed, its socket file left behind: refused.
  for (const pid of stack.pids().app.reverse()) signal(pid, 'SIGKILL');
  await until('the app to be gone', () => stack.pids().app.length === 0, 10_000, 50);
  await until('a connect refused', async () => {
    await hit();
    return errorLog(stack).some((l) => /\(111: Connection refused\)/.test(l));
  }, 30_000, 50);
  const refused = await causeCounted(stack, url, 'refused', /connect\(\) to unix:.* failed \(111: Connection refused\)/);

  // Every 502 the client got is one 5xx line of the access log (buffered: flushed within 1 s).
  await until(`mtail's 5xx to reach the ${client502.n} 502s the client got`, async () => (await five()) === client502.n, 30_000, 200);
  const m = await scrape(url);
  assert.equal(m.get('tunekit_nginx_upstream_errors_total{cause="eagain"}'), undefined, 'no other cause was counted');
  assert.ok(m.get('tunekit_nginx_upstream_response_seconds_count') > 0, 'upstream response times observed');
  t.diagnostic(`nginx logged ${eacces} EACCES and ${refused} refused connects; mtail counted the same; the client got ${client502.n} 502s`);
});

test('nginx out of worker_connections: mtail counts its "not enough" lines, as many as it wrote; stub_status\'s accepted and handled read alongside', { timeout: 120_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 1,
    set: ['tunekit_nginx_worker_processes=1', 'tunekit_nginx_worker_connections=32', 'tunekit_nginx_upstream_keepalive=8'] });
  stopAfter(t, stack);
  const status = `http://127.0.0.1:${stack.vars.tunekit_nginx_status_port}${stack.vars.tunekit_nginx_status_path}`;
  const url = await startMtail(t, stack);
  // 40 requests at once, each held 500 ms by the app: each holds two of the worker's 32
  // slots. A client nginx closes sees a reset; one left waiting gives up after 3 s.
  const outcome = {};
  await Promise.all(Array.from({ length: 40 }, () => new Promise((resolve) => {
    const req = http.get(new URL('/?delay_ms=500', stack.url), { agent: false, timeout: 3000 }, (res) => {
      res.resume();
      res.on('end', () => { outcome[res.statusCode] = (outcome[res.statusCode] || 0) + 1; resolve(); });
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('no answer in 3 s'), { code: 'timeout' })));
    req.on('error', (err) => { outcome[err.code] = (outcome[err.code] || 0) + 1; resolve(); });
  })));
  const re = /\d+ worker_connections are not enough/;
  let lines = 0;
  let counted;
  await until('mtail to count every "worker_connections are not enough" line', async () => {
    lines = errorLog(stack).filter((l) => re.test(l)).length;
    counted = (await scrape(url)).get('tunekit_nginx_worker_connections_exhausted_total');
    return lines > 0 && counted === lines;
  }, 30_000, 200).catch((err) => { throw new Error(`${err.message}; nginx wrote ${lines}, mtail counted ${counted}; clients: ${JSON.stringify(outcome)}`); });
  const counts = /(\d+) (\d+) (\d+)/.exec(await (await fetch(status)).text());
  t.diagnostic(`clients: ${JSON.stringify(outcome)}; nginx wrote ${lines} "not enough" lines, mtail counted ${counted}; stub_status accepts ${counts[1]} handled ${counts[2]}`);
});

/** One HTTPS GET through agent (trusting ca): the status code. */
function httpsGet(url, agent, ca) {
  return new Promise((resolve, reject) => {
    https.get(url, { agent, ca }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); }).on('error', reject);
  });
}

test('mtail counts a real HTTPS front\'s TLS handshakes once per connection, resumed ones as reused="yes", as nginx logged them', { timeout: 120_000 }, async (t) => {
  assert.ok(fs.existsSync(BIN.mtail), `${BIN.mtail} is not installed; ${SETUP}`);
  const stack = await startStack({ upstream: 'uds', workers: 1, tls: true });
  stopAfter(t, stack);
  const ca = fs.readFileSync(stack.ca);
  const mine = new URL('/tls-count', stack.url).href; // this test's requests, apart from the stack's readiness probe
  // A new connection per request; the agent keeps the TLS session and offers it again.
  const fresh = new https.Agent({ keepAlive: false, maxCachedSessions: 10 });
  for (let i = 0; i < 5; i++) assert.equal(await httpsGet(mine, fresh, ca), 200);
  // Three requests on one kept-alive connection: one handshake.
  const kept = new https.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => kept.destroy());
  for (let i = 0; i < 3; i++) assert.equal(await httpsGet(mine, kept, ca), 200);

  // Each nginx worker flushes its log buffer within 1 s: wait for this test's 8 lines
  // and the readiness probe's, then let mtail read the whole file once.
  const lines = () => fs.readFileSync(stack.accessLogPath, 'utf8').split('\n').filter(Boolean);
  await until('nginx to write every request\'s line', () => {
    const all = lines();
    return all.filter((l) => l.includes('"GET /tls-count ')).length === 8 && all.length > 8;
  }, 30_000, 100);
  const all = lines();
  const log = { yes: all.filter((l) => / resumed=r cr=1$/.test(l)).length, no: all.filter((l) => / resumed=\. cr=1$/.test(l)).length, later: all.filter((l) => / cr=[2-9]\d*$/.test(l)).length };
  const r = await runCommand(BIN.mtail, ['-one_shot', '-one_shot_format', 'prometheus', '-emit_prog_label=false', '-progs', METRICS, '-logs', stack.accessLogPath], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  const count = (series) => Number((r.stdout.split('\n').find((l) => l.startsWith(`${series} `)) || ' 0').split(' ')[1]);
  assert.equal(count('tunekit_nginx_tls_handshakes_total{reused="yes"}'), log.yes);
  assert.equal(count('tunekit_nginx_tls_handshakes_total{reused="no"}'), log.no);
  assert.equal(count('tunekit_nginx_responses_total{status_class="2xx"}'), all.length);
  assert.ok(log.yes >= 1, `a session was resumed: ${JSON.stringify(log)}`);
  assert.ok(log.no >= 1, 'the first connection was a full handshake');
  assert.equal(log.later, 2, 'the kept-alive connection\'s later requests are logged, and not counted as handshakes');
  assert.equal(log.yes + log.no + log.later, all.length, 'every line is a connection\'s first request or a later one');
  t.diagnostic(`access log: ${all.length} lines, ${JSON.stringify(log)}; mtail counted the same`);
});

/** A process listening on a Unix socket (backlog 5) and on TCP 127.0.0.1 (backlog 7), then stopped: nothing is accepted. */
async function stoppedListener(t, sock) {
  const code = `const net = require('node:net');
    const u = net.createServer().listen({ path: ${JSON.stringify(sock)}, backlog: 5 }, () => {
      const tcp = net.createServer().listen({ host: '127.0.0.1', port: 0, backlog: 7 }, () => console.log('ready ' + tcp.address().port));
    });`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => { if (alive(child.pid)) { signal(child.pid, 'SIGCONT'); signal(child.pid, 'SIGKILL'); } });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const port = Number((await until('the listener to be ready', () => /ready (\d+)/.exec(out), 20_000, 20))[1]);
  signal(child.pid, 'SIGSTOP');
  return port;
}

function connectAll(t, n, opts) {
  return Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const s = net.connect(opts, () => resolve(s));
    s.on('error', reject);
    t.after(() => s.destroy());
  })));
}

test('the queue sampler reads a Unix socket\'s and a TCP listener\'s queue and limit; node_exporter serves its file', { timeout: 120_000 }, async (t) => {
  const dir = tmpdir(t);
  const textfiles = path.join(dir, 'textfile');
  fs.mkdirSync(textfiles);
  const sock = path.join(dir, 'app.sock');
  const port = await stoppedListener(t, sock);
  await connectAll(t, 3, { path: sock });
  await connectAll(t, 2, { host: '127.0.0.1', port });

  const r = await runCommand(process.execPath, [SAMPLER, '--textfile-dir', textfiles, '--unix', sock, '--tcp', `127.0.0.1:${port}`, '--once'], { timeoutMs: 30_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(textfiles), ['tunekit-queues.prom'], 'one file, no temp file left');
  const text = fs.readFileSync(path.join(textfiles, 'tunekit-queues.prom'), 'utf8');
  const label = (kind, s) => `{socket="${s}",kind="${kind}"}`;
  assert.match(text, new RegExp(`^tunekit_listen_queue_length\\{socket="${sock}",kind="unix"\\} 3$`, 'm'));
  assert.match(text, new RegExp(`^tunekit_listen_queue_limit\\{socket="${sock}",kind="unix"\\} 5$`, 'm'));
  assert.ok(text.includes(`tunekit_listen_queue_length${label('tcp', `127.0.0.1:${port}`)} 2\n`), text);
  assert.ok(text.includes(`tunekit_listen_queue_limit${label('tcp', `127.0.0.1:${port}`)} 7\n`), text);

  // Linux queues backlog + 1 on a Unix socket; the next connect() fails at once with EAGAIN.
  await connectAll(t, 3, { path: sock });
  await assert.rejects(connectAll(t, 1, { path: sock }), { code: 'EAGAIN' });
  assert.equal((await runCommand(process.execPath, [SAMPLER, '--textfile-dir', textfiles, '--unix', sock, '--once'])).code, 0);
  assert.match(fs.readFileSync(path.join(textfiles, 'tunekit-queues.prom'), 'utf8'),
    new RegExp(`^tunekit_listen_queue_length\\{socket="${sock}",kind="unix"\\} 6$`, 'm'), 'a full queue: limit + 1 waiting');

  // node_exporter's textfile collector serves the file as it is; its netstat collector the TCP overflow counters.
  const nodePort = await freePort();
  const ne = daemon(t, BIN.nodeExporter, [`--web.listen-address=127.0.0.1:${nodePort}`, '--collector.disable-defaults',
    '--collector.textfile', `--collector.textfile.directory=${textfiles}`, '--collector.netstat']);
  const m = await until(`node_exporter on :${nodePort} (${ne.stderr()})`, () => scrape(`http://127.0.0.1:${nodePort}/metrics`), 20_000);
  // It writes labels sorted by name.
  assert.equal(m.get(`tunekit_listen_queue_length{kind="unix",socket="${sock}"}`), 6, m.text);
  assert.equal(m.get(`tunekit_listen_queue_limit{kind="unix",socket="${sock}"}`), 5);
  assert.ok(m.has('node_netstat_TcpExt_ListenOverflows') && m.has('node_netstat_TcpExt_ListenDrops'), 'netstat counters exported');
  assert.equal(m.get('node_textfile_scrape_error'), 0);
});

test('the queue sampler in a loop writes the file again each interval and stops on SIGTERM', { timeout: 60_000 }, async (t) => {
  const dir = tmpdir(t);
  const child = spawn(process.execPath, [SAMPLER, '--textfile-dir', dir, '--unix', path.join(dir, 'none.sock'), '--interval-s', '0.2'], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => { if (alive(child.pid)) signal(child.pid, 'SIGKILL'); });
  const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ code, sig })));
  const stamp = () => {
    try {
      return /^tunekit_queue_sampler_last_run_timestamp_seconds (\S+)$/m.exec(fs.readFileSync(path.join(dir, 'tunekit-queues.prom'), 'utf8'))[1];
    } catch {
      return null;
    }
  };
  const first = await until('a first sample', stamp, 20_000, 20);
  await until('a second sample', () => stamp() && stamp() !== first, 20_000, 20);
  assert.match(fs.readFileSync(path.join(dir, 'tunekit-queues.prom'), 'utf8'), /^tunekit_listen_sockets\{socket=".*none\.sock",kind="unix"\} 0$/m, 'a socket nobody listens on: 0 sockets, no queue');
  signal(child.pid, 'SIGTERM');
  assert.deepEqual(await exited, { code: 0, sig: null });

  const bad = await runCommand(process.execPath, [SAMPLER, '--textfile-dir', path.join(dir, 'missing'), '--once']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--textfile-dir .*missing is not a directory: create it/);
});
