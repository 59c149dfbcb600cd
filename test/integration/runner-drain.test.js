'use strict';
// Long-lived connections follow the runner's drain: on SIGTERM the app is told
// (process event tunekit:drain) and ends what only it can end. An open WebSocket
// gets a close frame with 1001 instead of a cut (1006); an endless SSE stream ends
// cleanly, and the worker exits before its drain timeout instead of holding the
// stop for all of it. A rolling restart (SIGHUP) drains the old workers the same way.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const WebSocket = require('ws');
const h = require('../fixtures/runner/harness');

const group = h.someGroup();
const DRAIN_TIMEOUT_S = 10;

function args(sock, extra = []) {
  return ['--listen', `unix:${sock}`, '--workers', '1', '--socket-group', group.name, '--drain-timeout', String(DRAIN_TIMEOUT_S), ...extra];
}

/** A runner on a socket in a temp dir, serving `module` ('' for the example app), once ready. */
async function startApp(t, module, env = {}) {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  const r = h.start(t, { args: [...(module ? [module] : []), ...args(sock)], env });
  await r.ready();
  return { r, sock };
}

/** Exit 0, and no connection was left for the worker's drain timeout to cut. */
async function stoppedBeforeDrainTimeout(r) {
  assert.deepEqual(await r.exited, { code: 0, signal: null });
  assert.equal(r.events.find((e) => e.event === 'worker-drain-timeout'), undefined, 'the worker exited before its drain timeout');
}

/** An open WebSocket to the runner's socket, once its first message (kept as .hello) arrived. */
async function openSocket(t, sock) {
  const ws = new WebSocket(`ws+unix://${sock}:/`);
  t.after(() => ws.terminate());
  const hello = await new Promise((resolve, reject) => {
    ws.once('message', (data) => resolve(JSON.parse(data)));
    ws.once('error', reject);
  });
  assert.ok(hello.hello > 0, 'the connection is open and served');
  ws.hello = hello;
  return ws;
}

/** Send the runner `signal`; resolves with the WebSocket's close code and reason. */
function closeOn(r, ws, signal) {
  const closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
  r.signal(signal);
  return closed;
}

test('SIGTERM with an open WebSocket: the client gets close code 1001, the worker exits without waiting out its drain', async (t) => {
  const { r, sock } = await startApp(t, path.join(h.ROOT, 'examples/websocket.js'));
  const ws = await openSocket(t, sock);
  assert.deepEqual(await closeOn(r, ws, 'SIGTERM'), { code: 1001, reason: 'server restarting' });
  await stoppedBeforeDrainTimeout(r);
});

test('SIGTERM with an open SSE stream: the app saw the drain, the stream ends cleanly before the drain timeout', async (t) => {
  const { r, sock } = await startApp(t, ''); // the example app: GET /events
  let body = '';
  const res = await new Promise((resolve, reject) => {
    const req = http.get({ socketPath: sock, path: '/events', agent: false }, resolve);
    req.on('error', reject);
    t.after(() => req.destroy());
  });
  assert.equal(res.headers['content-type'], 'text/event-stream');
  res.setEncoding('utf8');
  const ended = new Promise((resolve, reject) => {
    res.on('end', () => resolve('end'));
    res.on('aborted', () => reject(new Error(`the stream was aborted; got: ${body}`)));
    res.on('error', reject);
  });
  await new Promise((resolve) => {
    res.on('data', (chunk) => {
      body += chunk;
      if (body.includes('event: tick')) resolve();
    });
  });
  const signalled = Date.now();
  r.signal('SIGTERM');
  assert.equal(await ended, 'end', 'the response ended with its last chunk, not a reset');
  const tookMs = Date.now() - signalled;
  assert.match(body, /event: drain\n/, 'the app saw tunekit:drain and said so on the stream');
  assert.ok(tookMs < DRAIN_TIMEOUT_S * 1000, `the stream ended ${tookMs} ms after SIGTERM, within the ${DRAIN_TIMEOUT_S} s drain timeout`);
  await stoppedBeforeDrainTimeout(r);
});

