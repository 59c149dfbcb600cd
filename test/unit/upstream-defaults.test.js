'use strict';
// nginx 1.29.7 (stable 1.30) pools upstream{} connections by default and Node
// 20.18 / 22.9 close an idle connection 1 s after keepAliveTimeout: what render,
// the keep-alive race rule and doctor make of each version.
// (test/checks/keepalive-defaults.test.js measures both on Debian's own binaries.)
const test = require('node:test');
const assert = require('node:assert/strict');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const nginxconf = require('../../lib/nginxconf');
const doctor = require('../../lib/doctor');

const { features } = config.loadDefaults().tunekit_nginx_versions;
const NEW = '1.30.6'; // Debian sid's
const OLD = '1.22.1'; // Debian 12's

function upstreamConf(set) {
  const vars = config.resolve({ set });
  return renderer.renderAll(vars).find((r) => r.dest.endsWith('/upstream.conf')).content;
}

test('keepalive 0 is rendered as `keepalive 0;` for nginx >= 1.29.7 (its blocks pool by default) and left out before (refused there)', () => {
  assert.equal(features.upstream_keepalive_default.since, '1.29.7');
  const fresh = upstreamConf([`tunekit_nginx_version=${NEW}`, 'tunekit_nginx_upstream_keepalive=0']);
  assert.match(fresh, /^\s*keepalive 0;$/m);
  const old = upstreamConf([`tunekit_nginx_version=${OLD}`, 'tunekit_nginx_upstream_keepalive=0']);
  assert.doesNotMatch(old, /^\s*keepalive \d+;$/m);
  // A pool renders the same on both.
  for (const v of [NEW, OLD]) assert.match(upstreamConf([`tunekit_nginx_version=${v}`]), /^\s*keepalive 64;$/m);
});

