'use strict';
// `tunekit bench --https`: what TLS costs and what the kit's TLS settings buy,
// side by side in one run. Three servers, all the kit's tuned nginx in front of
// the same tuned Node cluster on a Unix socket, so that only TLS differs:
//   plain      no TLS (the cost of a connection without a handshake)
//   tls-stock  HTTPS as Debian ships nginx (ansible/profiles/tls-stock.yml) with
//              an RSA 2048 key
//   tls-tuned  the kit's HTTPS front (Mozilla intermediate, ECDSA P-256, shared
//              session cache, tickets off)
// and the same kinds of client against each, A/B interleaved per round:
//   new        a full handshake per connection, one request (h2load --h1)
//   returning  a new connection per request offering the session it had:
//              resumption (wrk, `Connection: close`)
//   keepalive  many requests per connection (wrk): CPU per request
//   h2         HTTP/2, many streams per connection (h2load; with --http2)
// Full and resumed handshakes are counted by nginx itself: the kit's access
// log writes $ssl_session_reused ("r" resumed, "." full) on every line, and
// with one request per connection a line is a handshake. CPU per handshake is
// nginx's CPU per connection over TLS minus plain's per connection in the same
// round (the TCP connection and the proxied request cost the same in both).
// Last, gzip: the tuned front serving a JSON listing with and without
// `Accept-Encoding: gzip`: nginx CPU per KB compressed against bytes saved.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { measure } = require('./measure');
const { spread, ratio, roundOrder } = require('./stats');
const { interval } = require('./interval');
const { nginxTarget, loadStack } = require('./targets');
const errorlog = require('./errorlog');

const ROOT = path.join(__dirname, '..');
const TLS_STOCK_PROFILE = path.join(ROOT, 'ansible', 'profiles', 'tls-stock.yml');

const SERVERS = {
  plain: 'the tuned front over plain HTTP, no TLS (baseline for the handshake cost)',
  'tls-stock': 'HTTPS as Debian ships nginx: TLS 1.0–1.3, RSA 2048 key, no session cache, tickets on (nginx default), 16k records',
  'tls-tuned': 'the kit\'s HTTPS: Mozilla intermediate, ECDSA P-256 key, shared session cache, tickets off, 4k records',
};
const CLIENTS = {
  new: 'a full TLS handshake per connection, one request each (short-lived clients, health checkers)',
  returning: 'a new connection per request, resuming the session it had',
  keepalive: 'many requests per connection (saturation)',
  h2: 'HTTP/2: many streams on few connections (h2load)',
};
// The items the gzip response carries (about 15 KB of JSON).
const GZIP_ITEMS = 200;

// How each client kind drives a target: measure() options.
function clientRun(kind, o) {
  const base = { mode: 'saturation', duration: o.duration, timeoutS: o.timeoutS, unverifiedTls: true };
  if (kind === 'new') return { ...base, driver: 'h2load', h2loadKind: 'new', connections: o.newBatch };
  if (kind === 'h2') return { ...base, driver: 'h2load', h2loadKind: 'h2', connections: o.h2Connections, streams: o.h2Streams };
  if (kind === 'returning') return { ...base, driver: 'wrk', connections: o.returningConnections, headers: ['Connection: close'] };
  return { ...base, driver: 'wrk', connections: o.connections };
}

// Which server × client pairs run: plain has no HTTP/2 (nginx speaks h2 on
// its TLS listener only).
function pairs(clients) {
  const out = [];
  for (const c of clients) for (const s of Object.keys(SERVERS)) if (!(s === 'plain' && c === 'h2')) out.push([s, c]);
  return out;
}

