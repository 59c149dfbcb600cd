'use strict';
// Every recipe of docs/frameworks.md, run as written: the test takes each
// ```js recipe=NAME file=FILE block out of the page, writes it as FILE beside a
// link to the frameworks installed once outside the repo (test/lib/frameworks.js),
// and starts it under the runner (`tunekit run`, 2 workers) behind the kit's
// nginx (lib/stack.js). Per framework: both workers answer, a 90 kB POST arrives
// whole (the answer carries its sha256), the protocol works through nginx where
// there is one (WebSocket echo, socket.io messages, server-sent events streamed
// live), and SIGTERM stops the runner with exit 0 and its socket files gone.
//
// socket.io with its default transports (long-polling first) needs stickiness
// with 2 workers: with tunekit_nginx_upstream_sticky 10 of 10 clients connect and
// exchange messages; without it, on the same per-worker sockets, clients fail
// with "Session ID unknown".

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const WebSocket = require('ws');
const { startStack } = require('../../lib/stack');
const { ROOT } = require('../../lib/template');
const { until } = require('../lib/util');
const { ensureFrameworks, ensureNextBuild, recipes, recipeDir } = require('../lib/frameworks');

const DOC = path.join(ROOT, 'docs/frameworks.md');
const RECIPES = recipes(DOC);
const NAMES = ['express-cjs', 'express-esm', 'fastify', 'koa', 'hapi', 'nestjs', 'nextjs', 'ws', 'socketio', 'sse'];
const BODY = crypto.randomBytes(90 * 1024);
const BODY_SHA256 = crypto.createHash('sha256').update(BODY).digest('hex');
// Clients spread over loopback source addresses: the sticky hash reads the
// client's address, so one address would always reach one worker.
const source = (i) => `127.0.0.${10 + (i % 200)}`;

let frameworks = null;
test.before(async () => {
  frameworks = await ensureFrameworks();
}, { timeout: 600000 });

/** Start recipe NAME behind nginx; everything is removed after the test. */
async function serve(t, name, { copyFrom = null, ...stackOptions } = {}) {
  const { file, cleanup } = recipeDir(RECIPES[name], frameworks, { copyFrom });
  t.after(cleanup);
  const stack = await startStack({ workers: 2, module: file, ...stackOptions });
  t.after(() => stack.stop());
  return stack;
}

