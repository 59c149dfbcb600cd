'use strict';
// `handshakes.js --kit`: the kit's own fronts, as `bench --https` renders and
// starts them (lib/stack.js: the rendered nginx in front of the runner on a
// Unix socket, loopback only), on the nginx and OpenSSL of the filesystem this
// runs in (the machine's, or a root filesystem's, chrooted by handshakes.js):
//   plain         the tuned front without TLS (the connection and the proxied
//                 request, without a handshake: the baseline)
//   tls-stock     HTTPS as Debian ships nginx (ansible/profiles/tls-stock.yml),
//                 RSA 2048
//   tls-tuned     the kit's HTTPS front as it renders by default, ECDSA P-256
//   tls-tuned-h3  the same with tunekit_nginx_http3 on, where this nginx is
//                 built with ngx_http_v3_module
// Clients, all that filesystem's own curl, a new connection per request:
//   h1  HTTP/1.1, `Connection: close`, one curl for the whole measurement
//       (plain, tls-stock, tls-tuned)
//   h2  HTTP/2 and h3  HTTP/3 alone (tls-tuned-h3): one curl per connection,
//       since curl keeps an HTTP/2 or HTTP/3 connection for its next URL
// Per measurement: nginx's CPU (master and workers, scheduler runtime) divided
// by the connections (h1: the measurement's requests in the access log, one per
// connection, told from any other by a query mark of their own; h2, h3: the
// curls started, stalled ones too, since nginx did their handshakes), and the
// log's count of full handshakes, resumed ones and protocols. A full
// handshake's cost is a TLS front's CPU per connection minus plain's in the
// same round.
//
// A curl on OpenSSL's own QUIC stack (Debian 13's curl 8.14.1: `curl --version`
// lists nghttp3 but not ngtcp2) can stall for good after one lost UDP datagram:
// with 10% of loopback UDP dropped it stalled on 10 of 200 new connections to
// nginx 1.26 and on 14 of 200 to nginx 1.30, where sid's curl (ngtcp2) stalled
// on none of 200 to the same nginx (docs/benchmarks.md). A loaded machine drops
// loopback datagrams too. So an h2 or h3 curl gets STALL_S seconds, and one
// that times out is counted as stalled and followed by a new one; a client that
// stalls more often than it completes (5 or more) fails the measurement.

const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { loadStack } = require('./targets');
const { readSchedstatUs } = require('./cpu');
const { roundOrder } = require('./stats');
const { RESUMED } = require('./tls-bench');
const { nginxBuildText, nginxVersion, opensslOf, http3Of } = require('../lib/nginx');

const TLS_STOCK_PROFILE = path.join(__dirname, '..', 'ansible', 'profiles', 'tls-stock.yml');
// Unbuffered access log: a measurement's lines are on disk when it ends.
const COMMON = { upstream: 'uds', profile: 'tuned', workers: 1, set: ['tunekit_nginx_access_log=unbuffered'] };
const FRONTS = {
  plain: { tls: false },
  'tls-stock': { tls: true, varsFiles: [TLS_STOCK_PROFILE], tlsKey: 'rsa' },
  'tls-tuned': { tls: true },
  'tls-tuned-h3': { tls: true, set: ['tunekit_nginx_http3=true'], http3: true },
};
// [front, client] pairs one round measures.
const H1 = [['plain', 'h1'], ['tls-stock', 'h1'], ['tls-tuned', 'h1']];
const H3 = [['tls-tuned-h3', 'h2'], ['tls-tuned-h3', 'h3']];
const PROTOCOL = { h1: 'HTTP/1.1', h2: 'HTTP/2.0', h3: 'HTTP/3.0' };
// A new connection on loopback answers in milliseconds; one with no answer in
// this long has stalled (above).
const STALL_S = 5;
const CURL_TIMED_OUT = 28; // curl's exit code for --max-time

/** The group s_client reports on 127.0.0.1:port: with `group`, offering only that; without, this OpenSSL's default offer. */
function negotiated(port, group = null) {
  const r = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, ...(group ? ['-groups', group] : []), '-brief'],
    { input: '', encoding: 'utf8', timeout: 10000 });
  const text = `${r.stdout}${r.stderr}`;
  const m = /Negotiated TLS1\.3 group: (\S+)/.exec(text) || /(?:Server|Peer) Temp Key: ([^,\s]+)/.exec(text);
  return m ? m[1] : null;
}

/** nginx master + worker scheduler runtime, µs. */
function nginxCpuUs(stack) {
  return stack.pids().nginx.reduce((sum, pid) => sum + (readSchedstatUs(pid) || 0), 0);
}

// The query parameter that tells one measurement's requests from any other in the log.
const MARK = 'tunekit-handshakes';
const MARK_RE = new RegExp(`[?&]${MARK}=([^&]*)`);
let measurements = 0;

/**
 * The access log's lines after `offset` whose request carries `mark` (one
 * measurement's own): requests, full and resumed handshakes, by protocol. nginx
 * writes a line after the response has gone, so a line of the stack's readiness
 * request, or of the previous measurement's last request, can land after `offset`.
 */
