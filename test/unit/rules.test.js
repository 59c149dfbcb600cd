'use strict';
// The cross-layer rules (roles/tunekit/vars/rules.yml) are one table:
// each rule, broken on its own, is refused by `tunekit render`'s resolve with the
// table's text, and — where a live host has the values — `tunekit doctor` names
// it with the same text. test/checks/ansible-rules.test.js holds the role
// to the same text.

const test = require('node:test');
const assert = require('node:assert/strict');
const config = require('../../lib/config');
const rules = require('../../lib/config/rules');
const doctor = require('../../lib/doctor');

const VERSION = { tunekit_nginx_version: '1.22.1' };

// One set per rule that breaks it alone. A new rule without a set here fails
// the first test: write the set that breaks it.
const BREAK = {
  'nginx-version-floor': { tunekit_nginx_version: '1.16.1' },
  'keepalive-race': { tunekit_app_keepalive_timeout_ms: 1000 },
  'headers-timeout': { tunekit_app_headers_timeout_ms: 1000 },
  nofile: { tunekit_nginx_worker_rlimit_nofile: 1000, tunekit_nginx_limit_nofile: 1000 },
  'nginx-limit-nofile': { tunekit_nginx_limit_nofile: 1000 },
  backlog: { tunekit_listen_backlog: 8192, tunekit_sysctl_net_core_somaxconn: 4096, tunekit_app_backlog: 4096 },
  'app-backlog': { tunekit_app_backlog: 8192 },
  'overload-bound': { tunekit_nginx_upstream_max_conns: 1000, tunekit_app_backlog: 511 },
  'overload-connections': { tunekit_nginx_upstream_max_conns: 2000 },
  'queue-budget': { tunekit_app_queue_budget_ms: 60000 },
  'latency-queue-budget': { tunekit_latency_budget_ms: 1000, tunekit_app_queue_budget_ms: 2000 },
  'latency-backlog': { tunekit_latency_budget_ms: 1000, tunekit_app_capacity_rps: 100, tunekit_nginx_upstream_max_conns: 0 },
  'latency-timeout': { tunekit_latency_budget_ms: 60000, tunekit_app_queue_budget_ms: 1000 },
  'limit-req-rate': { tunekit_nginx_limit_req_rate: '10' },
  'limit-key': { tunekit_nginx_limit_conn: 4, tunekit_nginx_limit_key: 'client' },
  'keepalive-pool-size': { tunekit_nginx_upstream_keepalive: 5000 },
  'keepalive-http': { tunekit_nginx_proxy_http_version: '1.0' },
  'keepalive-connection': { tunekit_nginx_proxy_connection_default: 'close' },
  'per-worker-count': { tunekit_upstream_kind: 'per-worker', tunekit_app_workers: 0 },
  'stock-tcp': { tunekit_profile: 'stock', tunekit_upstream_kind: 'uds' },
  'request-timeout': { tunekit_app_request_timeout_ms: 1000, tunekit_app_headers_timeout_ms: 70000 },
  'nr-open': { tunekit_app_limit_nofile: 2000000 },
  'socket-mode': { tunekit_socket_mode: '0666' },
  'socket-path-length': { tunekit_socket_dir: `/run/${'x'.repeat(100)}` },
  'socket-activation': { tunekit_systemd_socket_activation: true, tunekit_process_manager: 'pm2' },
  'server-name': { tunekit_nginx_default_server: false, tunekit_nginx_server_name: '_' },
  'stop-timeout': { tunekit_systemd_timeout_stop_s: 1 },
  'upstream-sticky': { tunekit_nginx_upstream_sticky: true },
  'http3-tls': { tunekit_nginx_version: '1.26.3', tunekit_nginx_http3_module: true, tunekit_nginx_http3: true },
  'http3-version': { tunekit_nginx_version: '1.22.1', tunekit_nginx_tls: true, tunekit_nginx_http3: true },
  'http3-module': { tunekit_nginx_version: '1.26.3', tunekit_nginx_http3_module: false, tunekit_nginx_tls: true, tunekit_nginx_http3: true },
  'status-loopback': { tunekit_nginx_status_address: '0.0.0.0' },
  'status-port': { tunekit_nginx_status_port: 80 },
  'metrics-ports': { tunekit_metrics_exporters: true, tunekit_metrics_mtail_port: 9464 },
  'k8s-metrics-port': { tunekit_k8s_metrics_port: 8080 },
  'metrics-status': { tunekit_metrics_exporters: true, tunekit_nginx_status: false },
  'upstream-sticky-key': { tunekit_nginx_upstream_sticky: true, tunekit_upstream_kind: 'per-worker', tunekit_app_workers: 2, tunekit_nginx_upstream_sticky_key: 'client' },
  'unit-app-hidden': { tunekit_app_module: '/home/me/myapp/app.js' },
  'unit-kit-hidden': { tunekit_node_bin: '/home/me/.nvm/versions/node/v22.11.0/bin/node' },
  'unit-read-only-paths': { tunekit_app_read_only_paths: ['/home'] },
};

// The rules a live host has values for, and the doctor check that reports each
// (the Connection header's default is the map nginx renders it in).
const LIVE = {
  'keepalive-race': 'keepalive-race',
  'headers-timeout': 'headers-timeout',
  nofile: 'nofile',
  backlog: 'backlog',
  'app-backlog': 'app-backlog',
  'keepalive-pool-size': 'keepalive-pool-size',
  'keepalive-http': 'keepalive-http',
  'keepalive-connection': 'upgrade-map',
  'socket-mode': 'socket-mode',
};

