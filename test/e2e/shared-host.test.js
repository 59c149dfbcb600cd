'use strict';
// site.yml onto a host that already serves a site of its own, as most hosts do:
// a static site on its own server_name that needs a conf.d snippet (its log
// format) and a dynamic module (headers-more, from Debian's
// libnginx-mod-http-headers-more-filter, enabled in modules-enabled/).
// - A hand-edited nginx.conf is refused before anything changes, naming it.
// - After site.yml (shared host, the default) the old site answers exactly as
//   before — status, body, its module's header — and the kit's site answers on
//   the bare address; the module is still loaded.
// - A site that already serves HTTP/3 on the HTTPS port with its own
//   `listen ... quic reuseport` makes site.yml with HTTPS and HTTP/3 on stop
//   before it changes anything, naming that listen and the variable that
//   resolves it (tunekit_nginx_http3_reuseport: false); the running
//   configuration stays as it was and keeps serving.
// - A second site that claims default_server on the kit's port makes site.yml
//   stop before it changes anything, naming that site's file and line; the
//   running configuration stays as it was and keeps serving.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { bootHosts, stopHosts } = require('../lib/nspawn');
const ansible = require('../lib/ansible');
const { resolve } = require('../../lib/config');
const { makeCA, makeLeaf } = require('../../lib/tls');

const { tailOf, sh } = ansible;
const vars = resolve();
const LEGACY = 'legacy.example.test';

const LEGACY_SITE = `server {
    listen 80;
    server_name ${LEGACY};
    root /var/www/legacy;
    access_log /var/log/nginx/legacy.log legacy;
    more_set_headers "X-Legacy-Module: headers-more";
}
`;
const LEGACY_SNIPPET = "log_format legacy '$host $status $request';\n";
const CLASH_SITE = 'server {\n    listen 80 default_server;\n    server_name clash.example.test;\n    return 204;\n}\n';
// A site of the host's own that serves HTTP/3 on the kit's HTTPS port, with
// the reuseport nginx allows once per address and port.
const TLS_NAME = 'localhost';
const QUIC_SITE = (port) => `server {
    listen ${port} ssl;
    listen ${port} quic reuseport;
    server_name quic.example.test;
    ssl_certificate /etc/tunekit-e2e/quic.pem;
    ssl_certificate_key /etc/tunekit-e2e/quic.key;
    return 204;
}
`;

