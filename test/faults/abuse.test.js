'use strict';
// Abuse through the front: malformed and oversized requests, sent on raw sockets
// to nginx, are answered (or cut) by nginx before the app sees a byte of them.
// Each case gets nginx's status as nginx 1.22 really sends it (found by
// experiment, asserted here), its connection is closed by nginx within a bound,
// the app (the hash app, which writes down every request it sees) sees none of
// them, and the front still serves a normal request afterwards.
//
// The limits are the kit's rendered values (large_client_header_buffers,
// client_max_body_size); client_header_timeout is set to 2 s for this stack so the
// slowloris case is quick, and nginx's error log to info (the kit's level is warn)
// so the test records what nginx says about each case and at which level.
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { startHashStack, doctor, errorLog } = require('./stack');
const { record } = require('./report');
const config = require('../../lib/config');

const HEADER_TIMEOUT_S = 2;
const CLOSE_BOUND_MS = 30_000; // generous: nginx's own bounds are 2 s (header timeout) and 5 s (lingering_timeout)
const SLOW_GAP_MS = 500; // slowloris: one byte of the header every 500 ms

const UNITS = { k: 1024, m: 1024 * 1024, g: 1024 * 1024 * 1024 };
/** An nginx size ("8k", "1m", "512") in bytes. */
function bytes(text) {
  const m = /^(\d+)([kmg]?)$/i.exec(String(text).trim());
  if (!m) throw new Error(`${text} is not an nginx size such as 512, 8k or 1m`);
  return Number(m[1]) * (m[2] ? UNITS[m[2].toLowerCase()] : 1);
}

/**
 * Write chunks to nginx (gapMs between them) and read until nginx closes.
 * Resolves {status line, title of nginx's page, closed: whether nginx closed within CLOSE_BOUND_MS, ms}.
 */
function raw(port, chunks, gapMs = 0) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const started = Date.now();
    let data = '';
    let closedByPeer = false;
    const bound = setTimeout(() => socket.destroy(), CLOSE_BOUND_MS);
    socket.setEncoding('latin1');
    socket.on('data', (d) => { data += d; });
    socket.on('end', () => { closedByPeer = true; });
    socket.on('error', (err) => { if (err.code === 'ECONNRESET' || err.code === 'EPIPE') closedByPeer = true; });
    socket.on('close', () => {
      clearTimeout(bound);
      const title = /<title>(.*?)<\/title>/.exec(data);
      resolve({ status: data ? data.split('\r\n')[0] : '', title: title ? title[1] : null, closed: closedByPeer, ms: Date.now() - started });
    });
    (async () => {
      for (const c of chunks) {
        if (socket.destroyed || closedByPeer) return;
        socket.write(c);
        if (gapMs) await new Promise((res) => setTimeout(res, gapMs));
      }
    })();
  });
}

function cases(vars) {
  const [count, size] = vars.tunekit_nginx_large_client_header_buffers.split(/\s+/);
  const buffer = bytes(size);
  const maxBody = bytes(vars.tunekit_nginx_client_max_body_size);
  const host = 'Host: abuse\r\n';
  const chunk = 64 * 1024;
  return [
    { name: 'request line over a large_client_header_buffers buffer', path: '/long', expect: 414,
      chunks: [`GET /long?${'a'.repeat(buffer)} HTTP/1.1\r\n${host}\r\n`] },
    { name: 'one header over a large_client_header_buffers buffer', path: '/header', expect: 400,
      chunks: [`GET /header HTTP/1.1\r\n${host}X-Big: ${'b'.repeat(buffer)}\r\n\r\n`] },
    { name: 'headers over all large_client_header_buffers buffers', path: '/headers', expect: 400,
      chunks: [`GET /headers HTTP/1.1\r\n${host}${Array.from({ length: Number(count) + 1 }, (_, i) => `X-H${i}: ${'c'.repeat(buffer - 64)}\r\n`).join('')}\r\n`] },
    { name: 'Transfer-Encoding and Content-Length together', path: '/te-cl', expect: 400,
      chunks: [`POST /te-cl HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n`] },
    { name: 'duplicate Content-Length', path: '/dup-cl', expect: 400,
      chunks: [`POST /dup-cl HTTP/1.1\r\n${host}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`] },
    { name: 'bad chunk size', path: '/bad-chunk', expect: 400,
      chunks: [`POST /bad-chunk HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`] },
    { name: 'Content-Length over client_max_body_size', path: '/big-cl', expect: 413,
      chunks: [`POST /big-cl HTTP/1.1\r\n${host}Content-Length: ${maxBody + 1}\r\n\r\n`] },
    { name: 'chunked body over client_max_body_size', path: '/big-chunked', expect: 413,
      chunks: [`POST /big-chunked HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\n`,
        ...Array.from({ length: Math.ceil(maxBody / chunk) + 1 }, () => `${chunk.toString(16)}\r\n${'d'.repeat(chunk)}\r\n`), '0\r\n\r\n'] },
    { name: `slowloris: one header byte every ${SLOW_GAP_MS} ms, past client_header_timeout`, path: '/slow', expect: null, gapMs: SLOW_GAP_MS,
      chunks: ['GET /slow HTTP/1.1\r\n', ...`${host}X-Slow: ${'s'.repeat(4 * HEADER_TIMEOUT_S * 1000 / SLOW_GAP_MS)}\r\n\r\n`] },
  ];
}

