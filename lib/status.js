'use strict';
// `tunekit status`: the whole stack of this host in one table, read from the
// endpoints Prometheus scrapes, so what it shows is what Prometheus sees:
//   - the runner's metrics endpoint (the "metricsListen" of app.json,
//     tunekit_metrics_listen; under PM2 instance I on PORT + I): one row per worker;
//   - nginx's stub_status (the server of nginx's files with `stub_status`,
//     tunekit_nginx_status_*): active, waiting, accepted - handled;
//   - the app socket's accept queue, from sock_diag as `ss -l` prints it (the
//     source metrics/queue-sampler.js reads; lib/ does not import metrics/, so
//     doctor's `listeners()` reads it here);
//   - failed attempts to reach the app by cause: mtail's counters
//     (metrics/nginx.mtail) when mtail answers, else the same causes counted in
//     nginx's error log over the last minutes (the output says which).
// An endpoint that does not answer is a StatusDown error naming it and the
// variable that sets it.

const fs = require('node:fs');
const http = require('node:http');
const { spawnSync } = require('node:child_process');
const nginxconf = require('./nginxconf');
const { findNginx } = require('./nginx');
const doctor = require('./doctor');
const apphost = require('./apphost');
const { KitError } = require('./errors');

const TIMEOUT_MS = 3000;
const DEFAULT_MTAIL = 'http://127.0.0.1:3903/metrics';
// PM2 instances are probed upward from the base port until one does not answer
// with the runner's series.
const MAX_INSTANCES = 64;

// The causes of metrics/nginx.mtail, in its order (first match wins); a unit
// test holds the two lists equal.
const CAUSES = [
  ['closed_early', /upstream prematurely closed connection|\(104: Connection reset by peer\)|\(32: Broken pipe\)/],
  ['eagain', /\(11: Resource temporarily unavailable\)/],
  ['refused', /\(111: Connection refused\)/],
  ['eacces', /\(13: Permission denied\)/],
  ['enoent', /\(2: No such file or directory\)/],
  ['timeout', /upstream timed out/],
  ['max_conns', /no live upstreams/],
  ['other', /./],
];
const UPSTREAM_ERROR = / \[(error|crit)\] \d+#\d+: .* upstream: "/;

/** An endpoint that did not answer: printed as one line, exit 1. */
class StatusDown extends KitError {}

/** Prometheus text format 0.0.4 → [{ name, labels, value }] (comments and blank lines skipped). */
function parseExposition(text) {
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/.exec(line);
    if (!m) throw new Error(`not a sample line of the Prometheus text format: ${line}`);
    const labels = {};
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/gy;
    const body = m[3] || '';
    for (let pos = 0; pos < body.length;) {
      re.lastIndex = pos;
      const l = re.exec(body);
      if (!l) throw new Error(`labels not in the Prometheus text format: {${body}}`);
      labels[l[1]] = l[2].replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c));
      pos = re.lastIndex;
    }
    const v = m[4];
    out.push({ name: m[1], labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) });
  }
  return out;
}

/**
 * The q-quantile of a cumulative histogram [{ le, count }] as Prometheus's
 * histogram_quantile() computes it: linear within the bucket it falls in; the
 * highest finite bound when it falls in +Inf; null with no observations.
 */
function quantile(q, buckets) {
  const b = [...buckets].sort((x, y) => x.le - y.le);
  const total = b.length ? b[b.length - 1].count : 0;
  if (!total) return null;
  const rank = q * total;
  for (let i = 0; i < b.length; i++) {
    if (b[i].count < rank) continue;
    if (b[i].le === Infinity) return i > 0 ? b[i - 1].le : null;
    const lo = i > 0 ? b[i - 1].le : 0;
    const below = i > 0 ? b[i - 1].count : 0;
    const inBucket = b[i].count - below;
    return inBucket ? lo + (b[i].le - lo) * ((rank - below) / inBucket) : b[i].le;
  }
  return b[b.length - 1].le;
}

/** One row per worker of the runner's samples: { worker, pid, requests, reused, reusePct, loopP99Ms, rssBytes, fds, maxFds }. */
function workersOf(samples) {
  const rows = new Map();
  const row = (s) => {
    const key = `${s.labels.worker}|${s.labels.pid}`;
    if (!rows.has(key)) {
      rows.set(key, { worker: s.labels.worker, pid: Number(s.labels.pid), requests: 0, reused: 0, buckets: [], rssBytes: null, fds: null, maxFds: null });
    }
    return rows.get(key);
  };
  for (const s of samples) {
    if (s.labels.pid === undefined) continue;
    const r = row(s);
    if (s.name === 'tunekit_app_requests_total') {
      r.requests += s.value;
      if (s.labels.connection === 'reused') r.reused += s.value;
    } else if (s.name === 'tunekit_app_event_loop_delay_seconds_bucket') {
      r.buckets.push({ le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), count: s.value });
    } else if (s.name === 'process_resident_memory_bytes') r.rssBytes = s.value;
    else if (s.name === 'process_open_fds') r.fds = s.value;
    else if (s.name === 'process_max_fds') r.maxFds = s.value;
  }
  return [...rows.values()].map(({ buckets, ...r }) => {
    const p99 = quantile(0.99, buckets);
    return { ...r, reusePct: r.requests ? (100 * r.reused) / r.requests : null, loopP99Ms: p99 == null ? null : p99 * 1000 };
  }).sort((a, b) => Number(a.worker) - Number(b.worker) || a.pid - b.pid);
}

