'use strict';
// An I/O-waiting handler: each request waits WAIT_MS (a database or an upstream API
// call, here a timer) and then answers, using almost no CPU. Throughput is bound by
// how many requests wait at once, not by cores: more workers or connections change
// little, and the upstream pool and worker_connections matter where many wait.
// `tunekit tune --app examples/io-wait.js` shows what this host makes of it.
//   any path → {"ok":true,"worker":<id>,"pid":<pid>} after WAIT_MS

const cluster = require('node:cluster');

const WAIT_MS = Number(process.env.IO_WAIT_MS) || 20;

module.exports = (req, res) => {
  setTimeout(() => {
    const body = JSON.stringify({ ok: true, worker: cluster.worker ? cluster.worker.id : 0, pid: process.pid });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }, WAIT_MS);
};