/** What doctor would read on a host that runs `vars`: nginx as the kit renders it, app.json, the kernel, the socket. */
function hostFacts(vars) {
  return {
    kernel: { somaxconn: vars.tunekit_sysctl_net_core_somaxconn, nrOpen: vars.tunekit_sysctl_fs_nr_open },
    nginx: {
      user: vars.tunekit_nginx_user,
      workerConnections: vars.tunekit_nginx_worker_connections,
      workerRlimitNofile: vars.tunekit_nginx_worker_rlimit_nofile,
      upstreams: [{ name: 'tunekit_app', servers: [`unix:${vars.tunekit_socket_path}`], keepalive: vars.tunekit_nginx_upstream_keepalive, keepaliveTimeoutS: vars.tunekit_nginx_upstream_keepalive_timeout_s }],
      proxies: [{ location: '/', proxyPass: 'http://tunekit_app', httpVersion: String(vars.tunekit_nginx_proxy_http_version), connectionHeader: '$tunekit_connection' }],
      listens: [{ address: `127.0.0.1:${vars.tunekit_nginx_listen_port}`, backlog: vars.tunekit_listen_backlog }],
      maps: [{ source: '$http_upgrade', variable: '$tunekit_connection', entries: [['default', vars.tunekit_nginx_proxy_connection_default], ['~.', 'upgrade']] }],
      alerts: {},
    },
    app: { settings: { keepAliveTimeoutMs: vars.tunekit_app_keepalive_timeout_ms, headersTimeoutMs: vars.tunekit_app_headers_timeout_ms, backlog: vars.tunekit_app_backlog }, healthz: null },
    sockets: [{ path: vars.tunekit_socket_path, exists: true, isSocket: true, mode: parseInt(vars.tunekit_socket_mode, 8), group: vars.tunekit_socket_group, dirMode: 0o750 }],
    listeners: [],
    errors: [],
    skipped: [],
  };
}

test('every rule has a set that breaks it, and the table is well formed', () => {
  const table = rules.load();
  assert.deepEqual(table.map((r) => r.id).sort(), Object.keys(BREAK).sort());
  for (const r of table) assert.doesNotMatch(rules.says(r, config.resolve({ overrides: VERSION, check: false })), /\n/, `${r.id} says one line`);
});

test('the definition passes every rule, those of a host\'s files too', () => {
  assert.deepEqual(config.checkVars(config.resolve({ overrides: VERSION, check: false }), undefined, { host: true }), []);
});

for (const rule of rules.load()) {
  const host = rule.scope === 'host';
  test(`${rule.id}: render refuses it with the table's text${host ? ' (a host\'s files only)' : ''}${LIVE[rule.id] ? ', and doctor names it with the same' : ''}`, () => {
    const overrides = { ...VERSION, ...BREAK[rule.id] };
    const vars = config.resolve({ overrides, check: false });
    const text = rules.says(rule, vars);
    assert.deepEqual(config.checkVars(vars, undefined, { host: true }), [text], 'this set breaks this rule alone');
    assert.throws(() => config.resolve({ overrides, host: true }), (err) => err instanceof config.ConfigError && err.message === `inconsistent settings: ${text}`);
    if (host) {
      // The local stacks (demo, loadtest, run, --prefix) run outside the unit: the set resolves there.
      assert.deepEqual(config.checkVars(vars), []);
      assert.doesNotThrow(() => config.resolve({ overrides }));
    } else {
      assert.throws(() => config.resolve({ overrides }), (err) => err instanceof config.ConfigError && err.message === `inconsistent settings: ${text}`);
    }
    if (!LIVE[rule.id]) return;
    const named = doctor.analyze(hostFacts(vars), vars).filter((f) => f.level !== 'ok' && f.what.includes(text));
    assert.deepEqual(named.map((f) => [f.id, f.level]), [[LIVE[rule.id], rule.level]]);
    assert.ok(named[0].fix, 'doctor says how to fix it');
    // The same host with the definition's values: doctor finds nothing wrong with that check.
    const good = doctor.analyze(hostFacts(config.resolve({ overrides: VERSION })), vars);
    assert.deepEqual(good.filter((f) => f.id === LIVE[rule.id] && f.level !== 'ok'), []);
  });
}

test('doctor evaluates exactly the rules that have a live counterpart here', () => {
  const used = [...new Set(doctor.CHECKS.filter((c) => c.rule).map((c) => c.rule))].sort();
  assert.deepEqual(used, Object.keys(LIVE).sort());
});

test('the stock profile is exempt from the tuning rules, not from the safety ones', () => {
  const stock = { ...VERSION, tunekit_profile: 'stock', tunekit_upstream_kind: 'tcp' };
  const tuning = config.resolve({ overrides: { ...stock, ...BREAK['keepalive-race'] }, check: false });
  assert.deepEqual(config.checkVars(tuning), []);
  const safety = config.resolve({ overrides: { ...stock, ...BREAK['socket-mode'] }, check: false });
  assert.deepEqual(config.checkVars(safety), [rules.says(rules.load().find((r) => r.id === 'socket-mode'), safety)]);
});

test("an unset directive counts at nginx's default, read from the definition", () => {
  assert.equal(rules.upstreamDefault('tunekit_nginx_upstream_keepalive_timeout_s'), 60);
  assert.equal(rules.upstreamDefault('tunekit_listen_backlog'), 511);
  assert.equal(rules.upstreamDefault('tunekit_nginx_worker_connections'), 512);
  assert.equal(rules.upstreamDefault('tunekit_nginx_proxy_connection_default'), 'close');
  assert.throws(() => rules.upstreamDefault('tunekit_nginx_worker_rlimit_nofile'), /states no upstream default/);
});