test("the race rule compares nginx's keepalive_timeout with Node's live close time: keepAliveTimeout + the buffer its version adds", () => {
  const at = (node, ms) => () => config.resolve({ set: [`tunekit_app_keepalive_timeout_ms=${ms}`, ...(node ? [`tunekit_node_version=${node}`] : [])] });
  const buffer = (node) => config.resolve({ set: node ? [`tunekit_node_version=${node}`] : [] }).tunekit_app_keepalive_buffer_ms;
  // Measured (test/checks/keepalive-defaults.test.js): 18.20.4 closes at keepAliveTimeout, 20.19/20.20/24.22 1 s later.
  assert.deepEqual(['', '18.20.4', '20.17.0', '20.18.0', '20.20.2', '21.7.3', '22.8.0', '22.9.0', '24.22.2', '26.0.0'].map(buffer),
    [0, 0, 0, 1000, 1000, 0, 0, 1000, 1000, 1000]);
  // nginx keeps idle connections 60 s: 59.5 s + 1 s closes after it, 59.5 s alone before it.
  assert.doesNotThrow(at('20.20.2', 59500));
  assert.throws(at('18.20.4', 59500), /tunekit_app_keepalive_timeout_ms=59500 must be greater than tunekit_nginx_upstream_keepalive_timeout_s=60/);
  assert.throws(at('', 59500), /tunekit_app_keepalive_timeout_ms=59500 must be greater than/, 'a Node not known counts no buffer');
  assert.throws(at('24.22.2', 58000),
    /tunekit_app_keepalive_timeout_ms=58000 \+ tunekit_app_keepalive_buffer_ms=1000 \(Node's keepAliveTimeoutBuffer: the live close time\) must be greater than/);
});

const BARE = `# configuration file /x/nginx.conf:
events { }
http {
    upstream app { server unix:/run/app.sock; }
    server {
        listen 127.0.0.1:8080;
        location / { proxy_pass http://app; }
        location /direct { proxy_pass http://unix:/run/app.sock:; }
    }
}
`;

function facts(version, app) {
  return {
    kernel: { somaxconn: 4096, nrOpen: 1048576 },
    nginx: doctor.describeNginx(nginxconf.parseDump(BARE), version),
    app,
    sockets: [],
    listeners: [],
    errors: [],
  };
}
const STOCK_APP = { settings: { keepAliveTimeoutMs: 5000, headersTimeoutMs: 60000, backlog: 511 }, healthz: null };
const byId = (found, id) => found.filter((f) => f.id === id);

test('nginx -T of a bare upstream block: a pool of 32, HTTP/1.1, no "close" on 1.30; none of it on 1.22 or an unknown version', () => {
  const fresh = doctor.describeNginx(nginxconf.parseDump(BARE), NEW);
  const { name, keepalive, keepaliveByDefault, keepaliveTimeoutS } = fresh.upstreams[0];
  assert.deepEqual({ name, keepalive, keepaliveByDefault, keepaliveTimeoutS }, { name: 'app', keepalive: 32, keepaliveByDefault: true, keepaliveTimeoutS: 60 });
  assert.equal(fresh.proxies[0].httpVersion, '1.1');
  for (const version of [OLD, null]) {
    const old = doctor.describeNginx(nginxconf.parseDump(BARE), version);
    assert.equal(old.upstreams[0].keepalive, 0);
    assert.equal(old.proxies[0].httpVersion, '1.0');
  }
});

test('doctor on nginx 1.30 says first that its default pool made the race the default, in front of a Node left at 5 s', () => {
  const found = doctor.analyze(facts(NEW, STOCK_APP));
  const [race] = byId(found, 'keepalive-race');
  assert.equal(race.level, 'fail');
  assert.match(race.what, /^nginx 1\.30\.6 keeps upstream app's connections with no keepalive line \(from 1\.29\.7, stable 1\.30: keepalive 32, keepalive_timeout 60s\): nginx 1\.30 made this race the default/);
  assert.match(race.what, /app keepAliveTimeout 5000 ms \(app\.json\), nginx upstream app keepalive_timeout 60s: tunekit_app_keepalive_timeout_ms=5000 must be greater than/);
  assert.match(byId(found, 'keepalive-pool').find((f) => f.level === 'ok').what, /nginx 1\.30\.6's default pool: no keepalive line, keepalive 32 local/);
  // The same files on nginx 1.22: no pool, so no race; the missing pool is the finding.
  const old = doctor.analyze(facts(OLD, STOCK_APP));
  assert.deepEqual(byId(old, 'keepalive-race'), []);
  assert.match(byId(old, 'keepalive-pool').find((f) => /^upstream app/.test(f.what)).what, /no keepalive directive: nginx 1\.22\.1 opens a connection per request \(from 1\.29\.7 a block pools by default\)/);
});

test('an implicit upstream is flagged on any version, and on 1.30 as the pool it gives up', () => {
  for (const [version, why] of [[NEW, /nginx 1\.30\.6 pools only upstream\{\} blocks by default \(from 1\.29\.7\), so this location gets none of it/],
    [OLD, /from nginx 1\.29\.7 \(stable 1\.30\) an upstream\{\} block pools by default, an implicit upstream still does not/]]) {
    const f = byId(doctor.analyze(facts(version, STOCK_APP)), 'keepalive-pool').find((x) => x.what.startsWith('location /direct'));
    assert.equal(f.level, 'warn', version);
    assert.match(f.what, /proxies to http:\/\/unix:\/run\/app\.sock: directly \(an implicit upstream, no upstream\{\} block\): no keep-alive pool on any nginx version/);
    assert.match(f.what, why);
    assert.match(f.fix, /upstream block with `keepalive 64;`/);
  }
});

test("an app whose keepAliveTimeout doctor cannot read, behind a pool: a warning naming Node's default and its pending change", () => {
  const found = doctor.analyze(facts(NEW, { settings: null, healthz: null }));
  const [race] = byId(found, 'keepalive-race');
  assert.equal(race.level, 'warn');
  assert.match(race.what, /^nginx 1\.30\.6 keeps upstream app's connections with no keepalive line/);
  assert.match(race.what, /the app's keepAliveTimeout is not known here .*Node's default is 5000 ms \(\+ 1000 ms keepAliveTimeoutBuffer from Node 20\.18 and 22\.9; 65 s only from a future major, https:\/\/github\.com\/nodejs\/node\/pull\/62782\)/);
  assert.match(race.fix, /above 60000 ms/);
  // No pool (nginx 1.22, the same files): nothing to race.
  assert.deepEqual(byId(doctor.analyze(facts(OLD, { settings: null, healthz: null })), 'keepalive-race'), []);
});

test("doctor compares nginx's keepalive_timeout with the app's live close time: keepAliveTimeout + the buffer /healthz reports or its Node adds", () => {
  const race = (healthz) => byId(doctor.analyze(facts(NEW, { settings: null, healthz: { keepAliveTimeout: 59500, headersTimeout: 60500, ...healthz } })), 'keepalive-race')[0];
  const live = race({ keepAliveTimeoutBuffer: 1000, node: '24.22.2' });
  assert.equal(live.level, 'ok');
  assert.match(live.what, /^app closes idle connections at 59500 ms \+ 1000 ms keepAliveTimeoutBuffer \(server\.keepAliveTimeoutBuffer, Node 24\.22\.2\) \(live \/healthz\) > nginx upstream app keepalive_timeout 60s$/);
  assert.equal(race({ keepAliveTimeoutBuffer: null, node: '20.20.2' }).level, 'ok', 'Node 20.20 adds 1 s');
  const old = race({ keepAliveTimeoutBuffer: null, node: '18.20.4' });
  assert.equal(old.level, 'fail', 'Node 18 closes at keepAliveTimeout itself');
  assert.match(old.what, /app keepAliveTimeout 59500 ms \(live \/healthz\)/);
});

test("the bench's stock is the stock of the nginx found, and its report says which: 1.22's HTTP/1.0 and close, 1.30's HTTP/1.1 and no header, no pool on either", () => {
  const { stockDescribe, SCENARIOS } = require('../../loadtest/scenarios');
  const stock = (v) => config.resolve({ varsFiles: [require('node:path').join(__dirname, '../../ansible/profiles/stock.yml')], set: [`tunekit_nginx_version=${v}`] });
  const fresh = stock(NEW);
  assert.equal(fresh.tunekit_nginx_proxy_http_version, '1.1');
  assert.equal(fresh.tunekit_nginx_proxy_connection_default, '');
  assert.match(fresh.tunekit_nginx_proxy_pass, /^http:\/\/127\.0\.0\.1:\d+$/, 'an implicit upstream: no pool on 1.30 either');
  assert.equal(stock(OLD).tunekit_nginx_proxy_http_version, '1.0');
  assert.equal(SCENARIOS.stock.describeFor, stockDescribe);
  assert.equal(stockDescribe(fresh),
    "nginx 1.30.6 as a new user has it: proxy_pass to the app's TCP port (no upstream block, so no upstream keep-alive on any version), HTTP/1.1 with no Connection header, Node defaults");
  assert.match(stockDescribe(stock(OLD)), /^nginx 1\.22\.1 as a new user has it: .* HTTP\/1\.0 with "Connection: close", Node defaults$/);
});