test('abuse through the front: nginx answers or cuts each malformed request, the app sees none, the front serves on', { timeout: 120_000 }, async (t) => {
  const stack = await startHashStack(t, { workers: 1, set: [`tunekit_nginx_client_header_timeout_s=${HEADER_TIMEOUT_S}`, 'tunekit_nginx_error_log_level=info'] });
  const before = stack.seen().length; // startStack's own readiness requests
  const all = cases(stack.vars);
  // All at once: the slowest (lingering after a 413, the header timeout) bound the time.
  const results = await Promise.all(all.map((c) => raw(stack.port, c.chunks, c.gapMs)));
  const seenByApp = stack.seen().slice(before);
  const normal = await fetch(`${stack.url}normal`);
  await normal.arrayBuffer();
  const afterNormal = stack.seen().slice(before);
  const logged = errorLog(stack).filter((l) => !/a client request body is buffered to a temporary file/.test(l));
  const fails = doctor(stack).filter((f) => f.level === 'fail').map((f) => f.id);

  const figures = all.map((c, i) => {
    const r = results[i];
    const line = logged.find((l) => l.includes(` ${c.path} `) || l.includes(` ${c.path}?`));
    const f = {
      name: c.name,
      status: r.status ? Number(r.status.split(' ')[1]) : null,
      title: r.title,
      closedMs: r.ms,
      // "[level] message", the padding of the oversized cases shortened.
      nginx: line ? line.replace(/^.*?\[(\w+)\] \d+#\d+: \*\d+ /, '[$1] ').replace(/, client:.*$/, '').replace(/(\w)\1{8,}/g, '$1$1$1') : null,
    };
    t.diagnostic(`${c.name}: ${r.status || 'no answer'} (${r.title}), closed by nginx ${r.closed} after ${r.ms} ms; nginx: ${f.nginx}`);
    return f;
  });
  for (const [i, c] of all.entries()) {
    assert.equal(figures[i].status, c.expect, `${c.name}: nginx answers ${c.expect ?? 'nothing'}`);
    assert.ok(figures[i].nginx, `${c.name}: nginx logged it (at info or above)`);
    assert.ok(results[i].closed, `${c.name}: nginx closed the connection within ${CLOSE_BOUND_MS} ms`);
  }
  assert.deepEqual(seenByApp, [], 'the app saw none of the malformed requests');
  assert.equal(normal.status, 200, 'the front serves a normal request afterwards');
  assert.deepEqual(afterNormal.map((s) => s.url), ['/normal'], 'and that one reaches the app');
  t.diagnostic(`doctor fails: ${JSON.stringify(fails)}`);

  record('abuse', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/abuse.test.js',
    largeClientHeaderBuffers: stack.vars.tunekit_nginx_large_client_header_buffers,
    clientMaxBodySize: stack.vars.tunekit_nginx_client_max_body_size,
    clientHeaderTimeoutS: HEADER_TIMEOUT_S,
    kitClientHeaderTimeoutS: config.resolve().tunekit_nginx_client_header_timeout_s,
    errorLogLevel: stack.vars.tunekit_nginx_error_log_level,
    cases: figures,
    seenByApp: seenByApp.length,
    normalAfter: normal.status,
    doctorFails: fails,
  });
});
