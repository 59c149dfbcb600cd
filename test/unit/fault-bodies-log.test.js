'use strict';
// test/faults/bodies.js errorLines: what the restart tests count as nginx saying
// something about a restart. A GET nginx sent on a pooled connection as a draining
// worker closed it is sent again (the client gets its answer): counted apart. The
// same close under a POST is not retried by nginx: it stays a line that fails them.

const test = require('node:test');
const assert = require('node:assert/strict');
const { errorLines } = require('../faults/bodies');

const closed = (method) => `2026/12/05 19:38:55 [error] 23469#23469: *8 upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: _, request: "${method} /?id=5-731 HTTP/1.1", upstream: "http://unix:/run/tunekit-app/app.sock:/?id=5-731", host: "127.0.0.1:31827"`;

test("errorLines: a retried GET's closed connection apart, a POST's and any other line kept, body buffering counted", () => {
  const text = [
    closed('GET'),
    closed('POST'),
    '2026/12/05 19:38:56 [warn] 23469#23469: *9 a client request body is buffered to a temporary file /var/lib/nginx/body/0000000001',
    '2026/12/05 19:38:57 [error] 23469#23469: *10 connect() to unix:/run/tunekit-app/app.sock failed (111: Connection refused) while connecting to upstream',
    '',
  ].join('\n');
  const r = errorLines(text);
  assert.equal(r.buffered, 1);
  assert.equal(r.retriedGets, 1);
  assert.deepEqual(r.other, [closed('POST'), text.split('\n')[3]]);
  assert.deepEqual(errorLines(''), { buffered: 0, retriedGets: 0, other: [] });
});
