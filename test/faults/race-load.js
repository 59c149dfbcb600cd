'use strict';
// The keep-alive race's load (test/faults/keepalive.test.js, and the same load
// through Debian's own nginx binaries in test/checks/keepalive-defaults.test.js):
// rounds of POSTs whose gaps straddle the moment the app closes its idle
// connections, while a CPU-bound request holds the app's only worker across it.
//
// On loopback nginx drops a pooled connection as soon as it sees the close, so
// the race window of an idle app is microseconds (a paced load alone hit it once
// in 96 POSTs here). It opens wide when the app is busy at that moment: the POSTs
// nginx writes meanwhile wait unread, and when the worker runs again its expired
// keep-alive timers close those connections with the requests unread (libuv runs
// timers before it reads), so nginx reads ECONNRESET, and a POST, which nginx
// does not pass to the next server, is answered 502.
const http = require('node:http');
const crypto = require('node:crypto');
const { sleep } = require('../lib/util');

const LANES = 8; // POSTs at once: one pooled upstream connection each
const BUSY_MS = 300; // the CPU-bound request, centred on the app's close time
const MAX_LOAD_MS = 60_000; // the bound of a load that runs until a POST is lost
// Where the POSTs go relative to the close time, per round (ms): they straddle it,
// all inside the busy request's block.
const AFTER = [-60, -20, 20, 60, 100];
// What nginx logs for a request it wrote on a connection the app closed.
const RACE_LOG = /upstream prematurely closed connection|recv\(\) failed \(104: Connection reset by peer\)|writev?\(\) failed \(32: Broken pipe\)/;

function send(agent, url, method, body) {
  return new Promise((resolve) => {
    const req = http.request(url, { agent, method, headers: body ? { 'content-length': body.length } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.setTimeout(30_000, () => req.destroy(new Error('client timeout 30 s')));
    req.on('error', (err) => resolve(err.code || err.message));
    req.end(body);
  });
}

/**
 * Rounds of: LANES POSTs at once (filling nginx's pool), then, after a gap that
 * ends just past the app's close time (closeAtMs after its last response), LANES
 * POSTs and LANES GETs at once, while a CPU-bound GET (`?busy_ms=`) holds the
 * app's worker across that close time. `rounds` of them; with `untilLost`, at
 * least that many and on until a POST was lost (502), or MAX_LOAD_MS: the event
 * the racing set is tested for, not a count, ends its load.
 * @returns {{post: {status, sent}, get: {status, sent}, rounds: number}}
 */
async function pacedLoad(url, { closeAtMs, rounds, untilLost = false }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 * LANES + 1 });
  const post = { status: {}, sent: 0 };
  const get = { status: {}, sent: 0 };
  const count = (c, s) => { c.sent += 1; c.status[s] = (c.status[s] || 0) + 1; };
  const started = Date.now();
  const more = (i) => i < rounds || (untilLost && !post.status[502] && Date.now() - started < MAX_LOAD_MS);
  let i = 0;
  for (; more(i); i++) {
    const body = () => crypto.randomBytes(1024);
    for (const s of await Promise.all(Array.from({ length: LANES }, () => send(agent, url, 'POST', body())))) count(post, s);
    await sleep(closeAtMs - BUSY_MS / 2);
    const busy = send(agent, `${url}?busy_ms=${BUSY_MS}`, 'GET');
    await sleep(BUSY_MS / 2 + AFTER[i % AFTER.length]);
    const [posts, gets] = await Promise.all([
      Promise.all(Array.from({ length: LANES }, () => send(agent, url, 'POST', body()))),
      Promise.all(Array.from({ length: LANES }, () => send(agent, url, 'GET'))),
    ]);
    for (const s of posts) count(post, s);
    for (const s of gets) count(get, s);
    count(get, await busy);
  }
  agent.destroy();
  return { post, get, rounds: i };
}

module.exports = { pacedLoad, LANES, BUSY_MS, RACE_LOG, AFTER };