// Counts of full and resumed handshakes nginx logged since `offset`
// (`resumed=r` / `resumed=.`; plain lines carry `resumed=-`).
const RESUMED = / resumed=([r.])(?: |$)/;
function handshakesSince(file, offset) {
  const out = { full: 0, resumed: 0, lines: 0 };
  let fd;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return null;
  }
  try {
    const size = fs.fstatSync(fd).size;
    let pos = offset <= size ? offset : 0;
    let rest = '';
    const buf = Buffer.alloc(1 << 20);
    while (pos < size) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, size - pos), pos);
      if (n <= 0) break;
      pos += n;
      const lines = (rest + buf.toString('utf8', 0, n)).split('\n');
      rest = lines.pop();
      for (const l of lines) {
        out.lines++;
        const m = RESUMED.exec(l);
        if (m && m[1] === 'r') out.resumed++;
        else if (m) out.full++;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return out;
}

async function startServers(o) {
  const { startStack } = loadStack();
  // Unbuffered access log: each run's handshake lines are on disk when it ends.
  const common = { upstream: 'uds', profile: 'tuned', workers: o.workers, module: o.app || null, port: 0, set: [...o.set, 'tunekit_nginx_access_log=unbuffered'] };
  const stacks = {};
  const stops = [];
  try {
    for (const name of Object.keys(SERVERS)) {
      o.progress.note(`bench --https: starting ${name}`);
      const extra = name === 'tls-stock' ? { varsFiles: [TLS_STOCK_PROFILE, ...o.varsFiles], tlsKey: 'rsa' } : { varsFiles: o.varsFiles };
      const stack = await startStack({ ...common, ...extra, tls: name !== 'plain' });
      stops.push(() => stack.stop());
      stacks[name] = stack;
    }
  } catch (err) {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    throw err;
  }
  return { stacks, stop: async () => { for (const stop of stops.reverse()) await stop(); } };
}

// One measurement; with countHandshakes (one request per connection), nginx's
// count of full and resumed handshakes during it.
async function run(target, stack, opts, progress, label, countHandshakes = false) {
  const mark = errorlog.mark(stack.accessLogPath);
  progress.start(label, opts.duration);
  const r = await measure(target, { ...opts, onProgress: (n, rate) => progress.update(n, rate) });
  progress.done();
  r.handshakes = countHandshakes && target.ca ? handshakesSince(mark.file, mark.offset) : null;
  return r;
}

// spread() of f(round) over rounds 1..n.
const perRound = (n, f) => spread([...Array(n).keys()].map((i) => f(i + 1)));

const perReq = (r, key) => (r && r.server && r.requests.completed ? r.server[key] / r.requests.completed : null);

// Per round: nginx CPU per connection over TLS minus plain's (same client kind).
function handshakeCpu(results, round, server, client) {
  const get = (s) => results.find((r) => r.round === round && r.front === s && r.client === client);
  const tlsRun = get(server);
  const plainRun = get('plain');
  const a = perReq(tlsRun, 'nginxCpuUs');
  const b = perReq(plainRun, 'nginxCpuUs');
  return a != null && b != null ? a - b : null;
}

function summarise(results, clients, rounds) {
  const rows = [];
  for (const [server, client] of pairs(clients)) {
    const rs = results.filter((r) => r.front === server && r.client === client);
    if (!rs.length) continue;
    const hs = rs.map((r) => r.handshakes).filter(Boolean);
    const full = hs.reduce((a, h) => a + h.full, 0);
    const resumed = hs.reduce((a, h) => a + h.resumed, 0);
    const perHandshake = server !== 'plain' && (client === 'new' || client === 'returning')
      ? perRound(rounds, (i) => handshakeCpu(results, i, server, client)) : null;
    rows.push({
      front: server,
      client,
      driver: rs[0].driver,
      rounds: rs.length,
      reqPerSec: spread(rs.map((r) => r.reqPerSec)),
      latencyUs: { p50: spread(rs.map((r) => r.latencyUs.p50)), p99: spread(rs.map((r) => r.latencyUs.p99)) },
      nginxCpuUsPerReq: spread(rs.map((r) => perReq(r, 'nginxCpuUs'))),
      cpuUsPerReq: spread(rs.map((r) => perReq(r, 'cpuUs'))),
      handshakeCpuUs: perHandshake,
      handshakes: hs.length ? { full, resumed, resumedShare: full + resumed ? resumed / (full + resumed) : null } : null,
      generatorMachineShare: spread(rs.map((r) => r.generator.machineShare)),
      generatorCpuUsPerReq: spread(rs.map((r) => (r.requests.completed ? r.generator.cpuUs / r.requests.completed : null))),
      errors: rs.reduce((a, r) => a + r.requests.errors + r.requests.timeouts + r.requests.non2xx, 0),
      errorLogLines: rs.reduce((a, r) => a + (r.errorLog ? r.errorLog.lines || 0 : 0), 0),
    });
  }
  return rows;
}

