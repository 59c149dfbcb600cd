'use strict';
// site.yml with the HTTPS front (tunekit_nginx_tls: true) and HTTP/3 on
// (tunekit_nginx_http3: true; Debian 13's nginx has the module) onto a booted
// Debian 13 host, with a certificate from a throwaway CA (lib/tls.js) in
// certbot's layout:
// - TLS 1.3 and HTTP/2 (ALPN) are negotiated, the app answers through HTTPS, a
//   second connection resumes the first one's session, plain HTTP redirects to
//   HTTPS except the ACME path, which answers from the webroot;
// - HTTP/2 responses advertise HTTP/3 on the port (Alt-Svc), and the host's own
//   curl gets the app's answer over HTTP/3 alone (the controller's has none);
// - a missing key, a key of another certificate and an expired certificate are
//   each refused before anything changes, naming the file; the live
//   configuration stays as it was and keeps serving.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const https = require('node:https');
const { spawnSync } = require('node:child_process');
const { bootHosts, stopHosts } = require('../lib/nspawn');
const ansible = require('../lib/ansible');
const { resolve } = require('../../lib/config');
const { makeCA, makeLeaf } = require('../../lib/tls');

const { tailOf, sh } = ansible;
const NAME = 'localhost'; // a name the throwaway leaf covers
const vars = resolve({ set: ['tunekit_nginx_tls=true', `tunekit_nginx_server_name=${NAME}`] });
const LIVE = `/etc/letsencrypt/live/${NAME}`;
const CA_ON_HOST = '/etc/tunekit-e2e/ca.pem'; // for the host's own curl

/** An ECDSA certificate for NAME that expired in 2020, with its key: {cert, key}. */
function expiredCertificate(dir) {
  const run = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, `openssl ${args.join(' ')}: ${r.stderr}`);
  };
  fs.mkdirSync(path.join(dir, 'db'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'db/index.txt'), '');
  fs.writeFileSync(path.join(dir, 'db/serial'), '01\n');
  fs.writeFileSync(path.join(dir, 'ca.cnf'), [
    '[ca]', 'default_ca = x', '[x]', 'dir = .', 'database = db/index.txt', 'serial = db/serial', 'new_certs_dir = db',
    'default_md = sha256', 'policy = any', 'copy_extensions = copy', 'unique_subject = no', '[any]', 'commonName = supplied', '',
  ].join('\n'));
  run(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'expired.key']);
  run(['req', '-new', '-key', 'expired.key', '-subj', `/CN=${NAME}`, '-addext', `subjectAltName=DNS:${NAME}`, '-out', 'expired.csr']);
  // `openssl ca` takes explicit dates; `req -days` cannot go into the past.
  run(['ca', '-batch', '-config', 'ca.cnf', '-selfsign', '-keyfile', 'expired.key', '-in', 'expired.csr', '-out', 'expired.pem',
    '-startdate', '20200101000000Z', '-enddate', '20200102000000Z']);
  return { cert: path.join(dir, 'expired.pem'), key: path.join(dir, 'expired.key') };
}

/** A TLS connection to the host's HTTPS port that trusts the CA; resolves once the handshake is done. */
function connect(h, ca, extra = {}) {
  return new Promise((resolveConn, reject) => {
    const socket = tls.connect({ host: h.ip, port: vars.tunekit_nginx_tls_port, servername: NAME, ca, ...extra }, () => resolveConn(socket));
    socket.setTimeout(15000, () => socket.destroy(new Error('TLS handshake timed out')));
    socket.once('error', reject);
  });
}

/** One HTTP/1.1 request on a fresh TLS connection; the session the server hands out with it. */
async function requestWithSession(h, ca, session) {
  const socket = await connect(h, ca, { session, ALPNProtocols: ['http/1.1'] });
  const reused = socket.isSessionReused();
  const got = new Promise((res) => socket.once('session', res)); // TLS 1.3: the ticket comes after the handshake
  socket.write(`GET /healthz HTTP/1.1\r\nHost: ${NAME}\r\nConnection: close\r\n\r\n`);
  let body = '';
  socket.setEncoding('utf8');
  socket.on('data', (d) => { body += d; });
  await new Promise((res) => socket.on('end', res));
  const next = await Promise.race([got, new Promise((res) => setTimeout(() => res(null), 2000))]);
  socket.destroy();
  return { reused, status: Number(/^HTTP\/1\.1 (\d+)/.exec(body)?.[1]), session: next };
}

