'use strict';
// lib/render.js: what lands where, what the nginx files say for each upstream
// kind and profile, prefix mode, and that a failed render writes nothing.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const kubernetes = require('../../lib/kubernetes');
const { ROOT } = require('../../lib/template');
const { listFiles } = require('../lib/util');

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-render-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}


const nginxOnly = { layers: ['nginx', 'app'] };

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** A whole rendered line: `indent` spaces, then exactly `text`. */
const line = (indent, text) => new RegExp(`^ {${indent}}${escape(text)}$`, 'm');
/** The failover parameters every upstream server line carries. */
const failover = (vars) => `max_fails=${vars.tunekit_nginx_upstream_max_fails} fail_timeout=${vars.tunekit_nginx_upstream_fail_timeout_s}s`;

function renderSet(t, opts, renderOpts = {}) {
  const dir = tmpdir(t);
  const vars = config.resolve(opts);
  const res = renderer.render(vars, dir, { ...nginxOnly, ...renderOpts });
  const read = (rel) => fs.readFileSync(path.join(dir, rel), 'utf8');
  return { dir, vars, res, read };
}

test('the default set writes nginx.conf, its includes and app.json at their host paths', (t) => {
  const { dir, read, vars } = renderSet(t, {});
  assert.deepEqual(listFiles(dir), [
    'etc/nginx/nginx.conf',
    'etc/nginx/tunekit/client.conf',
    'etc/nginx/tunekit/compression.conf',
    'etc/nginx/tunekit/connection-upgrade.conf',
    'etc/nginx/tunekit/logging.conf',
    'etc/nginx/tunekit/proxy.conf',
    'etc/nginx/tunekit/shared-host.conf',
    'etc/nginx/tunekit/site.conf',
    'etc/nginx/tunekit/status.conf',
    'etc/nginx/tunekit/temp-paths.conf',
    'etc/nginx/tunekit/upstream.conf',
    'etc/tunekit-app/app.json',
  ]);
  const conf = read('etc/nginx/nginx.conf');
  // A shared host (the default): the kit's files, then the distribution's
  // include points, so the host's other sites and modules stay in force.
  const includes = conf.match(/^\s*include .*$/gm).map((l) => l.trim());
  assert.deepEqual(includes, [
    'include /etc/nginx/modules-enabled/*.conf;',
    ...['logging', 'temp-paths', 'client', 'connection-upgrade', 'compression', 'upstream', 'site', 'status', 'shared-host']
      .map((f) => `include /etc/nginx/tunekit/${f}.conf;`),
  ]);
  assert.deepEqual(read('etc/nginx/tunekit/shared-host.conf').match(/^include .*$/gm),
    ['include /etc/nginx/mime.types;', 'include /etc/nginx/conf.d/*.conf;', 'include /etc/nginx/sites-enabled/*;']);
  assert.match(conf, line(0, `worker_rlimit_nofile ${vars.tunekit_nginx_worker_rlimit_nofile};`));
  assert.match(conf, line(4, `worker_connections ${vars.tunekit_nginx_worker_connections};`));
  assert.match(conf, line(4, `accept_mutex ${vars.tunekit_nginx_accept_mutex ? 'on' : 'off'};`));
  assert.match(conf, /^ {4}server_tokens off;$/m);
  const app = JSON.parse(read('etc/tunekit-app/app.json'));
  assert.equal(app.listen, `unix:${vars.tunekit_socket_path}`);
});

