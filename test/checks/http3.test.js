'use strict';
// HTTP/3 on the nginx builds that have it: Debian 13's 1.26 and sid's newest,
// both built with ngx_http_v3_module (their cached root filesystems, chrooted
// in a private mount namespace; test/lib/nspawn.js runInRootfs). The kit's TLS
// render with tunekit_nginx_http3 on, served on loopback in front of the
// runner: an HTTP/2 response advertises h3 on the port (Alt-Svc), and that
// release's own curl gets the app's answer over HTTP/3 alone. On a shared host,
// a second `quic reuseport` on the same address and port is refused by
// `nginx -t` (what the Ansible pre-flight reports, with the fix), and the fix —
// the kit's quic listen without reuseport — passes.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { opensslOf, http3Of } = require('../../lib/nginx');
const { freePorts } = require('../../lib/proc');
const { ensureRootfsAll, runInRootfs } = require('../lib/nspawn');

const SUITES = ['trixie', 'sid'];
const builds = {}; // suite -> { nginx, openssl, http3 }

test.before(async () => {
  await ensureRootfsAll(SUITES);
  for (const suite of SUITES) {
    const r = await runInRootfs(suite, 'nginx -V 2>&1');
    assert.equal(r.code, 0, `${suite}: ${r.stderr}`);
    builds[suite] = { nginx: /nginx\/(\d+\.\d+\.\d+)/.exec(r.stdout)[1], openssl: opensslOf(r.stdout), http3: http3Of(r.stdout) };
  }
});

async function renderFor(t, suite, extra = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tunekit-h3-${suite}-`));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const [port, tlsPort, statusPort] = await freePorts(3);
  const b = builds[suite];
  const vars = config.resolve({ set: [
    `tunekit_nginx_version=${b.nginx}`, `tunekit_nginx_openssl_version=${b.openssl}`, `tunekit_nginx_http3_module=${b.http3}`,
    'tunekit_nginx_tls=true', 'tunekit_nginx_http3=true', 'tunekit_nginx_listen_address=127.0.0.1',
    `tunekit_nginx_listen_port=${port}`, `tunekit_nginx_tls_port=${tlsPort}`, `tunekit_nginx_status_port=${statusPort}`, ...extra] });
  renderer.render(vars, dir, { prefix: true });
  return { dir, tlsPort, vars };
}

for (const suite of SUITES) {
  test(`${suite}: HTTP/3 through the kit's nginx to the app, advertised on HTTP/2`, async (t) => {
    assert.ok(builds[suite].http3, `${suite}'s nginx ${builds[suite].nginx} lists --with-http_v3_module`);
    const { dir, tlsPort, vars } = await renderFor(t, suite);
    const conf = `${dir}/etc/nginx/nginx.conf`;
    const sock = vars.tunekit_socket_path;
    // The runner (app/ needs no npm package) with its example app; nginx once
    // the runner says it is ready; curl over HTTP/2, then over HTTP/3 only.
    const script = [
      `mkdir -p ${dir}${path.dirname(sock)} ${dir}/var/log/nginx`,
      `node /tmp/kit/app/cluster.js --config ${dir}/etc/tunekit-app/app.json > ${dir}/app.log 2>&1 &`,
      'app=$!',
      `i=0; until grep -q '"event":"ready"' ${dir}/app.log || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done`,
      `nginx -c ${conf} || exit 3`,
      `curl -sk --http2 -D - -o /dev/null https://127.0.0.1:${tlsPort}/ | tr -d '\\r' | grep -i '^alt-svc:'`,
      // A stalled curl (exit 28: Debian 13's, on OpenSSL's QUIC stack, can stall
      // after a lost datagram) is followed by a new one, twice at most.
      `for i in 1 2 3; do curl -sk --http3-only --max-time 10 -w '\\nhttp_version=%{http_version}\\n' https://127.0.0.1:${tlsPort}/ && break; [ $? -eq 28 ] || break; done`,
      `nginx -c ${conf} -s quit`,
      'kill -TERM $app; wait $app',
      `cat ${dir}/app.log >&2`,
    ].join('\n');
    const r = await runInRootfs(suite, script, { binds: { [dir]: dir, [ROOT]: '/tmp/kit' }, timeoutMs: 90000 });
    assert.equal(r.code, 0, `${suite}: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^alt-svc: h3=":${tlsPort}"; ma=${vars.tunekit_nginx_http3_alt_svc_max_age}$`, 'mi'));
    assert.match(r.stdout, /^http_version=3$/m, `${suite}: not answered over HTTP/3:\n${r.stdout}`);
    const body = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{')));
    assert.equal(body.ok, true, `${suite}: the app's answer over HTTP/3: ${r.stdout}`);
  });
}

test('trixie: a second `quic reuseport` on the same address and port fails nginx -t; without the kit\'s reuseport it passes', async (t) => {
  for (const [reuseport, ok] of [[true, false], [false, true]]) {
    const { dir, tlsPort, vars } = await renderFor(t, 'trixie', [`tunekit_nginx_http3_reuseport=${reuseport}`]);
    // Another site on the host, with its own reuseport on the kit's port.
    const other = path.join(dir, 'other.conf');
    fs.writeFileSync(other, `server { listen 127.0.0.1:${tlsPort} quic reuseport; server_name other.example; ` +
      `ssl_certificate ${dir}${vars.tunekit_nginx_tls_certificate}; ssl_certificate_key ${dir}${vars.tunekit_nginx_tls_certificate_key}; return 204; }\n`);
    const conf = path.join(dir, 'etc/nginx/nginx.conf');
    const site = /include (\S+\/site\.conf);/.exec(fs.readFileSync(conf, 'utf8'))[1];
    fs.writeFileSync(conf, fs.readFileSync(conf, 'utf8').replace(`include ${site};`, `include ${site};\n    include ${other};`));
    const r = await runInRootfs('trixie', `nginx -t -c ${conf}`, { binds: { [dir]: dir } });
    if (ok) assert.equal(r.code, 0, `tunekit_nginx_http3_reuseport=false beside another site's reuseport:\n${r.stderr}`);
    else assert.match(r.stderr, new RegExp(`duplicate listen options for 127\\.0\\.0\\.1:${tlsPort}`), `both with reuseport:\n${r.stderr}`);
  }
});
