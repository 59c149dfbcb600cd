#!/usr/bin/env node
'use strict';
// How many proxied requests one nginx worker holds at once for a given
// worker_connections: the figures behind tune's load rule (tune.js heldRequests,
// docs/tuning.md "What it varies"). For each value, a local stack with one nginx
// worker, an upstream pool of 1 and the example app holding every request; then N
// requests at once, each on a connection of its own, N counted up from tune's own
// count until one is not answered 200. Loopback only; every stack is stopped.
//
//   node loadtest/held-requests.js 64,128,256,512

const http = require('node:http');
const fs = require('node:fs');
const { loadStack } = require('./targets');
const { heldRequests } = require('./tune');

/**
 * n requests at once, each on a connection of its own, held `delayMs` by the example
 * app: the answers' status codes (and client errors by code), and whether every
 * connection was open before the first answer came, so they were all in flight together.
 */
async function atOnce(url, n, delayMs) {
  const agent = new http.Agent({ keepAlive: false, maxSockets: n });
  const codes = {};
  let lastConnect = 0;
  let firstAnswer = Infinity;
  const count = (k) => { codes[k] = (codes[k] || 0) + 1; };
  await Promise.all(Array.from({ length: n }, () => new Promise((resolve) => {
    const req = http.get(`${url}?delay_ms=${delayMs}`, { agent }, (res) => {
      firstAnswer = Math.min(firstAnswer, Date.now());
      res.resume();
      res.on('end', () => { count(res.statusCode); resolve(); });
    });
    req.on('socket', (sock) => sock.once('connect', () => { lastConnect = Math.max(lastConnect, Date.now()); }));
    req.on('error', (err) => { firstAnswer = Math.min(firstAnswer, Date.now()); count(err.code); resolve(); });
  })));
  agent.destroy();
  return { codes, together: lastConnect <= firstAnswer };
}

/** atOnce, again with a longer hold until every connection was open before any answer (at most 4 tries). */
async function allInFlight(url, n) {
  for (let delayMs = 2000; delayMs <= 16000; delayMs *= 2) {
    const r = await atOnce(url, n, delayMs);
    if (r.together) return r;
  }
  throw new Error(`${n} connections were never all open before the first answer, even with the app holding each 16 s`);
}

/** A stack with one nginx worker and `wc` worker_connections (the caller stops it). */
function oneWorker(wc) {
  return loadStack().startStack({ upstream: 'uds', workers: 2, port: 0, set: ['tunekit_nginx_worker_processes=1',
    `tunekit_nginx_worker_connections=${wc}`, 'tunekit_nginx_upstream_keepalive=1'] });
}

/** The most requests one worker with `wc` answered at once, and the error log's word on the next. */
async function held(wc) {
  const stack = await oneWorker(wc);
  try {
    let n = heldRequests(wc);
    for (;; n++) {
      const r = await allInFlight(stack.url, n + 1);
      if ((r.codes[200] || 0) < n + 1) break;
    }
    const warned = /worker_connections are not enough/.test(fs.readFileSync(stack.errorLogPath, 'utf8'));
    return { wc, held: n, warned };
  } finally {
    await stack.stop();
  }
}

async function main(argv) {
  const list = (argv[0] || '64,128,256,512').split(',').map(Number);
  if (argv[0] === '-h' || argv[0] === '--help' || list.some((w) => !Number.isInteger(w) || w < 32)) {
    console.log('usage: node loadtest/held-requests.js [W,W,...]   (worker_connections values, each 32 or more; default 64,128,256,512)');
    return argv[0] === '-h' || argv[0] === '--help' ? 0 : 2;
  }
  for (const wc of list) {
    const r = await held(wc);
    console.log(`worker_connections ${wc}: ${r.held} requests at once; one more was not answered` +
      `${r.warned ? ' (error log: "worker_connections are not enough")' : ''}; tune counts ${heldRequests(wc)}`);
  }
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(`held-requests: ${err.message.split('\n')[0]}`);
    process.exit(2);
  });
}

module.exports = { atOnce, allInFlight, oneWorker, held };