test('uds: one unix server, a keep-alive pool, HTTP/1.1 and a Connection map that never says close', (t) => {
  const { read, vars } = renderSet(t, {});
  const up = read('etc/nginx/tunekit/upstream.conf');
  assert.match(up, line(4, `server unix:${vars.tunekit_socket_path} ${failover(vars)};`));
  assert.match(up, line(4, `keepalive ${vars.tunekit_nginx_upstream_keepalive};`));
  assert.match(up, line(4, `keepalive_requests ${vars.tunekit_nginx_upstream_keepalive_requests};`));
  assert.match(up, line(4, `keepalive_time ${vars.tunekit_nginx_upstream_keepalive_time};`));
  assert.match(up, line(4, `keepalive_timeout ${vars.tunekit_nginx_upstream_keepalive_timeout_s}s;`));
  const proxy = read('etc/nginx/tunekit/proxy.conf');
  assert.match(proxy, /^proxy_http_version 1\.1;$/m);
  assert.match(proxy, /^proxy_set_header Connection \$tunekit_connection;$/m);
  assert.match(proxy, /^proxy_set_header Upgrade \$http_upgrade;$/m);
  assert.match(proxy, /^proxy_next_upstream error timeout;$/m);
  assert.doesNotMatch(proxy, /non_idempotent;/);
  for (const h of ['Host $host', 'X-Real-IP $remote_addr', 'X-Forwarded-For $proxy_add_x_forwarded_for', 'X-Forwarded-Proto $scheme', 'X-Forwarded-Host $host']) {
    assert.ok(proxy.includes(`proxy_set_header ${h};`), h);
  }
  const map = read('etc/nginx/tunekit/connection-upgrade.conf');
  assert.match(map, /^ {4}default "";$/m);
  assert.match(map, /^ {4}"~\." {4}upgrade;$/m);
  const site = read('etc/nginx/tunekit/site.conf');
  assert.match(site, line(4, `listen ${vars.tunekit_nginx_listen_port} default_server backlog=${vars.tunekit_listen_backlog} reuseport;`));
  assert.match(site, /^ {8}proxy_pass http:\/\/tunekit_app;$/m);
  // The kit's site logs to its own file; the shared host's other sites keep theirs.
  assert.match(site, line(4, `access_log ${vars.tunekit_nginx_access_log_path} tunekit buffer=${vars.tunekit_nginx_access_log_buffer} flush=${vars.tunekit_nginx_access_log_flush};`));
  assert.doesNotMatch(read('etc/nginx/tunekit/logging.conf'), /^\s*access_log/m);
});

test('tcp: host:port upstream, app listens on the same address', (t) => {
  const { read, vars } = renderSet(t, { set: ['tunekit_upstream_kind=tcp', 'tunekit_app_tcp_port=3100'] });
  assert.match(read('etc/nginx/tunekit/upstream.conf'), line(4, `server ${vars.tunekit_app_tcp_host}:3100 ${failover(vars)};`));
  assert.equal(JSON.parse(read('etc/tunekit-app/app.json')).listen, 'tcp:127.0.0.1:3100');
  // An IPv6 address is bracketed where nginx reads it.
  const v6 = renderSet(t, { set: ['tunekit_upstream_kind=tcp', 'tunekit_app_tcp_host=::1'] });
  assert.match(v6.read('etc/nginx/tunekit/upstream.conf'), line(4, `server [::1]:${v6.vars.tunekit_app_tcp_port} ${failover(v6.vars)};`));
});

test('per-worker: least_conn before keepalive, one socket PATH.1..N per app worker', (t) => {
  const { read, vars } = renderSet(t, { set: ['tunekit_upstream_kind=per-worker', 'tunekit_app_workers=3'] });
  const up = read('etc/nginx/tunekit/upstream.conf');
  const servers = up.match(/^ {4}server .*$/gm).map((l) => l.trim());
  assert.deepEqual(servers, [1, 2, 3].map((n) => `server unix:${vars.tunekit_socket_path}.${n} ${failover(vars)};`));
  assert.ok(up.indexOf('least_conn;') < up.indexOf('keepalive '), 'least_conn must precede keepalive');
  assert.equal(JSON.parse(read('etc/tunekit-app/app.json')).strategy, 'per-worker');
});

