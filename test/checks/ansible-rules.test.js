'use strict';
// The tunekit role's cross-layer check under real Ansible (the pinned ansible-core
// in .venv/): the role loads vars/rules.yml and renders templates/checks.j2, as
// its check task does, and refuses a set with the very lines `tunekit render`
// prints for it (test/unit/rules.test.js holds render and doctor to the table).

const test = require('node:test');
const assert = require('node:assert/strict');
const { templateLines } = require('../lib/ansible');
const config = require('../../lib/config');
const { RULES_FILE, CHECKS_TEMPLATE } = require('../../lib/config/rules');

const roleRefusals = (t, set) => templateLines(t, CHECKS_TEMPLATE, ['-e', JSON.stringify(set)], { varsFiles: [RULES_FILE] });
const renderRefusals = (set) => config.checkVars(config.resolve({ overrides: { tunekit_nginx_version: '1.22.1', ...set }, check: false }));

test('the definition passes the role\'s cross-layer check', async (t) => {
  assert.deepEqual(await roleRefusals(t, {}), []);
});

test('the role refuses a set with the lines render prints for it, in the table\'s order', async (t) => {
  const set = { tunekit_app_keepalive_timeout_ms: 1000, tunekit_socket_mode: '0666', tunekit_nginx_proxy_http_version: '1.0', tunekit_nginx_version: '1.16.1' };
  const expected = renderRefusals(set);
  assert.equal(expected.length, 4, expected.join('\n'));
  assert.deepEqual(await roleRefusals(t, set), expected);
});