test('site.yml on a host that already serves a site of its own', { timeout: 30 * 60 * 1000 }, async (t) => {
  let hosts = [];
  let runner;
  let passed = false;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-shared-e2e-'));
  t.after(async () => {
    await stopHosts(hosts);
    if (runner) runner.cleanup(passed);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  hosts = await bootHosts(1, { name: 'tkshare' });
  const h = hosts[0];
  runner = ansible.createRunner(hosts, { name: 'tunekit-shared-e2e', groupVars: { tunekit_nginx_disable_sites: ['default'] } });
  const port = vars.tunekit_nginx_listen_port;
  const legacyGet = () => ansible.get(h.ip, port, '/', { host: LEGACY });

  // The host as its operator left it: Debian's nginx with the module enabled,
  // a snippet in conf.d and a static site, running.
  // (Files are written through the container's root, h.root, so no shell quoting.)
  const put = (rel, text) => {
    fs.mkdirSync(path.dirname(path.join(h.root, rel)), { recursive: true });
    fs.writeFileSync(path.join(h.root, rel), text);
  };
  put('var/www/legacy/index.html', 'legacy site, untouched\n');
  put('etc/nginx/conf.d/legacy-log.conf', LEGACY_SNIPPET);
  put('etc/nginx/sites-available/legacy', LEGACY_SITE);
  put('etc/nginx/sites-available/clash', CLASH_SITE);
  await sh(h, [
    'ls /etc/nginx/modules-enabled/ | grep -q headers-more',
    'ln -s ../sites-available/legacy /etc/nginx/sites-enabled/legacy',
    'nginx -t && systemctl start nginx',
  ].join(' && '));
  const before = await legacyGet();
  assert.equal(before.status, 200);
  assert.equal(before.body, 'legacy site, untouched\n');
  assert.equal(before.headers['x-legacy-module'], 'headers-more');

  await t.test('a hand-edited nginx.conf is refused before anything changes', async () => {
    await sh(h, 'cp /etc/nginx/nginx.conf /root/nginx.conf.orig && sed -i "s/worker_connections 768;/worker_connections 8192;/" /etc/nginx/nginx.conf');
    const sums = await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum');
    const r = await runner.playbook();
    assert.notEqual(r.code, 0, 'site.yml went ahead over a hand-edited nginx.conf');
    assert.match(r.out, /\/etc\/nginx\/nginx\.conf on \S+ is neither the distribution's nor the\s+kit's: it was changed by hand \(worker_connections 8192 at line \d+\)/);
    assert.equal(await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum'), sums, 'files changed');
    await sh(h, 'cp /root/nginx.conf.orig /etc/nginx/nginx.conf');
  });

  await t.test('after site.yml the old site answers as before, the kit answers on the bare address, the module is loaded', async () => {
    const r = await runner.playbook();
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
    const after = await legacyGet();
    assert.deepEqual({ status: after.status, body: after.body, module: after.headers['x-legacy-module'] },
      { status: before.status, body: before.body, module: before.headers['x-legacy-module'] });
    const app = await ansible.get(h.ip, port, '/healthz');
    assert.equal(app.status, 200, app.body);
    assert.ok(JSON.parse(app.body).workers >= 1);
    const dump = await sh(h, 'nginx -T 2>/dev/null');
    assert.match(dump, /load_module .*ngx_http_headers_more_filter_module\.so;/);
    assert.match(dump, /# configuration file \/etc\/nginx\/sites-enabled\/legacy:/);
    // The kit's site logs to its own file; the legacy site still to its own.
    assert.match(await sh(h, `tail -n 1 /var/log/nginx/legacy.log`), new RegExp(`^${LEGACY} 200 GET / HTTP/1\\.1$`));
    // Debian's welcome page was disabled as asked (its link only; the site stays available).
    assert.equal((await h.ssh('test -e /etc/nginx/sites-enabled/default')).code, 1);
    assert.equal(await sh(h, 'test -f /etc/nginx/sites-available/default && echo kept'), 'kept');
  });

  await t.test('a site with its own `quic reuseport` on the HTTPS port stops site.yml with HTTP/3 before anything changes, naming the fix', async () => {
    // The other site's certificate, and one for the kit's front where certbot keeps it.
    const ca = makeCA(path.join(dir, 'ca'));
    const other = makeLeaf(path.join(dir, 'quic'), ca);
    const kit = makeLeaf(path.join(dir, 'kit'), ca);
    put('etc/tunekit-e2e/quic.pem', fs.readFileSync(other.cert));
    put('etc/tunekit-e2e/quic.key', fs.readFileSync(other.key));
    put(`etc/letsencrypt/live/${TLS_NAME}/fullchain.pem`, fs.readFileSync(kit.cert));
    put(`etc/letsencrypt/live/${TLS_NAME}/privkey.pem`, fs.readFileSync(kit.key));
    const tlsPort = vars.tunekit_nginx_tls_port;
    put('etc/nginx/sites-available/quic', QUIC_SITE(tlsPort));
    await sh(h, `chmod 600 /etc/tunekit-e2e/quic.key /etc/letsencrypt/live/${TLS_NAME}/privkey.pem && ` +
      'ln -s ../sites-available/quic /etc/nginx/sites-enabled/quic && nginx -t && systemctl reload nginx');
    try {
      const sums = await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum');
      const master = await sh(h, 'systemctl show -P MainPID nginx.service');
      const workers = await sh(h, `pgrep -P ${master} | sort`);
      const r = await runner.playbook(['-e', JSON.stringify({ tunekit_nginx_tls: true, tunekit_nginx_http3: true, tunekit_nginx_server_name: TLS_NAME })]);
      assert.notEqual(r.code, 0, 'site.yml went ahead with two quic reuseport listens on one port');
      assert.match(r.out, new RegExp(`duplicate listen options for 0\\.0\\.0\\.0:${tlsPort} in /etc/nginx/(sites-enabled/quic|tunekit/site\\.conf):\\d+`));
      assert.match(r.out, /listens for QUIC on that address and port with reuseport[^]*set tunekit_nginx_http3_reuseport: false/, 'the refusal names the fix');
      assert.equal(await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum'), sums, 'files changed');
      assert.equal(await sh(h, `pgrep -P ${master} | sort`), workers, 'nginx was reloaded');
      assert.equal((await legacyGet()).body, before.body);
      assert.equal((await ansible.get(h.ip, port, '/healthz')).status, 200);
    } finally {
      await sh(h, 'rm /etc/nginx/sites-enabled/quic && systemctl reload nginx');
    }
  });

  await t.test('a second default_server on the kit\'s port stops site.yml before anything changes', async () => {
    await sh(h, 'ln -s ../sites-available/clash /etc/nginx/sites-enabled/clash');
    const sums = await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum');
    const master = await sh(h, 'systemctl show -P MainPID nginx.service');
    const workers = await sh(h, `pgrep -P ${master} | sort`);
    // A change the play would make, were it allowed to go on.
    const r = await runner.playbook(['-e', JSON.stringify({ tunekit_nginx_upstream_keepalive: 32 })]);
    assert.notEqual(r.code, 0, 'site.yml went ahead with two default servers');
    assert.match(r.out, /a duplicate default server for 0\.0\.0\.0:80 in \/etc\/nginx\/(sites-enabled\/clash|tunekit\/site\.conf):\d+/);
    assert.match(r.out, /tunekit_nginx_disable_sites/, 'the refusal names the way out');
    assert.equal(await sh(h, 'find /etc/nginx /etc/sysctl.d /etc/systemd/system -type f | sort | xargs sha256sum'), sums, 'files changed');
    assert.match(await sh(h, `cat ${vars.tunekit_nginx_include_dir}/upstream.conf`), new RegExp(`keepalive ${vars.tunekit_nginx_upstream_keepalive};`));
    assert.equal(await sh(h, `pgrep -P ${master} | sort`), workers, 'nginx was reloaded');
    const still = await legacyGet();
    assert.equal(still.body, before.body);
    assert.equal((await ansible.get(h.ip, port, '/healthz')).status, 200);
  });
  passed = true;
});
