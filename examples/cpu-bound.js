'use strict';
// A CPU-bound handler: each request computes before it answers (a SHA-256 chain of
// ROUNDS digests, about a millisecond of one core here), as a template render or a
// JSON transform of a large document would. More app workers help only while cores
// are free: with nginx on the same cores, past one worker per core they compete.
// `tunekit tune --app examples/cpu-bound.js` finds where that is on this host.
//   any path → {"ok":true,"worker":<id>,"pid":<pid>,"digest":"<hex>"}

const crypto = require('node:crypto');
const cluster = require('node:cluster');

const ROUNDS = Number(process.env.CPU_BOUND_ROUNDS) || 200;

module.exports = (req, res) => {
  let digest = Buffer.from(req.url);
  for (let i = 0; i < ROUNDS; i++) digest = crypto.createHash('sha256').update(digest).digest();
  const body = JSON.stringify({ ok: true, worker: cluster.worker ? cluster.worker.id : 0, pid: process.pid, digest: digest.toString('hex') });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};