// The stock profile's values are nginx's and Node's own defaults (a fact about
// those programs, not about the kit's definition), so they are written out here.
test('stock: proxy_pass straight to HOST:PORT, HTTP/1.0, Connection close, no upstream block, Node defaults', (t) => {
  const { dir, read } = renderSet(t, { varsFiles: [path.join(ROOT, 'ansible/profiles/stock.yml')] });
  assert.ok(!listFiles(dir).includes('etc/nginx/tunekit/upstream.conf'));
  assert.doesNotMatch(read('etc/nginx/nginx.conf'), /upstream\.conf/);
  assert.match(read('etc/nginx/nginx.conf'), /^ {4}worker_connections 768;$/m);
  assert.match(read('etc/nginx/tunekit/site.conf'), /^ {8}proxy_pass http:\/\/127\.0\.0\.1:3000;$/m);
  assert.match(read('etc/nginx/tunekit/site.conf'), /^ {4}listen 80 default_server backlog=511;$/m);
  assert.match(read('etc/nginx/tunekit/proxy.conf'), /^proxy_http_version 1\.0;$/m);
  assert.match(read('etc/nginx/tunekit/connection-upgrade.conf'), /^ {4}default "close";$/m);
  assert.match(read('etc/nginx/tunekit/site.conf'), /^ {4}access_log \/var\/log\/nginx\/tunekit-access\.log tunekit;$/m);
  const app = JSON.parse(read('etc/tunekit-app/app.json'));
  assert.equal(app.listen, 'tcp:127.0.0.1:3000');
  assert.equal(app.strategy, 'round-robin');
  assert.equal(app.keepAliveTimeoutMs, 5000);
  assert.equal(app.headersTimeoutMs, 60000);
  assert.equal(app.requestTimeoutMs, 300000);
  assert.equal(app.backlog, 511);
});

test('booleans are written as on/off, never as true/false/True/False', (t) => {
  for (const flip of [[], ['tunekit_nginx_accept_mutex=true', 'tunekit_nginx_multi_accept=true', 'tunekit_nginx_proxy_buffering=false']]) {
    const { dir } = renderSet(t, { set: flip });
    for (const rel of listFiles(path.join(dir, 'etc/nginx'))) {
      const text = fs.readFileSync(path.join(dir, 'etc/nginx', rel), 'utf8');
      const code = text.split('\n').filter((l) => !l.trim().startsWith('#')).join('\n');
      assert.doesNotMatch(code, /\b(true|false|True|False)\b/, rel);
    }
  }
  const { read } = renderSet(t, { set: ['tunekit_nginx_accept_mutex=true', 'tunekit_nginx_proxy_buffering=false'] });
  assert.match(read('etc/nginx/nginx.conf'), /^ {4}accept_mutex on;$/m);
  assert.match(read('etc/nginx/tunekit/proxy.conf'), /^proxy_buffering off;$/m);
});

test('every tunable of every definition file is read somewhere (no dead knobs)', () => {
  const word = (name) => new RegExp(`\\b${name}\\b`);
  // Readers: the manifest's templates, the Kubernetes templates (and lib/kubernetes.js,
  // which maps the pod's values onto the host ones), the roles' tasks, handlers, templates and vars.
  const roles = path.join(ROOT, 'roles');
  const readers = [
    ...renderer.loadManifest().map((e) => path.join(ROOT, e.src)),
    ...kubernetes.loadList().map((e) => path.join(ROOT, e.src)),
    path.join(ROOT, 'lib/kubernetes.js'),
    ...listFiles(roles).filter((f) => !f.startsWith('tunekit/defaults/') && !f.endsWith('.md')).map((f) => path.join(roles, f)),
  ].map((f) => fs.readFileSync(f, 'utf8')).join('\n');
  // A value another variable is derived from is read too (its uncommented lines).
  const definitions = config.defaultFiles().flatMap((f) => fs.readFileSync(f, 'utf8').split('\n')).filter((l) => !l.startsWith('#'));
  const names = Object.keys(config.loadDefaults());
  assert.ok(names.length > 50, `the definition has ${names.length} variables`);
  const unused = names.filter((n) => !word(n).test(readers) && !definitions.some((l) => !l.startsWith(`${n}:`) && word(n).test(l)));
  assert.deepEqual(unused, []);
});

test('--prefix moves every path into the tree, runs as the caller and creates runtime dirs', (t) => {
  const { dir, res } = renderSet(t, {}, { prefix: true });
  const me = os.userInfo().username;
  assert.equal(res.vars.tunekit_nginx_user, me);
  for (const rel of listFiles(path.join(dir, 'etc/nginx'))) {
    const text = fs.readFileSync(path.join(dir, 'etc/nginx', rel), 'utf8');
    // A location's argument is a URI, not a file (status.conf's /stub_status).
    const code = text.split('\n').filter((l) => !l.trim().startsWith('#') && !/^\s*location\b/.test(l)).join('\n');
    // Every absolute path nginx reads or writes lies inside the tree.
    for (const m of code.matchAll(/(?:^|\s|unix:)(\/[\w./-]+)/g)) {
      assert.ok(m[1].startsWith(dir + '/'), `${rel}: ${m[1]} is outside ${dir}`);
    }
  }
  const app = JSON.parse(fs.readFileSync(path.join(dir, 'etc/tunekit-app/app.json'), 'utf8'));
  assert.equal(app.listen, `unix:${dir}/run/tunekit-app/app.sock`);
  for (const d of ['run', 'var/lib/nginx', 'var/log/nginx', 'run/tunekit-app']) {
    assert.ok(fs.statSync(path.join(dir, d)).isDirectory(), d);
  }
  assert.equal(fs.statSync(path.join(dir, 'run/tunekit-app')).mode & 0o777, 0o750);
});

