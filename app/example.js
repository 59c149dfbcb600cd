'use strict';
// The example app, served when no MODULE is given.
//   any path        → {"ok":true,"worker":<cluster worker id>,"pid":<pid>}
//   GET /healthz    → the same plus the worker count, the timeouts as the live
//                     server has them (what nginx's side must agree with) and the
//                     Node version (whose keepAliveTimeoutBuffer decides when an
//                     idle connection really closes)
//   ?delay_ms=N     → answer after N ms (0..60000): a server with a known service
//                     time for load tests, and a slow request for drain tests.
//   ?items=N        → the body also carries N records (0..10000, about 80 bytes
//                     each): a JSON API response big enough for gzip to matter.
//   GET /events     → a server-sent events stream, one `tick` a second, for ever;
//                     when the runner starts a drain (process event tunekit:drain)
//                     it sends `event: drain` and ends, so the stop waits for no
//                     stream and the client reconnects to a worker that stays.

const cluster = require('node:cluster');

const MAX_DELAY_MS = 60000;
const MAX_ITEMS = 10000;

function workerId() {
  return cluster.worker ? cluster.worker.id : 0;
}

function handler(req, res) {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname === '/events') {
    events(req, res);
    return;
  }
  const body = { ok: true, worker: workerId(), pid: process.pid };
  if (url.pathname === '/healthz') {
    const server = req.socket && req.socket.server;
    body.workers = Number(process.env.TUNEKIT_WORKERS) || null;
    body.keepAliveTimeout = server ? server.keepAliveTimeout : null;
    // Node closes an idle connection keepAliveTimeout + this later (a setting from
    // 22.19 / 24.6; undefined before, where the version decides it).
    body.keepAliveTimeoutBuffer = server && Number.isFinite(server.keepAliveTimeoutBuffer) ? server.keepAliveTimeoutBuffer : null;
    body.node = process.versions.node;
    body.headersTimeout = server ? server.headersTimeout : null;
    body.requestTimeout = server ? server.requestTimeout : null;
  }
  const delay = Number(url.searchParams.get('delay_ms') || 0);
  if (!Number.isFinite(delay) || delay < 0 || delay > MAX_DELAY_MS) {
    send(res, 400, { ok: false, error: `delay_ms must be 0..${MAX_DELAY_MS}` });
    return;
  }
  const items = Number(url.searchParams.get('items') || 0);
  if (!Number.isInteger(items) || items < 0 || items > MAX_ITEMS) {
    send(res, 400, { ok: false, error: `items must be a whole number 0..${MAX_ITEMS}` });
    return;
  }
  if (items > 0) body.items = records(items);
  if (delay > 0) setTimeout(send, delay, res, 200, body);
  else send(res, 200, body);
}

// ---- server-sent events that follow a drain ------------------------------------
const TICK_MS = 1000;
const streams = new Set();

function endStreams() {
  for (const res of streams) res.end('event: drain\ndata: {}\n\n');
}

function events(req, res) {
  // Listen once the first stream opens: the runner loads this module in every worker.
  if (!process.listeners('tunekit:drain').includes(endStreams)) process.on('tunekit:drain', endStreams);
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    // nginx would buffer the stream (proxy_buffering on): pass each event at once.
    'x-accel-buffering': 'no',
  });
  res.write(`retry: ${TICK_MS}\n\n`);
  const tick = () => res.write(`event: tick\ndata: ${JSON.stringify({ worker: workerId(), pid: process.pid })}\n\n`);
  tick();
  const timer = setInterval(tick, TICK_MS);
  streams.add(res);
  res.once('close', () => {
    clearInterval(timer);
    streams.delete(res);
  });
}

// Records shaped like an API listing: repetitive keys, varied values.
function records(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push({ id: i + 1, name: `item ${i + 1}`, price: ((i * 7919) % 10000) / 100, tags: ['kit', i % 2 ? 'odd' : 'even'], active: i % 3 !== 0 });
  }
  return out;
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

module.exports = handler;