test("the keep-alive race with Node's buffer: the role derives it from tunekit_node_version and refuses with render's line", async (t) => {
  // Node 24 closes 1 s after keepAliveTimeout: 59.5 s passes against nginx's 60 s, 58 s does not.
  assert.deepEqual(await roleRefusals(t, { tunekit_app_keepalive_timeout_ms: 59500, tunekit_node_version: '24.22.2' }), []);
  const set = { tunekit_app_keepalive_timeout_ms: 58000, tunekit_node_version: '24.22.2' };
  const expected = renderRefusals(set);
  assert.equal(expected.length, 1, expected.join('\n'));
  assert.match(expected[0], /^tunekit_app_keepalive_timeout_ms=58000 \+ tunekit_app_keepalive_buffer_ms=1000 \(Node's keepAliveTimeoutBuffer: the live close time\) must be greater than/);
  assert.deepEqual(await roleRefusals(t, set), expected);
});

test('the stock profile: the role skips the tuning rules and keeps the safety ones, as render does', async (t) => {
  const set = { tunekit_profile: 'stock', tunekit_upstream_kind: 'tcp', tunekit_app_keepalive_timeout_ms: 1000, tunekit_socket_mode: '0666' };
  const expected = renderRefusals(set);
  assert.equal(expected.length, 1, expected.join('\n'));
  assert.match(expected[0], /^tunekit_socket_mode=0666 must be 0660/);
  assert.deepEqual(await roleRefusals(t, set), expected);
});

test('the status listener\'s rules (a non-loopback address, a site port) read the same under Ansible; loopback and an explicit remote pass', async (t) => {
  const set = { tunekit_nginx_status_address: '192.0.2.10', tunekit_nginx_tls: true, tunekit_nginx_tls_port: 8443, tunekit_nginx_status_port: 8443 };
  const expected = renderRefusals(set);
  assert.equal(expected.length, 2, expected.join('\n'));
  assert.match(expected[0], /^tunekit_nginx_status_address=192\.0\.2\.10 is not a loopback address/);
  assert.match(expected[1], /^tunekit_nginx_status_port=8443 is one of the site's ports \(tunekit_nginx_listen_port=80, tunekit_nginx_tls_port=8443\)/);
  assert.deepEqual(await roleRefusals(t, set), expected);
  for (const ok of [{ tunekit_nginx_status_address: '127.0.0.2' }, { tunekit_nginx_status_address: '::1' },
    { tunekit_nginx_status_address: '192.0.2.10', tunekit_nginx_status_remote: true }]) {
    assert.deepEqual(renderRefusals(ok), [], JSON.stringify(ok));
    assert.deepEqual(await roleRefusals(t, ok), [], JSON.stringify(ok));
  }
});

test('the app unit\'s sandbox: the role refuses an app in a home, under /tmp, or a bad opened folder with render\'s lines, and takes an opened one', async (t) => {
  const hostRefusals = (set) => config.checkVars(config.resolve({ overrides: { tunekit_nginx_version: '1.22.1', ...set }, check: false }), undefined, { host: true });
  const cases = [
    [{ tunekit_app_module: '/home/me/myapp/app.js' }, /^tunekit_app_module=\/home\/me\/myapp\/app\.js is under \/home, .* tunekit_app_read_only_paths=\[\/home\/me\/myapp\]/],
    [{ tunekit_app_module: '/var/tmp/myapp/app.js' }, /^tunekit_app_module=\/var\/tmp\/myapp\/app\.js is under \/var\/tmp, and the app's unit has a private one/],
    [{ tunekit_app_module: '/run/user/1000/app.js', tunekit_app_read_only_paths: ['/home/me/x'] }, /^tunekit_app_module=\/run\/user\/1000\/app\.js is under \/run\/user, a user's runtime directory/],
    [{ tunekit_app_source_dir: '/home/deploy/shop', tunekit_app_module: 'server.js', tunekit_app_read_only_paths: ['/home/deploy/shop2'] },
      /^tunekit_app_module=server\.js \(\/home\/deploy\/shop\/server\.js, in tunekit_app_source_dir\) is under \/home/],
    [{ tunekit_node_bin: '/root/.nvm/versions/node/v22.11.0/bin/node', tunekit_app_install_dir: '/tmp/tk' },
      /^tunekit_node_bin=\/root\/\.nvm\/versions\/node\/v22\.11\.0\/bin\/node is out of the app unit's sight; tunekit_app_install_dir=\/tmp\/tk is out of the app unit's sight;/],
    [{ tunekit_app_read_only_paths: ['/home/me/../x', '/home/me/my.app'] }, /^tunekit_app_read_only_paths=\[\/home\/me\/\.\.\/x, \/home\/me\/my\.app\] may list only folders inside/],
  ];
  for (const [set, re] of cases) {
    const expected = hostRefusals(set);
    assert.equal(expected.length, 1, expected.join('\n'));
    assert.match(expected[0], re);
    assert.deepEqual(await roleRefusals(t, set), expected, JSON.stringify(set));
  }
  // Opened (a dot in the folder's name, matched as a dot), elsewhere, or under PM2: nothing to refuse.
  for (const ok of [{ tunekit_app_module: '/home/me/my.app/app.js', tunekit_app_read_only_paths: ['/home/me/my.app'] },
    { tunekit_app_module: '/srv/myapp/app.js' },
    { tunekit_app_module: '/home/me/myapp/app.js', tunekit_process_manager: 'pm2' }]) {
    assert.deepEqual(hostRefusals(ok), [], JSON.stringify(ok));
    assert.deepEqual(await roleRefusals(t, ok), [], JSON.stringify(ok));
  }
});

test('the latency budget under Ansible: the role derives the bound from it, and refuses with render\'s lines', async (t) => {
  // a quarter of 2,000 req/s x 9 s is 4,500 requests: deeper than the kit's accept queue, refused by overload-bound
  // (worker_connections raised so that one nginx worker holds them, else overload-connections refuses it too);
  // 100 req/s x 1 s is 100 requests, and with the bound taken off by hand the accept queue of 4,096 holds 41 s of them;
  // a rate nginx cannot read. Each alone breaks one rule; the role prints render's line for it.
  const cases = [
    [{ tunekit_latency_budget_ms: 9000, tunekit_app_capacity_rps: 2000, tunekit_nginx_worker_connections: 9608 }, /^tunekit_nginx_upstream_max_conns=4500 is more than the app's accept queue \(tunekit_app_backlog=4096\)/],
    [{ tunekit_latency_budget_ms: 1000, tunekit_app_capacity_rps: 100, tunekit_nginx_upstream_max_conns: 0 }, /the last of a full queue would wait 41 s/],
    [{ tunekit_nginx_limit_req_rate: '10' }, /is not an nginx rate/],
  ];
  for (const [set, re] of cases) {
    const expected = renderRefusals(set);
    assert.equal(expected.length, 1, expected.join('\n'));
    assert.match(expected[0], re);
    assert.deepEqual(await roleRefusals(t, set), expected, JSON.stringify(set));
  }
  assert.deepEqual(await roleRefusals(t, { tunekit_latency_budget_ms: 1000, tunekit_app_capacity_rps: 1500 }), [], 'a budget whose worth fits the queues passes');
});