test('--prefix with nginxUser (the local stack as on a host): nginx runs as that user, the socket is in its group', (t) => {
  const { read, res } = renderSet(t, {}, { prefix: true, nginxUser: 'www-data' });
  assert.match(read('etc/nginx/nginx.conf'), line(0, 'user www-data;'));
  assert.equal(JSON.parse(read('etc/tunekit-app/app.json')).socketGroup, 'www-data');
  assert.equal(res.vars.tunekit_socket_group, 'www-data', 'the cross-layer checks saw the group app.json binds with');
  assert.equal(res.vars.tunekit_app_user, os.userInfo().username, 'the app still runs as the caller');
  assert.throws(() => renderSet(t, {}, { prefix: true, nginxUser: 'tunekit-no-such-user' }),
    /nginx user tunekit-no-such-user does not exist on this machine/);
});

test('a template that fails to render leaves no file behind, not even the ones before it', (t) => {
  const dir = tmpdir(t);
  const vars = config.resolve();
  const manifest = renderer.loadManifest().filter((e) => e.layer === 'nginx');
  // The last entry names an undefined variable: strict undefined makes it fail.
  manifest.push({ src: 'nginx/tunekit/site.conf.j2', dest: '/etc/nginx/{{ tunekit_no_such_variable }}.conf', layer: 'nginx', mode: '0644' });
  assert.throws(() => renderer.render(vars, dir, { manifest }), (err) =>
    err.name === 'ConfigError' && /tunekit_no_such_variable|undefined/.test(err.message));
  assert.deepEqual(listFiles(dir), []);
});

test('a template listed in the manifest but missing is an error that names it and the way out', (t) => {
  const dir = tmpdir(t);
  const manifest = [
    ...renderer.loadManifest().filter((e) => e.layer === 'nginx'),
    { src: 'systemd/not-written-yet.j2', dest: '/etc/x', layer: 'systemd', mode: '0644' },
  ];
  assert.throws(() => renderer.render(config.resolve(), dir, { manifest }),
    /templates listed in .*vars\/main\.yml do not exist: systemd\/not-written-yet\.j2.*--layer/);
  assert.deepEqual(listFiles(dir), []);
  // Rendering only the layers that exist works.
  renderer.render(config.resolve(), dir, { manifest, layers: ['nginx'] });
  assert.ok(listFiles(dir).includes('etc/nginx/nginx.conf'));
});

test('files are replaced by rename (no temp file left, mode from the manifest), a re-render is byte-identical', (t) => {
  const dir = tmpdir(t);
  const vars = config.resolve();
  renderer.render(vars, dir, nginxOnly);
  const before = listFiles(dir).map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]);
  renderer.render(vars, dir, nginxOnly);
  const after = listFiles(dir).map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]);
  assert.deepEqual(after, before);
  assert.ok(listFiles(dir).every((f) => !path.basename(f).startsWith('.')), 'no temp files');
  assert.equal(fs.statSync(path.join(dir, 'etc/tunekit-app/app.json')).mode & 0o777, 0o640);
  assert.equal(fs.statSync(path.join(dir, 'etc/nginx/nginx.conf')).mode & 0o777, 0o644);
});

test('when_var/when_equals follow the values', () => {
  const entry = { src: 'x', when_var: 'tunekit_process_manager', when_equals: 'pm2' };
  assert.equal(renderer.applies(entry, { tunekit_process_manager: 'pm2' }), true);
  assert.equal(renderer.applies(entry, { tunekit_process_manager: 'systemd' }), false);
  const flag = { src: 'x', when_var: 'tunekit_systemd_socket_activation' };
  assert.equal(renderer.applies(flag, { tunekit_systemd_socket_activation: true }), true);
  assert.equal(renderer.applies(flag, { tunekit_systemd_socket_activation: false }), false);
  assert.throws(() => renderer.applies({ src: 'x', when_var: 'tunekit_nope' }, {}), /when_var tunekit_nope/);
});