/** nginx's stub_status page → { active, accepted, handled, requests, reading, writing, waiting }. */
function parseStubStatus(text) {
  const m = /Active connections:\s*(\d+)\s*\nserver accepts handled requests\s*\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\nReading:\s*(\d+)\s+Writing:\s*(\d+)\s+Waiting:\s*(\d+)/.exec(text);
  if (!m) throw new Error('not a stub_status page (no "Active connections:" ... "Waiting:")');
  const [active, accepted, handled, requests, reading, writing, waiting] = m.slice(1).map(Number);
  return { active, accepted, handled, requests, reading, writing, waiting };
}

/** Failed attempts by cause in the error log's lines from the last `minutes`: { cause: n }. nginx writes local time. */
function causesInLog(text, minutes, now = Date.now()) {
  const out = Object.fromEntries(CAUSES.map(([c]) => [c, 0]));
  for (const line of text.split('\n')) {
    const t = /^(\d{4})\/(\d\d)\/(\d\d) (\d\d):(\d\d):(\d\d) /.exec(line);
    if (!t || !UPSTREAM_ERROR.test(line)) continue;
    const at = new Date(+t[1], t[2] - 1, +t[3], +t[4], +t[5], +t[6]).getTime();
    if (now - at > minutes * 60e3) continue;
    out[CAUSES.find(([, re]) => re.test(line))[0]] += 1;
  }
  return out;
}