/** One request through nginx from a given loopback address; resolves { status, headers, body }. */
function request(url, { method = 'GET', body = null, localAddress = '127.0.0.1' } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, localAddress, timeout: 30000, headers: body ? { 'content-type': 'application/octet-stream' } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within 30 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * POST the 90 kB body, four at a time from changing addresses, until both
 * workers have answered: every answer must carry the body's length and sha256.
 */
async function bothWorkersTakeTheBody(stack, echoPath) {
  const workers = stack.ready.workers;
  assert.equal(workers.length, 2, 'the runner has 2 workers');
  const seen = new Set();
  let n = 0;
  await until('both workers to answer the POST', async () => {
    const answers = await Promise.all([0, 1, 2, 3].map(() => request(new URL(echoPath, stack.url), { method: 'POST', body: BODY, localAddress: source(n++) })));
    for (const a of answers) {
      assert.equal(a.status, 200, a.body);
      const j = JSON.parse(a.body);
      assert.equal(j.bytes, BODY.length, 'the whole body arrived');
      assert.equal(j.sha256, BODY_SHA256, 'the body arrived intact');
      seen.add(j.pid);
    }
    return seen.size === 2;
  }, 60000, 0);
  assert.deepEqual([...seen].sort(), [...workers].sort(), 'the answers came from the runner\'s two workers');
}

/** SIGTERM to the runner's primary: exit 0, every socket file it bound gone. */
async function stopsCleanly(stack) {
  assert.ok(stack.sockets.length >= 1);
  for (const s of stack.sockets) assert.ok(fs.existsSync(s), `${s} exists while serving`);
  process.kill(stack.pids().app[0], 'SIGTERM');
  assert.deepEqual(await stack.appExited, { code: 0, signal: null });
  for (const s of stack.sockets) assert.equal(fs.existsSync(s), false, `${s} removed on stop`);
}

test('docs/frameworks.md has one recipe per framework, each naming its file', () => {
  assert.deepEqual(Object.keys(RECIPES).sort(), [...NAMES].sort());
});

for (const name of ['express-cjs', 'express-esm', 'fastify', 'koa', 'hapi', 'nestjs']) {
  test(`${name}: both workers, a 90 kB POST whole, SIGTERM exits 0`, { timeout: 180000 }, async (t) => {
    const stack = await serve(t, name);
    const root = await request(stack.url);
    assert.equal(root.status, 200);
    assert.ok(stack.ready.workers.includes(JSON.parse(root.body).pid), root.body);
    await bothWorkersTakeTheBody(stack, '/echo');
    await stopsCleanly(stack);
  });
}

test('nextjs (custom server, built once): the page and an API route on both workers, SIGTERM exits 0', { timeout: 600000 }, async (t) => {
  const built = await ensureNextBuild();
  const stack = await serve(t, 'nextjs', { copyFrom: built, env: { NODE_ENV: 'production', NEXT_TELEMETRY_DISABLED: '1' } });
  const page = await request(stack.url);
  assert.equal(page.status, 200);
  const rendered = page.body.match(/<p>served by worker (\d+)<\/p>/);
  assert.ok(rendered, `the page was rendered on the server: ${page.body.slice(0, 300)}`);
  assert.ok(stack.ready.workers.includes(Number(rendered[1])), 'by one of the workers');
  await bothWorkersTakeTheBody(stack, '/api/echo');
  await stopsCleanly(stack);
});

test('ws: a WebSocket echoes text and a 90 kB binary message through nginx', { timeout: 180000 }, async (t) => {
  const stack = await serve(t, 'ws');
  await bothWorkersTakeTheBody(stack, '/echo');
  const ws = new WebSocket(stack.url.replace(/^http/, 'ws'));
  t.after(() => ws.terminate());
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const next = () => new Promise((resolve) => ws.once('message', (data, isBinary) => resolve({ data, isBinary })));
  let got = next();
  ws.send('hello');
  assert.deepEqual(await got, { data: Buffer.from('hello'), isBinary: false });
  got = next();
  ws.send(BODY);
  const bin = await got;
  assert.equal(bin.isBinary, true);
  assert.equal(crypto.createHash('sha256').update(bin.data).digest('hex'), BODY_SHA256);
  await new Promise((resolve) => { ws.once('close', resolve); ws.close(1000); });
  await stopsCleanly(stack);
});

test('sse: events arrive one by one while the stream stays open', { timeout: 180000 }, async (t) => {
  const stack = await serve(t, 'sse');
  await bothWorkersTakeTheBody(stack, '/echo');
  // The stream never ends by itself, so three events received are three events
  // nginx passed on while it was open, not a buffered whole response.
  const events = await new Promise((resolve, reject) => {
    const got = [];
    const req = http.get(new URL('/events', stack.url), { agent: false }, (res) => {
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'text/event-stream');
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const data = buf.slice(0, i).split('\n').find((l) => l.startsWith('data: '));
          buf = buf.slice(i + 2);
          got.push(JSON.parse(data.slice(6)));
          if (got.length === 3) {
            req.destroy();
            resolve(got);
          }
        }
      });
      res.on('end', () => reject(new Error(`the stream ended after ${got.length} events`)));
    });
    req.on('error', (err) => { if (got.length < 3) reject(err); });
  });
  assert.deepEqual(events.map((e) => e.id), [1, 2, 3]);
  assert.equal(new Set(events.map((e) => e.pid)).size, 1, 'one stream, one worker');
  await stopsCleanly(stack);
});

/**
 * One socket.io client with the default transports (polling first, then the
 * upgrade), from its own loopback address: connects, sends three messages and
 * waits for each acknowledgement. Resolves { ok: true, pids } or { ok: false, error }.
 */
