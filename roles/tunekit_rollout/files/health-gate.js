'use strict';
// tunekit's health gate, run on a freshly deployed host by roles/tunekit_rollout
// (ansible.builtin.script with the host's Node): asks URL until COUNT answers in a
// row are 2xx (and, when RELEASE is given, carry X-Tunekit-Release: RELEASE), or
// TIMEOUT seconds pass. Each probe is a new connection. Prints one JSON line:
//   {"ok":true|false,"streak":N,"best":N,"probes":N,"seconds":S,"last":{status,release,error,body}}
// and exits 0 either way: the role turns a failure into a message.
//   node health-gate.js '{"url":"http://127.0.0.1:80/healthz","host":"localhost","count":5,"timeout":60,"release":"abc"}'

const http = require('node:http');
const https = require('node:https');

const opts = JSON.parse(process.argv[2]);
const url = new URL(opts.url);
const client = url.protocol === 'https:' ? https : http;
const PAUSE_MS = 200;

function probe(timeoutMs) {
  return new Promise((done) => {
    const req = client.get(url, {
      agent: false,
      headers: { host: opts.host || url.host, 'user-agent': 'tunekit-health-gate' },
      timeout: timeoutMs,
      rejectUnauthorized: false, // the gate checks the app, not the certificate
      servername: opts.host && !/^[0-9.:[\]]+$/.test(opts.host) ? opts.host : undefined,
    }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { if (body.length < 300) body += d; });
      res.on('end', () => done({ status: res.statusCode, release: res.headers['x-tunekit-release'] || null, body: body.slice(0, 300) }));
      res.on('error', (err) => done({ status: null, error: err.message }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => done({ status: null, error: err.code ? `${err.code}: ${err.message}` : err.message }));
  });
}

function good(r) {
  return r.status >= 200 && r.status < 300 && (!opts.release || r.release === opts.release);
}

async function main() {
  const started = Date.now();
  const deadline = started + opts.timeout * 1000;
  let streak = 0;
  let best = 0;
  let probes = 0;
  let last = null;
  let lastBad = null;
  while (Date.now() < deadline) {
    last = await probe(Math.max(100, Math.min(5000, deadline - Date.now())));
    probes += 1;
    if (good(last)) {
      streak += 1;
      best = Math.max(best, streak);
      if (streak >= opts.count) break;
    } else {
      streak = 0;
      lastBad = last;
    }
    await new Promise((r) => setTimeout(r, PAUSE_MS));
  }
  const ok = streak >= opts.count;
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  process.stdout.write(`${JSON.stringify({ ok, streak, best, probes, seconds, last: ok ? last : (lastBad || last) })}\n`);
}

main();