/** GET url (http://, or unix:PATH:/p): resolves the body of a 200; rejects with the reason. */
function get(url, timeoutMs = TIMEOUT_MS) {
  const u = /^unix:([^:]+):(\/.*)$/.exec(url);
  const opts = u ? { socketPath: u[1], path: u[2] } : url;
  return new Promise((resolve, reject) => {
    const req = http.get(opts, { timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => reject(new Error(err.code || err.message)));
  });
}

/** "tcp:HOST:PORT" | "unix:PATH" (tunekit_metrics_listen) → the URL of instance `i` (PM2: PORT + i, PATH.(i + 1)). */
function metricsUrl(listen, i = 0) {
  const t = /^tcp:(.+):(\d+)$/.exec(listen);
  if (t) return `http://${t[1].includes(':') && !t[1].startsWith('[') ? `[${t[1]}]` : t[1]}:${Number(t[2]) + i}/metrics`;
  if (listen.startsWith('unix:')) return `unix:${listen.slice(5)}${i ? `.${i + 1}` : ''}:/metrics`;
  throw new StatusDown(`"metricsListen": ${JSON.stringify(listen)} is neither tcp:HOST:PORT nor unix:PATH (tunekit_metrics_listen)`);
}

/** The stub_status URL of an nginx tree: the server with a location holding `stub_status`; null when none. */
function statusUrlOf(tree) {
  for (const { node, ancestors } of nginxconf.findAll(tree, 'stub_status')) {
    const loc = ancestors[ancestors.length - 1];
    const server = ancestors.findLast((a) => a.name === 'server');
    const listen = server && nginxconf.child(server.children, 'listen');
    if (!node || !loc || loc.name !== 'location' || !listen) continue;
    let addr = listen.args[0];
    if (/^\d+$/.test(addr)) addr = `127.0.0.1:${addr}`;
    addr = addr.replace(/^\*:/, '127.0.0.1:').replace(/^0\.0\.0\.0:/, '127.0.0.1:').replace(/^\[::\]:/, '[::1]:');
    return `http://${addr}${loc.args[loc.args.length - 1]}`;
  }
  return null;
}

/** nginx's files as `nginx -T` reads them: { statusUrl, errorLog }; a file nginx refuses is a StatusDown. */
function readNginx(nginxConf) {
  const r = spawnSync(findNginx(), ['-T', '-c', nginxConf], { encoding: 'utf8' });
  if (r.status !== 0) {
    const why = r.error ? (r.error.code || r.error.message) : (r.stderr || '').trim().split('\n').pop();
    throw new StatusDown(`nginx -T -c ${nginxConf} failed (${why}): pass --nginx-conf PATH, or --status URL`);
  }
  const parsed = nginxconf.parseDump(r.stdout);
  return { statusUrl: statusUrlOf(parsed.tree), errorLog: doctor.describeNginx(parsed).errorLog };
}

/**
 * Where to read, from the host's files (app.json, nginx's files) unless a flag
 * says: { appConfig, settings, metrics: [url] | null (probe PM2 instances), metricsBase,
 * statusUrl, errorLog, mtail, app (lib/apphost.js find()), live (ss) }.
 */
function locate({ appConfig = doctor.DEFAULT_APP_CONFIG, nginxConf = doctor.DEFAULT_NGINX_CONF, metrics = [], status = null, mtail = DEFAULT_MTAIL, front = true } = {}) {
  let settings;
  try {
    settings = JSON.parse(fs.readFileSync(appConfig, 'utf8'));
  } catch (err) {
    throw new StatusDown(`${appConfig} ${err.code === 'ENOENT' ? 'does not exist' : `cannot be read (${err.code || err.message})`}: pass --app-config FILE (the runner's app.json), or --stack DIR (a stack kept by \`tunekit demo --keep\`)`);
  }
  if (!metrics.length && settings.metrics === false) {
    throw new StatusDown(`${appConfig} says "metrics": false: the runner exports nothing (turn on tunekit_metrics, or pass --metrics URL)`);
  }
  const live = doctor.listeners();
  const app = apphost.find({ appConfig, live });
  // front: false, a runner started by hand (`tunekit run`): no nginx of its own to read.
  const nginx = status ? { statusUrl: status, errorLog: null } : front ? readNginx(nginxConf) : { statusUrl: null, errorLog: null };
  if (front && !nginx.statusUrl) {
    throw new StatusDown(`no server with stub_status in ${nginxConf} (tunekit_nginx_status): pass --nginx-conf FILE (the nginx.conf whose files hold it; ` +
      'a stack kept by `tunekit demo --keep`: --stack DIR), or --status URL, or render status.conf');
  }
  const base = settings.metricsListen || 'tcp:127.0.0.1:9464';
  return { appConfig, nginxConf: front ? nginxConf : null, settings, app, live, mtail, statusUrl: nginx.statusUrl, errorLog: nginx.errorLog,
    metrics: metrics.length ? metrics : app.kind === 'pm2' ? null : [metricsUrl(base)], metricsBase: base };
}

/** The runner's samples from every endpoint: under PM2 (metrics null) instances 0, 1, ... until one does not answer. */
async function scrapeApp(where) {
  const down = (url, err) => new StatusDown(`the app's metrics endpoint ${url} is down (${err.message}): ` +
    `it is tunekit_metrics_listen ("metricsListen" in ${where.appConfig}); is the app running?`);
  const samples = [];
  if (where.metrics) {
    for (const url of where.metrics) {
      const body = await get(url).catch((err) => { throw down(url, err); });
      samples.push(...parseExposition(body));
    }
    return samples;
  }
  for (let i = 0; i < MAX_INSTANCES; i++) {
    const url = metricsUrl(where.metricsBase, i);
    const body = await get(url).catch((err) => { if (i === 0) throw down(url, err); return null; });
    // The next port answering with something other than the runner's series is not an instance.
    let mine = null;
    try {
      mine = body === null ? null : parseExposition(body);
    } catch {
      mine = null;
    }
    if (!mine || !mine.some((x) => x.name === 'tunekit_app_info')) break;
    samples.push(...mine);
  }
  return samples;
}

/** mtail's failed-attempt counters, or the error log's count over `minutes` when mtail does not answer. */
async function upstreamErrors(where, minutes) {
  const body = await get(where.mtail).catch(() => null);
  if (body !== null) {
    const byCause = Object.fromEntries(CAUSES.map(([c]) => [c, 0]));
    for (const s of parseExposition(body)) if (s.name === 'tunekit_nginx_upstream_errors_total') byCause[s.labels.cause] = s.value;
    return { source: `mtail ${where.mtail}, since mtail started`, byCause };
  }
  if (!where.errorLog) return { source: 'none: mtail does not answer and no error log is known (pass --nginx-conf)', byCause: null };
  let text;
  try {
    text = fs.readFileSync(where.errorLog, 'utf8');
  } catch (err) {
    return { source: `none: ${where.errorLog} cannot be read (${err.code})`, byCause: null };
  }
  return { source: `${where.errorLog}, the last ${minutes} min (mtail does not answer at ${where.mtail})`, byCause: causesInLog(text, minutes) };
}

/** Seconds since a process started (/proc/PID/stat starttime, in clock ticks since boot); null when it is gone. */
function uptimeOf(pid, ticks = clockTicks()) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const start = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) - start / ticks;
  } catch {
    return null;
  }
}

