'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const { RULES_FILE } = require('../../lib/config/rules');

test('defaults resolve with derived cross-layer values', () => {
  const v = config.resolve();
  assert.equal(v.tunekit_app_keepalive_timeout_ms,
    (v.tunekit_nginx_upstream_keepalive_timeout_s + v.tunekit_app_keepalive_margin_s) * 1000);
  assert.ok(v.tunekit_app_headers_timeout_ms > v.tunekit_app_keepalive_timeout_ms);
  assert.ok(v.tunekit_app_request_timeout_ms >= v.tunekit_app_headers_timeout_ms);
  assert.equal(v.tunekit_app_backlog, v.tunekit_listen_backlog);
  assert.equal(v.tunekit_sysctl_net_core_somaxconn, v.tunekit_listen_backlog);
  assert.ok(v.tunekit_nginx_worker_rlimit_nofile >= 2 * v.tunekit_nginx_worker_connections);
  assert.equal(v.tunekit_socket_path, `/run/${v.tunekit_app_name}/app.sock`);
});

test('a derived value follows its overridden input', () => {
  const v = config.resolve({ set: ['tunekit_nginx_upstream_keepalive_timeout_s=30'] });
  assert.equal(v.tunekit_app_keepalive_timeout_ms, 35000);
  const w = config.resolve({ set: ['tunekit_nginx_worker_connections=10000'] });
  assert.equal(w.tunekit_nginx_worker_rlimit_nofile, 20000);
});

test('keepAliveTimeout not above nginx upstream keepalive_timeout is refused, naming both', () => {
  assert.throws(
    () => config.resolve({ set: ['tunekit_app_keepalive_timeout_ms=60000'] }),
    (err) => err.name === 'ConfigError' &&
      /tunekit_app_keepalive_timeout_ms=60000/.test(err.message) &&
      /tunekit_nginx_upstream_keepalive_timeout_s=60/.test(err.message),
  );
});

test('rlimit below 2 x worker_connections is refused, naming both', () => {
  assert.throws(
    () => config.resolve({ set: ['tunekit_nginx_worker_rlimit_nofile=1000', 'tunekit_nginx_worker_connections=4096'] }),
    /tunekit_nginx_worker_rlimit_nofile=1000 must be at least 2 x tunekit_nginx_worker_connections=4096/,
  );
});

test('backlog above somaxconn is refused, naming both', () => {
  assert.throws(
    () => config.resolve({ set: ['tunekit_listen_backlog=8192', 'tunekit_sysctl_net_core_somaxconn=4096'] }),
    /tunekit_listen_backlog=8192 must not exceed tunekit_sysctl_net_core_somaxconn=4096/,
  );
});

test('an unknown variable is refused with the closest known name', () => {
  assert.throws(
    () => config.resolve({ set: ['tunekit_nginx_worker_conections=10'] }),
    /unknown variable tunekit_nginx_worker_conections .*did you mean tunekit_nginx_worker_connections\?/,
  );
});

test('a socket path over the sun_path limit is refused with its length', () => {
  const dir = `/${'d'.repeat(110)}`;
  assert.throws(
    () => config.resolve({ set: [`tunekit_socket_dir=${dir}`] }),
    /is 120 bytes; the limit \(sun_path\) is 107/,
  );
});