function socketioClient(url, localAddress) {
  const { io } = require(path.join(frameworks, 'node_modules/socket.io-client'));
  const agent = new http.Agent({ keepAlive: true, localAddress });
  const socket = io(url, { agent, reconnection: false, timeout: 20000 });
  const finish = (r) => {
    socket.removeAllListeners();
    socket.close();
    agent.destroy();
    return r;
  };
  return new Promise((resolve) => {
    socket.once('connect_error', (err) => resolve(finish({ ok: false, error: err.message })));
    socket.once('disconnect', (reason) => resolve(finish({ ok: false, error: `disconnected: ${reason}` })));
    socket.once('connect', async () => {
      const pids = [];
      for (let i = 0; i < 3; i++) {
        const ack = await socket.timeout(20000).emitWithAck('echo', `m${i}`).catch((err) => ({ error: err.message }));
        if (ack.error || ack.message !== `m${i}`) return resolve(finish({ ok: false, error: ack.error || JSON.stringify(ack) }));
        pids.push(ack.pid);
      }
      resolve(finish({ ok: true, pids }));
    });
  });
}

test('socket.io, default transports, sticky on: 10 of 10 clients connect and exchange messages, each on one worker', { timeout: 180000 }, async (t) => {
  const stack = await serve(t, 'socketio', {
    upstream: 'per-worker',
    set: ['tunekit_nginx_upstream_sticky=true'],
  });
  await bothWorkersTakeTheBody(stack, '/echo');
  const workers = stack.ready.workers;
  const results = [];
  // Ten clients at once; then, only while they all hashed onto one worker (a
  // chance of about 1 in 500 with two sockets), one more at a time, so that both
  // workers are shown to hold sessions.
  results.push(...await Promise.all(Array.from({ length: 10 }, (_, i) => socketioClient(stack.url, source(i)))));
  while (new Set(results.flatMap((r) => r.pids || [])).size < 2 && results.length < 40) {
    results.push(await socketioClient(stack.url, source(results.length)));
  }
  assert.deepEqual(results.filter((r) => !r.ok), [], 'every client connected and got its acknowledgements');
  for (const r of results) assert.equal(new Set(r.pids).size, 1, `one client, one worker: ${r.pids}`);
  assert.deepEqual([...new Set(results.flatMap((r) => r.pids))].sort(), [...workers].sort(), 'clients on both workers');
  await stopsCleanly(stack);
});

test('socket.io, default transports, the same per-worker sockets without stickiness: clients fail with "Session ID unknown"', { timeout: 180000 }, async (t) => {
  // One nginx worker, so a single least_conn/round-robin state decides every
  // request: a client's polling requests then alternate between the two sockets,
  // whatever the speed of the machine, and reach a worker that never saw the
  // session. The right outcome is that not all ten succeed, and that the
  // failures are that 400.
  const stack = await serve(t, 'socketio', {
    upstream: 'per-worker',
    set: ['tunekit_nginx_worker_processes=1', 'tunekit_nginx_access_log=unbuffered'],
  });
  const results = [];
  for (let i = 0; i < 10; i++) results.push(await socketioClient(stack.url, source(i)));
  const failed = results.filter((r) => !r.ok);
  t.diagnostic(`without stickiness ${failed.length} of 10 clients failed: ${[...new Set(failed.map((r) => r.error))].join('; ')}`);
  assert.ok(failed.length > 0, `every client succeeded without stickiness: ${JSON.stringify(results)}`);
  await until('nginx to write its access log', () => fs.readFileSync(stack.accessLogPath, 'utf8').includes('/socket.io/'), 10000);
  const log = fs.readFileSync(stack.accessLogPath, 'utf8');
  assert.match(log, /"(GET|POST) \/socket\.io\/\?EIO=4&transport=polling&t=[^ ]*sid=[^ ]* HTTP\/1\.1" 400 /, 'a polling request of an open session was refused: Session ID unknown');
});