// tls-tuned over tls-stock, per round, for every figure the targets name: median
// (min–max), the per-round values and their 95% interval (interval.js).
function ratios(results, clients, rounds) {
  const over = (f) => {
    const values = [...Array(rounds).keys()].map((i) => f(i + 1));
    return { ...spread(values), perRound: values, ci: interval(values) };
  };
  const get = (round, server, client) => results.find((r) => r.round === round && r.front === server && r.client === client);
  const out = [];
  for (const client of clients) {
    if (!results.some((r) => r.client === client && r.front === 'tls-tuned')) continue;
    const x = { name: `tls-tuned/tls-stock ${client}`, client };
    x.reqPerSec = over((i) => ratio((get(i, 'tls-tuned', client) || {}).reqPerSec, (get(i, 'tls-stock', client) || {}).reqPerSec));
    x.cpuUsPerReq = over((i) => ratio(perReq(get(i, 'tls-tuned', client), 'cpuUs'), perReq(get(i, 'tls-stock', client), 'cpuUs')));
    if (client === 'new' || client === 'returning') {
      x.handshakeCpuUs = over((i) => ratio(handshakeCpu(results, i, 'tls-tuned', client), handshakeCpu(results, i, 'tls-stock', client)));
    }
    out.push(x);
  }
  return out;
}

// gzip on the tuned front: the same JSON with and without Accept-Encoding.
async function gzipCost(target, stack, o) {
  const url = `${target.url}?items=${GZIP_ITEMS}`;
  const t = { ...target, name: 'tls-tuned', url };
  const runs = [];
  for (let round = 1; round <= o.rounds; round++) {
    for (const gzip of round % 2 ? [false, true] : [true, false]) {
      const opts = { mode: 'saturation', driver: 'wrk', connections: o.connections, duration: o.gzipDuration, timeoutS: o.timeoutS, unverifiedTls: true, headers: gzip ? ['Accept-Encoding: gzip'] : [] };
      const r = await run(t, stack, opts, o.progress, `round ${round}/${o.rounds} gzip ${gzip ? 'on' : 'off'} (wrk)`);
      runs.push({ round, gzip, result: r });
    }
  }
  const pick = (round, gzip) => runs.find((x) => x.round === round && x.gzip === gzip).result;
  const bytesPerResponse = (r) => (r.raw && r.raw.bytes != null ? r.raw.bytes / r.requests.completed : null);
  const over = (f) => perRound(o.rounds, f);
  const plainBytes = over((i) => bytesPerResponse(pick(i, false)));
  const gzBytes = over((i) => bytesPerResponse(pick(i, true)));
  const extraCpu = over((i) => perReq(pick(i, true), 'nginxCpuUs') - perReq(pick(i, false), 'nginxCpuUs'));
  const kb = plainBytes.median / 1024;
  return {
    url: url.replace(/^https:\/\/[^/]+/, ''),
    level: stack.vars.tunekit_nginx_gzip_level,
    bytesPerResponse: { identity: plainBytes, gzip: gzBytes },
    savedShare: plainBytes.median ? 1 - gzBytes.median / plainBytes.median : null,
    nginxCpuUsPerReq: { identity: over((i) => perReq(pick(i, false), 'nginxCpuUs')), gzip: over((i) => perReq(pick(i, true), 'nginxCpuUs')) },
    extraCpuUsPerReq: extraCpu,
    cpuUsPerKb: extraCpu.median != null && kb ? extraCpu.median / kb : null,
    reqPerSec: { identity: over((i) => pick(i, false).reqPerSec), gzip: over((i) => pick(i, true).reqPerSec) },
    runs: runs.map((x) => ({ round: x.round, gzip: x.gzip, ...x.result })),
  };
}

