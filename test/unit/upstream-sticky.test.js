'use strict';
// tunekit_nginx_upstream_sticky: over the per-worker sockets nginx keeps each
// client on one worker (`hash KEY consistent` in place of least_conn); refused
// where there is no worker's socket to choose, and with a key that names no
// nginx variable. The behaviour behind nginx (socket.io with default transports,
// 10 of 10 clients) is test/integration/frameworks.test.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');

function upstreamConf(t, set) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-sticky-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  renderer.render(config.resolve({ set }), dir, { prefix: true, layers: ['nginx'] });
  return fs.readFileSync(path.join(dir, 'etc/nginx/tunekit/upstream.conf'), 'utf8');
}

const PER_WORKER = ['tunekit_upstream_kind=per-worker', 'tunekit_app_workers=3'];

test('sticky on per-worker sockets: a consistent hash of the key picks the socket, least_conn is gone', (t) => {
  const conf = upstreamConf(t, [...PER_WORKER, 'tunekit_nginx_upstream_sticky=true']);
  assert.match(conf, /^ {4}hash \$remote_addr consistent;$/m);
  assert.doesNotMatch(conf, /^\s*least_conn;/m);
  assert.equal(conf.match(/^ {4}server unix:\S+\.\d /gm).length, 3, 'one socket per worker');
  assert.ok(conf.indexOf('hash ') < conf.indexOf('keepalive '), 'the balancing method comes before keepalive');
  const key = upstreamConf(t, [...PER_WORKER, 'tunekit_nginx_upstream_sticky=true', 'tunekit_nginx_upstream_sticky_key=$http_x_forwarded_for']);
  assert.match(key, /^ {4}hash \$http_x_forwarded_for consistent;$/m);
});

test('sticky off (the default): per-worker sockets are balanced by least_conn, no hash', (t) => {
  const conf = upstreamConf(t, PER_WORKER);
  assert.match(conf, /^ {4}least_conn;$/m);
  assert.doesNotMatch(conf, /^\s*hash /m);
});

test('sticky without per-worker sockets is refused, naming both values and the fix', () => {
  for (const kind of ['uds', 'tcp']) {
    assert.throws(
      () => config.resolve({ set: [`tunekit_upstream_kind=${kind}`, 'tunekit_nginx_upstream_sticky=true'] }),
      new RegExp(`tunekit_nginx_upstream_sticky=true needs tunekit_upstream_kind=per-worker, not ${kind}: .*; set tunekit_upstream_kind=per-worker`),
    );
  }
});

test('a sticky key without an nginx variable is refused: every client would hash alike', () => {
  assert.throws(
    () => config.resolve({ set: [...PER_WORKER, 'tunekit_nginx_upstream_sticky=true', 'tunekit_nginx_upstream_sticky_key=client'] }),
    /tunekit_nginx_upstream_sticky_key="client" names no nginx variable/,
  );
});