test('a template that extends nginx.conf.j2 replaces one {% block %} and keeps the rest', (t) => {
  const dir = tmpdir(t);
  fs.writeFileSync(path.join(dir, 'mine.conf.j2'),
    '{% extends "nginx/nginx.conf.j2" %}\n{% block events %}\n    worker_connections 1234;\n{% endblock %}\n');
  const { createEnv } = require('../../lib/template');
  const out = createEnv([ROOT, dir]).render('mine.conf.j2', config.resolve());
  assert.match(out, /^events \{\n {4}worker_connections 1234;\n\}$/m);
  assert.doesNotMatch(out, /accept_mutex/);
  assert.match(out, /^ {4}server_tokens off;$/m);
});

test('a dedicated host includes only the kit\'s files: not Debian\'s sites-enabled/default (:80), conf.d or modules', (t) => {
  const { dir, read } = renderSet(t, { set: ['tunekit_nginx_host_mode=dedicated'] });
  assert.equal(fs.existsSync(path.join(dir, 'etc/nginx/tunekit/shared-host.conf')), false);
  const includes = read('etc/nginx/nginx.conf').match(/^\s*include .*$/gm).map((l) => l.trim());
  assert.ok(includes.every((l) => l.startsWith('include /etc/nginx/tunekit/')), includes.join('\n'));
});

test('a site that is not the default server needs a name of its own', () => {
  assert.throws(() => config.resolve({ set: ['tunekit_nginx_default_server=false'] }),
    /tunekit_nginx_default_server=false needs a tunekit_nginx_server_name other than "_"/);
  const vars = config.resolve({ set: ['tunekit_nginx_default_server=false', 'tunekit_nginx_server_name=app.example.com'] });
  assert.equal(vars.tunekit_nginx_default_server, false);
});

test('TLS on: the site moves to HTTPS with HTTP/2 as the nginx version has it, port 80 redirects except the ACME path', (t) => {
  const set = ['tunekit_nginx_tls=true', 'tunekit_nginx_server_name=example.com'];
  const { dir, read, vars } = renderSet(t, { set: [...set, 'tunekit_nginx_version=1.26.0'] });
  assert.ok(listFiles(dir).includes('etc/nginx/tunekit/tls.conf'));
  assert.deepEqual(read('etc/nginx/nginx.conf').match(/^\s*include .*(site|https-redirect)\.conf;$/gm).map((l) => l.trim()),
    ['include /etc/nginx/tunekit/site.conf;', 'include /etc/nginx/tunekit/https-redirect.conf;']);
  const site = read('etc/nginx/tunekit/site.conf');
  assert.match(site, line(4, `listen 443 ssl default_server backlog=${vars.tunekit_listen_backlog} reuseport;`));
  assert.match(site, line(4, 'include /etc/nginx/tunekit/tls.conf;'));
  const tls = read('etc/nginx/tunekit/tls.conf');
  assert.match(tls, /^http2 on;$/m);
  assert.match(tls, /^ssl_certificate \/etc\/letsencrypt\/live\/example\.com\/fullchain\.pem;$/m);
  assert.match(tls, /^ssl_certificate_key \/etc\/letsencrypt\/live\/example\.com\/privkey\.pem;$/m);
  assert.match(tls, /^ssl_protocols TLSv1\.2 TLSv1\.3;$/m);
  assert.match(tls, /^ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:/m);
  assert.match(tls, /^ssl_session_cache shared:tunekit_tls:10m;$/m);
  assert.match(tls, /^ssl_session_tickets off;$/m);
  // Off by default: no HSTS header, no stapling without a resolver.
  assert.doesNotMatch(tls, /Strict-Transport-Security|ssl_stapling|resolver/);
  const redirect = read('etc/nginx/tunekit/https-redirect.conf');
  assert.match(redirect, line(4, `listen 80 default_server backlog=${vars.tunekit_listen_backlog} reuseport;`));
  assert.match(redirect, /location \/\.well-known\/acme-challenge\/ \{\n {8}root \/var\/www\/letsencrypt;\n {4}\}/);
  assert.match(redirect, line(8, 'return 301 https://$host$request_uri;'));

  // Before 1.25.1 HTTP/2 is a listen parameter; `http2 on;` would fail nginx -t there.
  const old = renderSet(t, { set: [...set, 'tunekit_nginx_version=1.24.0'] });
  assert.match(old.read('etc/nginx/tunekit/site.conf'), line(4, `listen 443 ssl http2 default_server backlog=${vars.tunekit_listen_backlog} reuseport;`));
  assert.doesNotMatch(old.read('etc/nginx/tunekit/tls.conf'), /^http2 on;$/m);
});