// What a TLS front negotiates with OpenSSL's own client: protocol, cipher,
// key type and size, key exchange ("TLSv1.3 TLS_AES_256_GCM_SHA384, RSA
// 2048-bit key, X25519"), so the report shows what was compared.
function negotiated(port) {
  const r = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost'], { input: '', encoding: 'utf8', timeout: 10000 });
  const out = r.stdout || '';
  const m = (re) => (re.exec(out) || [])[1] || '?';
  return `${m(/New, (\S+), Cipher is/)} ${m(/Cipher is (\S+)/)}, ${m(/Peer signature type: (\S+)/)} ${m(/Server public key is (\d+) bit/)}-bit key, ${m(/Server Temp Key: ([^,\n]+)/)}`;
}

// What one signature costs on this machine, the part of a full handshake the
// key type decides (openssl speed, one second each): µs per sign.
function signatureCost() {
  const r = spawnSync('openssl', ['speed', '-seconds', '1', '-mr', 'rsa2048', 'ecdsap256'], { encoding: 'utf8' });
  const rsa = /^\+F2:\d+:2048:([\d.]+):/m.exec(r.stdout || '');
  const ec = /^\+F4:\d+:256:([\d.]+):/m.exec(r.stdout || '');
  return rsa && ec ? { rsa2048SignUs: 1e6 / Number(rsa[1]), ecdsaP256SignUs: 1e6 / Number(ec[1]) } : null;
}

/**
 * The whole TLS bench. `o`: { rounds, duration, connections, http2, workers,
 * set, varsFiles, timeoutS, warmup, gzipDuration, newBatch,
 * returningConnections, h2Connections, h2Streams, progress }.
 */
async function runTlsBench(o) {
  const clients = ['new', 'returning', 'keepalive', ...(o.http2 ? ['h2'] : [])];
  let servers = null;
  const results = [];
  let gzip = null;
  let crypto = null;
  const fronts = {};
  try {
    o.progress.note('bench --https: signature cost (openssl speed, 4 s)');
    crypto = signatureCost();
    servers = await startServers(o);
    for (const name of ['tls-stock', 'tls-tuned']) fronts[name] = negotiated(servers.stacks[name].tlsPort);
    const targets = Object.fromEntries(Object.entries(servers.stacks).map(([name, s]) => [name, nginxTarget(name, s, SERVERS[name])]));
    const list = pairs(clients);
    if (o.warmup > 0) {
      for (const [server, client] of list) {
        await run(targets[server], servers.stacks[server], { ...clientRun(client, o), duration: o.warmup }, o.progress, `warm-up ${server} ${client}`);
      }
    }
    for (let round = 1; round <= o.rounds; round++) {
      for (const client of clients) {
        const names = list.filter(([, c]) => c === client).map(([s]) => s);
        for (const server of roundOrder(names, round - 1)) {
          const opts = clientRun(client, o);
          const r = await run(targets[server], servers.stacks[server], opts, o.progress,
            `round ${round}/${o.rounds} ${server} ${client} (${opts.driver})`, client === 'new' || client === 'returning');
          results.push({ ...r, round, front: server, client, scenario: `${server} ${client}` });
        }
      }
    }
    if (o.gzipDuration > 0) gzip = await gzipCost(targets['tls-tuned'], servers.stacks['tls-tuned'], o);
  } finally {
    if (servers) await servers.stop();
  }
  return { results, summary: summarise(results, clients, o.rounds), ratios: ratios(results, clients, o.rounds), gzip, crypto, fronts, clients };
}

module.exports = { runTlsBench, summarise, ratios, handshakesSince, RESUMED, signatureCost, pairs, SERVERS, CLIENTS };
