'use strict';
// The h2load driver (Debian's nghttp2-client): C, one OpenSSL client per
// connection, so it is the kit's generator for TLS handshakes and HTTP/2.
//   h2:  HTTP/2 over TLS (ALPN h2), `streams` requests at once on each of
//        `connections` connections, in batches of H2_REQUESTS_PER_CONNECTION
//        requests per connection until `duration` is spent. (One long run
//        would reach nginx's keepalive_requests: nginx then sends GOAWAY, and
//        h2load, which never reconnects, counts the streams in flight as
//        errored and stops that client.)
//   new: HTTP/1.1 clients that each open a connection, make one full TLS
//        handshake (h2load never offers a session it had), send one request
//        and close: short-lived clients and health checkers. h2load starts a
//        batch of `connections` such clients at once; batches follow each
//        other until `duration` is spent.
// Latency: h2load's per-request log (--log-file: start, status, µs), from
// the request's send to its response, into the kit's histogram. h2load does
// not verify the server's certificate (loopback bench only). Its CPU is this
// process's reaped-children time across the run.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runTool } = require('./tool');
const { MissingToolError } = require('../lib/errors');
const { reapedChildrenUs } = require('./cpu');
const H = require('./histogram');

const H2LOAD = '/usr/bin/h2load';
// Below nginx's default keepalive_requests (1000), which also bounds HTTP/2
// requests per connection since nginx 1.19.7.
const H2_REQUESTS_PER_CONNECTION = 500;

function available(bin = H2LOAD) {
  return fs.existsSync(bin);
}

// h2load's summary: the requests line, the status codes line, the protocol.
function parseSummary(stdout) {
  const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(stdout);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(stdout);
  if (!req || !codes) throw new Error(`h2load printed no summary; its output was:\n${stdout.slice(-2000)}`);
  const n = (m, i) => Number(m[i]);
  const proto = /Application protocol: (\S+)/.exec(stdout);
  const tls = /TLS Protocol: (\S+)/.exec(stdout);
  return {
    total: n(req, 1), done: n(req, 3), succeeded: n(req, 4), failed: n(req, 5), errored: n(req, 6), timeout: n(req, 7),
    s2xx: n(codes, 1), s3xx: n(codes, 2), s4xx: n(codes, 3), s5xx: n(codes, 4),
    protocol: proto ? proto[1] : null,
    tls: tls ? tls[1] : null,
  };
}

// Per-request lines of --log-file: "<start µs>\t<status>\t<duration µs>".
function readLog(file, hist) {
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch { /* h2load wrote nothing: no request finished */ }
  for (const line of text.split('\n')) {
    const [, status, us] = line.split('\t');
    if (us !== undefined && Number(status) > 0) H.recordMs(hist, Number(us) / 1000);
  }
}

/**
 * Drive `url` (https) with h2load. kind 'h2' or 'new' (see the top).
 * Returns the driver result measure.js expects.
 */
async function runH2load({ url, kind, connections, streams = 10, duration, timeoutS = 10, bin = H2LOAD, onProgress = () => {} }) {
  if (!available(bin)) throw new MissingToolError(`h2load not found at ${bin}; install it: apt-get install -y nghttp2-client`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-h2load-'));
  const hist = H.createHistogram();
  const sum = { total: 0, done: 0, succeeded: 0, failed: 0, errored: 0, timeout: 0, s2xx: 0, s3xx: 0, s4xx: 0, s5xx: 0, protocol: null, tls: null };
  const cpu0 = reapedChildrenUs();
  const started = Date.now();
  const tick = setInterval(() => onProgress(sum.done, (Date.now() - started) / 1000), 1000);
  let batches = 0;
  try {
    const common = ['-t', '1', '-T', `${timeoutS}s`, '-N', `${timeoutS}s`];
    do {
      const log = path.join(dir, `batch-${batches}.log`);
      const args = kind === 'h2'
        ? [...common, '-c', String(connections), '-m', String(streams), '-n', String(connections * H2_REQUESTS_PER_CONNECTION), `--log-file=${log}`, url]
        : [...common, '--h1', '-c', String(connections), '-n', String(connections), `--log-file=${log}`, url];
      const s = parseSummary(await runTool(bin, args, (duration + timeoutS + 30) * 1000));
      for (const k of Object.keys(sum)) if (typeof s[k] === 'number') sum[k] += s[k];
      sum.protocol = sum.protocol || s.protocol;
      sum.tls = sum.tls || s.tls;
      readLog(log, hist);
      batches++;
    } while (Date.now() - started < duration * 1000);
  } finally {
    clearInterval(tick);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const elapsedS = (Date.now() - started) / 1000;
  const cpuUs = reapedChildrenUs() - cpu0;
  const errors = sum.errored + (sum.total - sum.done - sum.timeout > 0 ? sum.total - sum.done - sum.timeout : 0);
  const non2xx = sum.s3xx + sum.s4xx + sum.s5xx;
  return {
    driver: 'h2load',
    generator: { processes: 1, threads: 1, cpuUs: Math.round(cpuUs), perProcessCpuShare: [cpuUs / 1e6 / elapsedS] },
    elapsedS,
    reqPerSec: sum.done / elapsedS,
    requests: {
      completed: sum.done,
      ok: sum.s2xx,
      non2xx,
      errors,
      timeouts: sum.timeout,
      kinds: Object.fromEntries([['errored', errors], ['timeout', sum.timeout], ['3xx', sum.s3xx], ['4xx', sum.s4xx], ['5xx', sum.s5xx]]
        .filter(([, n]) => n > 0)),
    },
    histogram: hist,
    workers: null,
    raw: { protocol: sum.protocol, tls: sum.tls, batches, connections: kind === 'new' ? sum.total : connections * batches },
  };
}

module.exports = { runH2load, parseSummary, available, H2LOAD };