test('site.yml with the HTTPS front', { timeout: 30 * 60 * 1000 }, async (t) => {
  let hosts = [];
  let runner;
  let passed = false;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-https-e2e-'));
  t.after(async () => {
    await stopHosts(hosts);
    if (runner) runner.cleanup(passed);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  hosts = await bootHosts(1, { name: 'tkhttps' });
  const h = hosts[0];
  const put = (rel, from, mode = 0o644) => {
    const to = path.join(h.root, rel);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
    fs.chmodSync(to, mode);
  };
  const ca = makeCA(path.join(dir, 'ca'));
  const leaf = makeLeaf(path.join(dir, 'leaf'), ca);
  put(`${LIVE}/fullchain.pem`, leaf.cert);
  put(`${LIVE}/privkey.pem`, leaf.key, 0o600);
  put(CA_ON_HOST, ca.cert);
  const caPem = fs.readFileSync(ca.cert);
  runner = ansible.createRunner(hosts, {
    name: 'tunekit-https-e2e',
    groupVars: { tunekit_nginx_disable_sites: ['default'], tunekit_nginx_tls: true, tunekit_nginx_http3: true, tunekit_nginx_server_name: NAME },
  });

  await t.test('deploys', async () => {
    const r = await runner.playbook();
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
  });

  await t.test('TLS 1.3 and HTTP/2 are negotiated with the CA\'s certificate, and the app answers over HTTPS', async () => {
    const s = await connect(h, caPem, { ALPNProtocols: ['h2', 'http/1.1'] });
    assert.equal(s.getProtocol(), 'TLSv1.3');
    assert.equal(s.alpnProtocol, 'h2');
    assert.equal(s.getPeerCertificate().subject.CN, NAME);
    s.destroy();
    const res = await new Promise((ok, fail) => https.get({ host: h.ip, port: vars.tunekit_nginx_tls_port, path: '/healthz', servername: NAME, ca: caPem, headers: { host: NAME } }, (r) => {
      let body = '';
      r.on('data', (d) => { body += d; });
      r.on('end', () => ok({ status: r.statusCode, body }));
    }).on('error', fail));
    assert.equal(res.status, 200, res.body);
    assert.equal(JSON.parse(res.body).ok, true);
  });

  await t.test('HTTP/3: HTTP/2 responses advertise it, and the host\'s curl gets the app\'s answer over QUIC alone', async () => {
    const port = vars.tunekit_nginx_tls_port;
    const h2 = await ansible.getHttp2(h.ip, port, '/healthz', { name: NAME, ca: caPem });
    assert.equal(h2.status, 200, h2.body);
    assert.equal(h2.headers['alt-svc'], `h3=":${port}"; ma=${vars.tunekit_nginx_http3_alt_svc_max_age}`);
    const h3 = await ansible.curlHttp3(h, port, '/healthz', { name: NAME, caFile: CA_ON_HOST });
    assert.equal(h3.version, '3', `the response came over HTTP/${h3.version}`);
    assert.equal(h3.status, 200, h3.body);
    assert.equal(JSON.parse(h3.body).ok, true);
  });

  await t.test('a second connection resumes the first one\'s session', async () => {
    const first = await requestWithSession(h, caPem);
    assert.equal(first.status, 200);
    assert.equal(first.reused, false);
    assert.ok(first.session, 'the server handed out a session to resume');
    const second = await requestWithSession(h, caPem, first.session);
    assert.equal(second.status, 200);
    assert.equal(second.reused, true, 'the second handshake was a full one');
  });

  await t.test('plain HTTP: a redirect to HTTPS, except the ACME path served from the webroot', async () => {
    const redirect = await ansible.get(h.ip, vars.tunekit_nginx_listen_port, '/some/path?x=1', { host: NAME });
    assert.equal(redirect.status, 301);
    assert.equal(redirect.headers.location, `https://${NAME}/some/path?x=1`);
    fs.writeFileSync(path.join(h.root, vars.tunekit_nginx_acme_webroot, '.well-known/acme-challenge/tk-e2e-token'), 'token body\n');
    const acme = await ansible.get(h.ip, vars.tunekit_nginx_listen_port, '/.well-known/acme-challenge/tk-e2e-token', { host: NAME });
    assert.equal(acme.status, 200);
    assert.equal(acme.body, 'token body\n');
    assert.equal(await sh(h, `stat -L -c %a ${LIVE}/privkey.pem`), '600');
  });

  // Each broken certificate or key: refused before anything changes, naming the
  // file; the files nginx serves from stay as they were, and it keeps serving.
  const other = makeLeaf(path.join(dir, 'other'), ca);
  put('etc/tunekit-e2e/other.key', other.key, 0o600);
  const expired = expiredCertificate(path.join(dir, 'expired'));
  put('etc/tunekit-e2e/expired.pem', expired.cert);
  put('etc/tunekit-e2e/expired.key', expired.key, 0o600);
  const cases = [
    ['a missing key', { tunekit_nginx_tls_certificate_key: '/etc/tunekit-e2e/none.key' },
      /tunekit_nginx_tls_certificate_key=\/etc\/tunekit-e2e\/none\.key: no such file on this host/],
    ['the key of another certificate', { tunekit_nginx_tls_certificate_key: '/etc/tunekit-e2e/other.key' },
      /tunekit_nginx_tls_certificate_key=\/etc\/tunekit-e2e\/other\.key does not match tunekit_nginx_tls_certificate=\/etc\/letsencrypt\/live\/localhost\/fullchain\.pem/],
    ['an expired certificate', { tunekit_nginx_tls_certificate: '/etc/tunekit-e2e/expired.pem', tunekit_nginx_tls_certificate_key: '/etc/tunekit-e2e/expired.key' },
      /tunekit_nginx_tls_certificate=\/etc\/tunekit-e2e\/expired\.pem expired \(notAfter=Jan\s+2 00:00:00 2020 GMT\)/],
  ];
  for (const [what, extra, message] of cases) {
    await t.test(`${what}: refused before anything changes, naming the file; the live configuration keeps serving`, async () => {
      const sums = await sh(h, 'find /etc/nginx /etc/systemd/system /etc/sysctl.d -type f | sort | xargs sha256sum');
      const master = await sh(h, 'systemctl show -P MainPID nginx.service');
      const r = await runner.playbook(['-e', JSON.stringify(extra)]);
      assert.notEqual(r.code, 0, `site.yml deployed ${what}`);
      assert.match(r.out, message);
      assert.match(r.out, /Nothing of the kit was changed on/);
      assert.equal(await sh(h, 'find /etc/nginx /etc/systemd/system /etc/sysctl.d -type f | sort | xargs sha256sum'), sums, 'files changed');
      assert.equal(await sh(h, 'systemctl show -P MainPID nginx.service'), master, 'nginx was restarted');
      const s = await connect(h, caPem);
      assert.equal(s.getPeerCertificate().subject.CN, NAME);
      s.destroy();
    });
  }
  passed = true;
});