function logSince(file, offset, mark) {
  const text = fs.readFileSync(file).subarray(offset).toString('utf8');
  const out = { requests: 0, full: 0, resumed: 0, protocols: {} };
  for (const line of text.split('\n')) {
    const m = /"[A-Z]+ (\S+) (HTTP\/[\d.]+)" (\d{3}) /.exec(line);
    const own = m && MARK_RE.exec(m[1]);
    if (!own || own[1] !== mark) continue;
    out.requests++;
    out.protocols[m[2]] = (out.protocols[m[2]] || 0) + 1;
    const r = RESUMED.exec(line); // wherever the field sits in the line
    if (r && r[1] === 'r') out.resumed++;
    else if (r) out.full++;
  }
  return out;
}

/** curl's arguments for one client kind against a stack, its requests carrying `mark`. */
function curlArgs(stack, client, mark) {
  const base = ['-sS', '--no-sessionid', '-o', '/dev/null'];
  const url = `${stack.url}?${MARK}=${mark}`;
  if (client === 'h1') {
    const tls = stack.ca ? ['-k', '--http1.1'] : ['--http1.1'];
    return [...base, '--max-time', '10', ...tls, '-H', 'Connection: close', `${url}&n=[1-1000000]`];
  }
  return [...base, '--max-time', String(STALL_S), '-k', client === 'h3' ? '--http3-only' : '--http2', url];
}

/**
 * One curl until it is stopped after `seconds` (h1), or one curl per connection
 * until then (h2, h3) and at least one has completed; resolves
 * { completed, stalled } (h1: {}).
 */
async function drive(stack, client, seconds, mark) {
  const end = Date.now() + seconds * 1000;
  const once = (args, stopAt) => new Promise((resolve, reject) => {
    const curl = spawn('curl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    curl.stderr.on('data', (d) => { err += d; });
    const timer = stopAt ? setTimeout(() => curl.kill('SIGTERM'), Math.max(0, stopAt - Date.now())) : null;
    curl.on('error', (e) => { clearTimeout(timer); reject(new Error(`curl: ${e.message} (apt-get install -y curl)`)); });
    curl.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 || (stopAt && signal === 'SIGTERM')) resolve('completed');
      else if (!stopAt && code === CURL_TIMED_OUT) resolve('stalled');
      else reject(new Error(`curl ${args.join(' ')} failed (exit ${code}): ${err.trim()}`));
    });
  });
  if (client === 'h1') {
    await once(curlArgs(stack, client, mark), end);
    return {};
  }
  const n = { completed: 0, stalled: 0 };
  while (Date.now() < end || n.completed === 0) {
    n[await once(curlArgs(stack, client, mark))]++;
    if (n.stalled >= 5 && n.stalled > n.completed) {
      throw new Error(`curl over ${PROTOCOL[client]} stalled on ${n.stalled} of ${n.stalled + n.completed} new connections to ${stack.url} ` +
        `(no answer in ${STALL_S} s each): its QUIC or TLS client does not recover from lost datagrams; run the measurement with a curl ` +
        'built on ngtcp2 (`curl --version` lists it), and look for what drops UDP on loopback (`nstat -az UdpRcvbufErrors`)');
    }
  }
  return n;
}

/** One measurement: a client against a front for `seconds`; nginx's CPU per connection. */
async function measureKit(stack, front, client, seconds) {
  const mark = `${client}-${process.pid}-${++measurements}`;
  const offset = fs.statSync(stack.accessLogPath).size;
  const before = nginxCpuUs(stack);
  const { completed, stalled = 0 } = await drive(stack, client, seconds, mark);
  const cpuUs = nginxCpuUs(stack) - before;
  const log = logSince(stack.accessLogPath, offset, mark);
  const wanted = log.protocols[PROTOCOL[client]] || 0;
  if (!wanted || wanted !== log.requests) {
    throw new Error(`${front} with ${client}: nginx logged ${JSON.stringify(log.protocols)}, not only ${PROTOCOL[client]}`);
  }
  const attempts = completed === undefined ? log.requests : completed + stalled;
  return { front, client, connections: log.requests, stalled, full: log.full, resumed: log.resumed, cpuUs, usPerConnection: cpuUs / attempts };
}

/** One round here: every front started, every pair measured once in the round's order, every front stopped. */
async function roundKit({ seconds, round }) {
  const { startStack } = loadStack();
  const build = nginxBuildText();
  if (!build) throw new Error('no nginx to run here (apt-get install -y nginx)');
  const http3 = http3Of(build);
  const pairs = [...H1, ...(http3 ? H3 : [])];
  const stacks = {};
  try {
    for (const name of new Set(pairs.map(([front]) => front))) {
      const f = FRONTS[name];
      stacks[name] = await startStack({ ...COMMON, ...f, set: [...COMMON.set, ...(f.set || [])], port: 0 });
    }
    const results = [];
    for (const pair of roundOrder(pairs.map((p) => p.join('/')), round)) {
      const [front, client] = pair.split('/');
      results.push(await measureKit(stacks[front], front, client, seconds));
    }
    const groups = Object.fromEntries(['tls-stock', 'tls-tuned'].map((f) => [f, negotiated(stacks[f].tlsPort)]));
    return { nginx: nginxVersion(), openssl: opensslOf(build), http3, groups, results };
  } finally {
    for (const stack of Object.values(stacks)) await stack.stop();
  }
}

module.exports = { roundKit, measureKit, negotiated, logSince, curlArgs, FRONTS, COMMON, PROTOCOL, STALL_S };
