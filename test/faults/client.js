'use strict';
// Load clients for the fault suite: keep-alive HTTP/1.1 loops over node:http, each
// loop one request at a time, every outcome counted (none is thrown away).
//
// retry: 'reused' retries an idempotent request once when it failed with a reset
// on a reused keep-alive connection (req.reusedSocket), as the Node http docs
// advise and browsers do; retry: 'any' retries it once on any reset, also of a
// fresh connection. The retry goes on a new connection (another pooled one may be
// closing for the same reason). A POST is never retried.
const http = require('node:http');

/**
 * One request: {status, text} (the answer's body), or {err, reused: whether it went
 * on a reused keep-alive connection, answered: whether any byte of an answer came}.
 */
function once(agent, url, { method, body }) {
  return new Promise((resolve) => {
    let answered = false;
    const req = http.request(url, {
      agent,
      method,
      headers: body ? { 'content-type': 'application/octet-stream', 'content-length': body.length } : {},
    }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', (err) => resolve({ err, reused: req.reusedSocket, answered }));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('client timeout 30 s')));
    req.on('error', (err) => resolve({ err, reused: req.reusedSocket, answered }));
    req.end(body);
  });
}

function isReset(err) {
  return err.code === 'ECONNRESET' || err.code === 'EPIPE' || /socket hang up/.test(err.message);
}

/**
 * Run `connections` loops until `stop()` returns true; count outcomes.
 * @param {object} o
 * @param {string} o.url
 * @param {number} o.connections
 * @param {() => boolean} o.stop
 * @param {false|'reused'|'any'} [o.retry=false]  when to retry an idempotent request once after a reset
 * @param {(i: number) => {method: string, body?: Buffer}} [o.pick]  what the i-th request is
 * @param {(i: number) => number} [o.gapMs]  pause after the i-th request of a loop
 */
async function run({ url, connections, stop, retry = false, pick = () => ({ method: 'GET' }), gapMs = () => 0 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const counts = { requests: 0, ok: 0, non2xx: 0, status: {}, resets: 0, resetsOnReused: 0, retried: 0, failed: 0, errors: {} };
  const loop = async () => {
    for (let i = 0; !stop(); i++) {
      const what = pick(i);
      counts.requests += 1;
      let r = await once(agent, url, what);
      if (r.err && isReset(r.err)) {
        counts.resets += 1;
        if (r.reused) counts.resetsOnReused += 1;
        if (retry && (retry === 'any' || r.reused) && what.method !== 'POST') {
          counts.retried += 1;
          r = await once(false, url, what);
        }
      }
      if (r.err) {
        counts.failed += 1;
        const key = r.err.code || r.err.message;
        counts.errors[key] = (counts.errors[key] || 0) + 1;
      } else {
        counts.status[r.status] = (counts.status[r.status] || 0) + 1;
        if (r.status >= 200 && r.status < 300) counts.ok += 1;
        else { counts.non2xx += 1; counts.failed += 1; }
      }
      const gap = gapMs(i);
      if (gap > 0) await new Promise((res) => setTimeout(res, gap));
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  agent.destroy();
  return counts;
}

module.exports = { run, once, isReset };