test('vars files apply in order and --set wins over them', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-cfg-'));
  try {
    const a = path.join(tmp, 'a.yml');
    const b = path.join(tmp, 'b.yml');
    fs.writeFileSync(a, 'tunekit_app_workers: 3\ntunekit_nginx_listen_port: 8080\n');
    fs.writeFileSync(b, 'tunekit_app_workers: 4\n');
    const v = config.resolve({ varsFiles: [a, b], set: ['tunekit_nginx_listen_port=9090'] });
    assert.equal(v.tunekit_app_workers, 4);
    assert.equal(v.tunekit_nginx_listen_port, 9090);
    fs.writeFileSync(a, '- not\n- a mapping\n');
    assert.throws(() => config.resolve({ varsFiles: [a] }), /must be a YAML mapping/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('app settings carry the derived timeouts the runner applies', () => {
  const v = config.resolve({ set: ['tunekit_upstream_kind=tcp', 'tunekit_app_tcp_port=4100'] });
  const s = config.appSettings(v);
  assert.equal(s.listen, 'tcp:127.0.0.1:4100');
  assert.equal(s.keepAliveTimeoutMs, v.tunekit_app_keepalive_timeout_ms);
  assert.equal(s.headersTimeoutMs, v.tunekit_app_headers_timeout_ms);
  assert.equal(s.backlog, v.tunekit_listen_backlog);
  assert.equal(s.socketMode, '0660');
});

test('--set keeps the text of a string tunable and types a numeric one', () => {
  const v = config.resolve({ set: ['tunekit_nginx_proxy_http_version=1.1', 'tunekit_nginx_worker_connections=2048', 'tunekit_socket_mode=0660'] });
  assert.equal(v.tunekit_nginx_proxy_http_version, '1.1');
  assert.equal(v.tunekit_nginx_worker_connections, 2048);
  assert.equal(v.tunekit_socket_mode, '0660');
  const q = config.resolve({ set: ['tunekit_nginx_proxy_http_version="1.1"'] });
  assert.equal(q.tunekit_nginx_proxy_http_version, '1.1', 'YAML quotes are stripped');
});

test('an enum is checked once, from its Type line (the cross-layer rules list no values of their own)', () => {
  const checks = fs.readFileSync(path.join(__dirname, '../..', RULES_FILE), 'utf8');
  for (const key of ['tunekit_upstream_kind', 'tunekit_profile', 'tunekit_nginx_host_mode', 'tunekit_nginx_access_log', 'tunekit_nginx_reuseport']) {
    assert.doesNotMatch(checks, new RegExp(`${key} not in`), `${key}'s values are listed in ${RULES_FILE}`);
  }
  assert.deepEqual(config.choices('tunekit_upstream_kind'), ['uds', 'tcp', 'per-worker']);
  assert.throws(() => config.resolve({ set: ['tunekit_upstream_kind=udp'] }),
    { message: 'tunekit_upstream_kind=udp (from --set tunekit_upstream_kind=udp) is not enum uds | tcp | per-worker: expected one of uds, tcp, per-worker' });
});

test('the key-exchange groups follow the OpenSSL nginx runs with: X25519MLKEM768 first from 3.5, X25519 first before or when unknown', () => {
  const { opensslOf } = require('../../lib/nginx');
  // `nginx -V`: the running library wins over the one nginx was built with.
  assert.equal(opensslOf('nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.22 25 Aug 2026 (running with OpenSSL 3.0.19 27 Jan 2026)\n'), '3.0.19');
  assert.equal(opensslOf('nginx version: nginx/1.18.0\nbuilt with OpenSSL 1.1.1w  11 Sep 2023\n'), '1.1.1');
  assert.equal(opensslOf('nginx version: nginx/1.26.3\nbuilt without OpenSSL\n'), null);
  const groups = (set) => config.resolve({ set }).tunekit_nginx_tls_ecdh_curve;
  const since = config.loadDefaults().tunekit_openssl_versions.features.mlkem_hybrid.since;
  assert.equal(groups([`tunekit_nginx_openssl_version=${since}`]), 'X25519MLKEM768:X25519:prime256v1:secp384r1');
  assert.equal(groups(['tunekit_nginx_openssl_version=3.6.5']), 'X25519MLKEM768:X25519:prime256v1:secp384r1');
  assert.equal(groups(['tunekit_nginx_openssl_version=3.4.9']), 'X25519:prime256v1:secp384r1');
  // Rendering for another host's nginx version: its OpenSSL is not the local one.
  const other = config.resolve({ set: ['tunekit_nginx_version=1.26.3'] });
  assert.equal(other.tunekit_nginx_openssl_version, '');
  assert.equal(other.tunekit_nginx_tls_ecdh_curve, 'X25519:prime256v1:secp384r1');
  // A list of one's own wins.
  assert.equal(groups(['tunekit_nginx_openssl_version=3.5.9', 'tunekit_nginx_tls_ecdh_curve=X25519']), 'X25519');
});