// nginx keeps its upstream connections open and reuses the one it pooled last. A
// worker that closes a connection nginx may reuse races nginx's next request on it
// (RFC 9112, section 9.3.1), and nginx answers a POST that loses the race 502.
test('SIGTERM during a keep-alive request not answered yet: the answer says Connection: close, so the client does not reuse the connection the worker closes', async (t) => {
  const { r, sock } = await startApp(t, '');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const inflight = h.inFlight(sock, '/?delay_ms=3000', { agent });
  await inflight.read;
  r.signal('SIGTERM');
  const res = await inflight.answer;
  assert.equal(res.status, 200);
  assert.equal(res.headers.connection, 'close', 'an answer begun after the drain started tells the client not to reuse the connection');
  await stoppedBeforeDrainTimeout(r);
});

test('SIGTERM during a keep-alive SSE stream: the app ends it, and the request the client sends next on that connection is answered (Connection: close), not cut', async (t) => {
  const { r, sock } = await startApp(t, '');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const get = (urlPath) => new Promise((resolve, reject) => {
    const req = http.get({ socketPath: sock, path: urlPath, agent, timeout: 15000 }, (res) => resolve({ req, res }));
    req.on('timeout', () => req.destroy(new Error(`${urlPath} timed out`)));
    req.on('error', reject);
  });
  const { res: stream } = await get('/events');
  assert.equal(stream.headers.connection, 'keep-alive', 'the stream began before the drain, as keep-alive');
  stream.setEncoding('utf8');
  let body = '';
  await new Promise((resolve) => stream.on('data', (chunk) => {
    body += chunk;
    if (body.includes('event: tick')) resolve();
  }));
  r.signal('SIGTERM');
  // The stream's end is when a client pools the connection again and may send on it at once.
  await new Promise((resolve) => stream.once('end', resolve));
  const next = await get('/').catch((err) => assert.fail(`the next request on the pooled connection failed: ${err.code || err.message}`));
  assert.equal(next.req.reusedSocket, true, 'it went on the stream\'s connection');
  assert.equal(next.res.statusCode, 200);
  assert.equal(next.res.headers.connection, 'close');
  next.res.resume();
  await stoppedBeforeDrainTimeout(r);
});

test('SIGTERM with an open WebSocket the app does not close: it goes with the idle connections, the drain is not held', async (t) => {
  const { r, sock } = await startApp(t, path.join(h.FIXTURES, 'ws-app.js'));
  const ws = await openSocket(t, sock);
  assert.equal((await closeOn(r, ws, 'SIGTERM')).code, 1006, 'no close frame: the app was not listening for tunekit:drain');
  await stoppedBeforeDrainTimeout(r);
});

test('an app that closes its WebSockets a while after the drain starts: the drain leaves them to it, the client gets 1001', async (t) => {
  // 1 s: past the drain's idle grace (at most 500 ms), when idle keep-alive
  // connections are closed; an upgraded one must not be among them.
  const { r, sock } = await startApp(t, path.join(h.FIXTURES, 'ws-app.js'), { WS_CLOSE_AFTER_MS: '1000' });
  const ws = await openSocket(t, sock);
  assert.deepEqual(await closeOn(r, ws, 'SIGTERM'), { code: 1001, reason: 'closed after a flush' });
  await stoppedBeforeDrainTimeout(r);
});

test('SIGHUP (rolling restart) with an open WebSocket: the old worker closes it with 1001, the new one takes the next', async (t) => {
  const { r, sock } = await startApp(t, path.join(h.ROOT, 'examples/websocket.js'));
  const ws = await openSocket(t, sock);
  assert.equal((await closeOn(r, ws, 'SIGHUP')).code, 1001);
  const done = await r.waitFor('reload-done');
  const again = await openSocket(t, sock);
  assert.deepEqual([again.hello.hello], done.workers, 'the client reconnects to the worker that replaced the old one');
});