let ticksCache = null;
function clockTicks() {
  if (ticksCache === null) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    ticksCache = Number(r.stdout) > 0 ? Number(r.stdout) : 100;
  }
  return ticksCache;
}

/** One reading of everything: the data `--json` prints and format() lays out. */
async function gather(where, { minutes = 5 } = {}) {
  const samples = await scrapeApp(where);
  const stubText = where.statusUrl === null ? null : await get(where.statusUrl).catch((err) => {
    throw new StatusDown(`nginx's stub_status ${where.statusUrl} is down (${err.message}): it is tunekit_nginx_status_address/_port/_path (status.conf); is nginx running?`);
  });
  const restarts = samples.filter((s) => s.name === 'tunekit_app_worker_restarts_total');
  // A slot's restarts, from the primary's counters (none under PM2: no primary of ours).
  const slotRestarts = new Map(samples.filter((x) => x.name === 'tunekit_app_slot_restarts_total').map((x) => [x.labels.worker, x.value]));
  const perSlot = (w) => (!restarts.length || w.worker === 'spare' ? null : slotRestarts.get(w.worker) || 0);
  const workers = workersOf(samples).map((w) => ({ ...w, uptimeS: uptimeOf(w.pid), restarts: perSlot(w) }));
  const sockets = apphost.listenersOf(String(where.settings.listen || ''), doctor.listeners())
    .map((l) => ({ socket: l.local, queued: l.queued ?? null, limit: l.backlog }));
  return {
    at: new Date().toISOString(),
    app: { appConfig: where.appConfig, listen: where.settings.listen, runBy: where.app.kind, pid: where.app.pid || null,
      restarts: restarts.length ? restarts.reduce((a, s) => a + s.value, 0) : null, endpoints: where.metrics || `${where.metricsBase} (+ instance)` },
    workers,
    nginx: stubText === null ? null : { url: where.statusUrl, ...parseStubStatus(stubText) },
    acceptQueue: { backlog: where.settings.backlog ?? null, sockets },
    upstreamErrors: stubText === null ? { source: 'none: no nginx in front of this runner', byCause: null } : await upstreamErrors(where, minutes),
  };
}

const cell = (v, digits = 0) => (v == null ? '-' : typeof v === 'number' ? v.toFixed(digits) : String(v));

function duration(s) {
  if (s == null) return '-';
  if (s < 60) return `${Math.floor(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** Rows of strings as columns, each as wide as its widest cell. */
function columns(rows) {
  const width = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(width[i])).join('  ').trimEnd());
}

/** The data of gather() as the text table. */
function format(d) {
  const a = d.app;
  const out = [`app     ${a.listen} (${a.appConfig}; ${a.runBy ? `${a.runBy}, pid ${a.pid}` : 'runner not found'}), ` +
    `workers replaced ${a.restarts == null ? '- (no primary of ours: see pm2 ls)' : a.restarts}`];
  out.push(...columns([['worker', 'pid', 'uptime', 'restarts', 'rss MiB', 'loop p99 ms', 'fds/limit', 'requests', 'reuse %'],
    ...d.workers.map((w) => [cell(w.worker), cell(w.pid), duration(w.uptimeS), cell(w.restarts), cell(w.rssBytes == null ? null : w.rssBytes / 1048576, 1),
      cell(w.loopP99Ms, 1), `${cell(w.fds)}/${cell(w.maxFds)}`, cell(w.requests), cell(w.reusePct, 1)])]).map((l) => `  ${l}`));
  const n = d.nginx;
  out.push(n ? `nginx   active ${n.active}, waiting ${n.waiting}, accepted - handled ${n.accepted - n.handled} (${n.url})`
    : 'nginx   none: a runner started by hand (`tunekit run`), nothing of nginx to read');
  const q = d.acceptQueue;
  const qs = q.sockets.map((s) => `${s.socket} ${cell(s.queued)}/${s.limit}`).join(', ');
  out.push(`queue   ${qs || 'no listening socket found for the app\'s listen'} (queued/limit; backlog ${cell(q.backlog)})`);
  const e = d.upstreamErrors;
  const causes = e.byCause ? Object.entries(e.byCause).map(([c, v]) => `${c} ${v}`).join(', ') : '-';
  out.push(`errors  failed attempts to reach the app by cause: ${causes} (${e.source})`);
  return `${out.join('\n')}\n`;
}

module.exports = { CAUSES, StatusDown, parseExposition, quantile, workersOf, parseStubStatus, causesInLog, get, metricsUrl, statusUrlOf, locate, gather, uptimeOf, format, TIMEOUT_MS, DEFAULT_MTAIL, MAX_INSTANCES };