test('the tls-stock profile renders HTTPS as Debian ships nginx: TLS 1.0-1.3, no session cache, tickets on, 16k records', (t) => {
  const { read } = renderSet(t, { varsFiles: [path.join(ROOT, 'ansible/profiles/tls-stock.yml')], set: ['tunekit_nginx_version=1.22.1'] });
  const tls = read('etc/nginx/tunekit/tls.conf');
  assert.match(tls, /^ssl_protocols TLSv1 TLSv1\.1 TLSv1\.2 TLSv1\.3;$/m);
  assert.match(tls, /^ssl_ciphers HIGH:!aNULL:!MD5;$/m);
  assert.match(tls, /^ssl_ecdh_curve auto;$/m);
  assert.match(tls, /^ssl_prefer_server_ciphers on;$/m);
  assert.match(tls, /^ssl_session_cache none;$/m);
  assert.match(tls, /^ssl_session_tickets on;$/m);
  assert.match(tls, /^ssl_buffer_size 16k;$/m);
  assert.doesNotMatch(tls, /Mozilla's/, 'the baseline is not presented as a Mozilla profile');
  // Everything else stays the kit's: the same upstream as the tuned front.
  assert.match(read('etc/nginx/tunekit/upstream.conf'), /^\s*keepalive \d+;$/m);
});

test('TLS options: modern profile, a non-default HTTPS port in the redirect, HSTS and stapling when asked, gzip off', (t) => {
  const { dir, read } = renderSet(t, { set: ['tunekit_nginx_tls=true', 'tunekit_nginx_version=1.26.0', 'tunekit_nginx_tls_profile=modern',
    'tunekit_nginx_tls_port=8443', 'tunekit_nginx_hsts_max_age=63072000', 'tunekit_nginx_tls_stapling_resolver=127.0.0.53',
    'tunekit_nginx_http2=false', 'tunekit_nginx_gzip=false'] });
  const tls = read('etc/nginx/tunekit/tls.conf');
  assert.match(tls, /^ssl_protocols TLSv1\.3;$/m);
  assert.doesNotMatch(tls, /ssl_ciphers|http2/);
  assert.match(tls, /^add_header Strict-Transport-Security "max-age=63072000" always;$/m);
  assert.match(tls, /^ssl_stapling on;\nssl_stapling_verify on;\nresolver 127\.0\.0\.53;$/m);
  assert.match(read('etc/nginx/tunekit/site.conf'), /^ {4}listen 8443 ssl default_server /m);
  assert.match(read('etc/nginx/tunekit/https-redirect.conf'), line(8, 'return 301 https://$host:8443$request_uri;'));
  assert.equal(read('etc/nginx/tunekit/compression.conf').match(/^gzip.*$/gm).join('\n'), 'gzip off;');
  assert.ok(listFiles(dir).includes('etc/nginx/tunekit/https-redirect.conf'));
});

test('TLS off (the default): no HTTPS files, the site on the plain port; gzip on for the listed text types', (t) => {
  const { dir, read, vars } = renderSet(t, {});
  assert.ok(!listFiles(dir).some((f) => /tls\.conf|https-redirect\.conf/.test(f)));
  assert.doesNotMatch(read('etc/nginx/tunekit/site.conf'), /ssl|tls\.conf/);
  const gz = read('etc/nginx/tunekit/compression.conf');
  assert.match(gz, /^gzip on;$/m);
  assert.match(gz, new RegExp(`^gzip_comp_level ${vars.tunekit_nginx_gzip_level};$`, 'm'));
  assert.match(gz, new RegExp(`^gzip_types ${escape(vars.tunekit_nginx_gzip_types.join(' '))};$`, 'm'));
});
