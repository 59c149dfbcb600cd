'use strict';
// Every render in the matrix (uds / tcp / per-worker x small / large, and stock)
// is accepted by the real nginx (`nginx -t` on a --prefix tree) and gixy-ng finds
// no issue in it. `tunekit render --check` refuses what nginx refuses.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');

const GIXY = path.join(ROOT, '.venv/bin/gixy');
const profile = (p) => path.join(ROOT, 'ansible/profiles', p);

const MATRIX = [];
for (const kind of ['uds', 'tcp', 'per-worker']) {
  for (const size of ['small', 'large']) {
    MATRIX.push({ name: `${kind} ${size}`, varsFiles: [profile(`${size}.yml`)], set: [`tunekit_upstream_kind=${kind}`, 'tunekit_app_workers=4'] });
  }
}
MATRIX.push({ name: 'uds default', varsFiles: [], set: [] });
MATRIX.push({ name: 'tcp on IPv6 loopback', varsFiles: [], set: ['tunekit_upstream_kind=tcp', 'tunekit_app_tcp_host=::1'] });
MATRIX.push({ name: 'stock on IPv6 loopback', varsFiles: [profile('stock.yml')], set: ['tunekit_app_tcp_host=::1'] });
MATRIX.push({ name: 'stock', varsFiles: [profile('stock.yml')], set: [] });
// A pool of 0 on the tuned upstream: nginx refuses `keepalive 0;`, so the
// directive is left out (the definition says 0 turns upstream keep-alive off).
MATRIX.push({ name: 'uds, upstream keep-alive off (pool 0)', varsFiles: [], set: ['tunekit_nginx_upstream_keepalive=0'],
  rendered: (dir) => assert.doesNotMatch(fs.readFileSync(path.join(dir, 'etc/nginx/tunekit/upstream.conf'), 'utf8'), /^\s*keepalive\s/m) });
MATRIX.push({ name: 'stock large', varsFiles: [profile('large.yml'), profile('stock.yml')], set: [] });
MATRIX.push({ name: 'uds, access log off, no buffering, no reuseport', varsFiles: [],
  set: ['tunekit_nginx_access_log=off', 'tunekit_nginx_proxy_buffering=false', 'tunekit_nginx_reuseport=false', 'tunekit_nginx_listen_address=127.0.0.1'] });
// HTTPS: the prefixed tree gets a throwaway certificate (lib/render.js). HSTS is
// off by default (tunekit_nginx_hsts_max_age: turned on only once HTTPS works for
// every name), so gixy's missing-HSTS finding is expected there and only there.
const HSTS_OFF = ['hsts_header'];
MATRIX.push({ name: 'uds, TLS on (intermediate, HTTP/2)', varsFiles: [], set: ['tunekit_nginx_tls=true'], gixySkips: HSTS_OFF });
MATRIX.push({ name: 'tcp large, TLS on (modern, tickets, HSTS, stapling, no HTTP/2, no gzip)', varsFiles: [profile('large.yml')],
  set: ['tunekit_upstream_kind=tcp', 'tunekit_nginx_tls=true', 'tunekit_nginx_tls_profile=modern', 'tunekit_nginx_tls_session_tickets=true',
    'tunekit_nginx_hsts_max_age=31536000', 'tunekit_nginx_tls_stapling_resolver=127.0.0.53', 'tunekit_nginx_http2=false', 'tunekit_nginx_gzip=false'] });
MATRIX.push({ name: 'stock, TLS on', varsFiles: [profile('stock.yml')], set: ['tunekit_nginx_tls=true'], gixySkips: HSTS_OFF });

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-matrix-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

for (const m of MATRIX) {
  test(`nginx -t and gixy accept the render: ${m.name}`, (t) => {
    const dir = tmpdir(t);
    const vars = config.resolve({ varsFiles: m.varsFiles, set: m.set });
    const { vars: pv } = renderer.render(vars, dir, { prefix: true, layers: ['nginx', 'app'] });
    const r = renderer.checkNginx(pv);
    assert.ok(r.ok, `${r.command}\n${r.output}`);
    if (m.rendered) m.rendered(dir);

    const skips = m.gixySkips ? ['--skips', m.gixySkips.join(',')] : [];
    const g = spawnSync(GIXY, ['--format', 'json', ...skips, path.join(dir, 'etc/nginx/nginx.conf')], { encoding: 'utf8' });
    let issues;
    try {
      issues = JSON.parse(g.stdout || '[]');
    } catch {
      assert.fail(`gixy did not run (${GIXY}; run: node bin/setup.js test):\n${g.stdout}${g.stderr}`);
    }
    assert.deepEqual(issues.map((i) => `${i.plugin}: ${i.summary} (${i.config})`), []);
    assert.equal(g.status, 0, `gixy failed:\n${g.stderr}`);
  });
}

test('tunekit render --check refuses a set nginx -t rejects, before writing anything', (t) => {
  const out = path.join(tmpdir(t), 'tree');
  // 64k busy buffers with 2 x 8k body buffers: nginx wants busy < all buffers minus one.
  const res = spawnSync(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'render', '--out', out, '--check',
    '--layer', 'nginx', '--layer', 'app',
    '--set', 'tunekit_nginx_proxy_buffers=2 8k', '--set', 'tunekit_nginx_proxy_busy_buffers_size=64k'], { encoding: 'utf8' });
  assert.equal(res.status, 2, res.stderr);
  assert.match(res.stderr, /nginx -t refuses the rendered config/);
  assert.match(res.stderr, /proxy_busy_buffers_size/);
  assert.equal(fs.existsSync(out), false);
});
