'use strict';
// The metrics endpoint (tunekit_metrics_listen): an HTTP server of its own, never
// the app's listener. Under the kit's primary the primary serves it: at each
// scrape it asks every worker for its sample over the cluster IPC and renders
// them all, one series set per worker (app/metrics.js). Under PM2 (no primary of
// ours) or on its own, each worker serves its own samples, instance I on PORT + I
// (or PATH.(I + 1)).
//
// The primary's functions take the primary `p` (app/cluster.js) and read p.s,
// p.infos (worker.id -> info: worker, pid, slot, state), p.metricsCounters,
// p.metricsWaits; they call info.worker.send.

const cluster = require('node:cluster');
const http = require('node:http');
const { ListenError } = require('./errors');
const { MSG } = require('./ipc');
const metrics = require('./metrics');
const sock = require('./socket');

// A worker that has not answered within this long is left out of that scrape
// (its series go stale for it, as a dead target's do).
const SAMPLE_TIMEOUT_MS = 1000;

function refusal(endpoint, err) {
  const what = `metrics endpoint ${endpoint.text} (tunekit_metrics_listen)`;
  const fix = 'choose another with --set tunekit_metrics_listen=tcp:127.0.0.1:PORT, or turn metrics off (tunekit_metrics=false)';
  if (err instanceof ListenError) return new ListenError(`${what}: ${err.message}`, err.code);
  if (err.code === 'EADDRINUSE') return new ListenError(`${what} is in use by another process (EADDRINUSE): ${fix}`, 'EADDRINUSE');
  if (err.code === 'EACCES') {
    const why = endpoint.kind === 'tcp' ? 'a port below 1024 needs root' : 'the directory needs write and search permission';
    return new ListenError(`${what}: permission denied (EACCES; ${why}): ${fix}`, 'EACCES');
  }
  if (err.code === 'EADDRNOTAVAIL') return new ListenError(`${what}: no such address on this host (EADDRNOTAVAIL): ${fix}`, 'EADDRNOTAVAIL');
  return new ListenError(`${what}: ${err.code || err.message}: ${fix}`, err.code);
}

/**
 * Listen on `endpoint` ({kind: 'tcp'|'unix', ...}) with `render()` → text (or a
 * promise of it) for GET /metrics. Rejects with a ListenError naming the
 * endpoint and the fix.
 *
 * In a PM2 cluster worker the listen goes through PM2's daemon (Node's cluster),
 * which binds the address and holds it: during `pm2 reload` the new instance
 * joins the address its predecessor still serves, instead of failing with
 * EADDRINUSE, and the address stays bound across the hand-over. So a worker
 * never removes a stale file there (the daemon may be serving it); the primary
 * and a lone worker bind themselves, after the same stale-socket check as the
 * app's socket (app/socket.js preparePath).
 */
async function listenMetrics(endpoint, render) {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('the metrics are at GET /metrics\n');
      return;
    }
    Promise.resolve().then(render).then((text) => {
      res.writeHead(200, { 'content-type': metrics.CONTENT_TYPE }).end(text);
    }, (err) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`);
    });
  });
  try {
    if (endpoint.kind === 'unix' && !cluster.isWorker) await sock.preparePath(endpoint.path);
  } catch (err) {
    throw refusal(endpoint, err);
  }
  const options = endpoint.kind === 'unix' ? { path: endpoint.path } : { host: endpoint.host, port: endpoint.port };
  await new Promise((resolve, reject) => {
    server.once('error', (err) => reject(refusal(endpoint, err)));
    server.listen(options, resolve);
  });
  server.unref(); // never what keeps a process alive
  return server;
}

/** Under PM2 (NODE_APP_INSTANCE I) the endpoint of instance I: PORT + I, or PATH.(I + 1). */
function instanceEndpoint(endpoint, instance) {
  if (!instance) return endpoint;
  if (endpoint.kind === 'unix') {
    const path = `${endpoint.path}.${instance + 1}`;
    sock.checkPathLength(path);
    return { ...endpoint, path, text: `unix:${path}` };
  }
  const port = endpoint.port + instance;
  if (port > 65535) {
    throw new ListenError(`metrics endpoint ${endpoint.text} (tunekit_metrics_listen): instance ${instance} would listen on port ${port}, above 65535: choose a lower base port`, 'ERANGE');
  }
  const host = endpoint.ipv6 ? `[${endpoint.host}]` : endpoint.host;
  return { ...endpoint, port, text: `tcp:${host}:${port}` };
}

// ---- the primary: every worker's samples over IPC ---------------------------------

function workerLabel(info) {
  return info.state === 'spare' || !info.slot ? 'spare' : String(info.slot.n);
}

/** Ask one worker for its sample; resolves null when it does not answer in time. */
function askWorker(p, info, seq) {
  return new Promise((resolve) => {
    const key = `${info.id}:${seq}`;
    const timer = setTimeout(() => { p.metricsWaits.delete(key); resolve(null); }, SAMPLE_TIMEOUT_MS);
    p.metricsWaits.set(key, (sample) => { clearTimeout(timer); p.metricsWaits.delete(key); resolve(sample); });
    info.worker.send({ tunekit: MSG.METRICS, seq }, undefined, (err) => { if (err) p.metricsWaits.get(key)?.(null); });
  });
}

let scrapes = 0;

/** The text of one scrape: every connected worker's sample, and the primary's counters. */
async function scrapeWorkers(p) {
  scrapes += 1;
  const infos = [...p.infos.values()].filter((info) => info.worker.isConnected());
  const samples = await Promise.all(infos.map((info) => askWorker(p, info, scrapes)));
  const workers = [];
  infos.forEach((info, i) => {
    if (samples[i]) workers.push({ worker: workerLabel(info), pid: info.pid, sample: samples[i] });
  });
  return metrics.render({ workers, primary: p.metricsCounters });
}

/** A worker's answer (MSG.METRICS_SAMPLE), handed to the scrape that asked. */
function onSample(p, info, msg) {
  const waiting = p.metricsWaits.get(`${info.id}:${msg.seq}`);
  if (waiting) waiting(msg.sample || null);
}

/** Bind the primary's endpoint (before anything else starts); null when metrics are off. */
function serveForPrimary(p) {
  if (!p.s.metrics) return null;
  return listenMetrics(p.s.metricsEndpoint, () => scrapeWorkers(p));
}

module.exports = { SAMPLE_TIMEOUT_MS, listenMetrics, instanceEndpoint, serveForPrimary, onSample, workerLabel };
