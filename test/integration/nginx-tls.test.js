'use strict';
// The kit's HTTPS front, served by the real nginx from a rendered --prefix tree
// with a throwaway ECDSA P-256 certificate, is what Mozilla's "intermediate"
// profile asks for (sslyze, trusting the tree's CA) and refuses SSLv3, TLS 1.0
// and TLS 1.1.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { nginxBinary } = require('../../lib/nginx');
const { freePorts, alive } = require('../../lib/proc');
const { ROOT } = require('../../lib/template');

const SSLYZE = path.join(ROOT, '.venv/bin/sslyze');

async function waitListening(port, ms) {
  const net = require('node:net');
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nginx did not listen on 127.0.0.1:${port} within ${ms} ms`);
}

test('sslyze finds the HTTPS front compliant with Mozilla intermediate; SSLv3, TLS 1.0 and 1.1 refused', async (t) => {
  assert.ok(fs.existsSync(SSLYZE), `sslyze is not installed (${SSLYZE}); run: node bin/setup.js test`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const [plain, https, statusPort] = await freePorts(3);
  const vars = config.resolve({ set: ['tunekit_nginx_tls=true', 'tunekit_nginx_listen_address=127.0.0.1',
    `tunekit_nginx_listen_port=${plain}`, `tunekit_nginx_tls_port=${https}`, `tunekit_nginx_status_port=${statusPort}`] });
  const { vars: pv } = renderer.render(vars, dir, { prefix: true, layers: ['nginx'] });
  const ca = path.join(path.dirname(pv.tunekit_nginx_tls_certificate), 'ca.pem');
  assert.ok(fs.existsSync(ca), 'the prefixed tree has the throwaway CA');

  const nginx = spawn(nginxBinary(), ['-c', path.join(pv.tunekit_nginx_conf_dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' });
  t.after(() => { if (alive(nginx.pid)) process.kill(nginx.pid, 'SIGQUIT'); });
  await waitListening(https, 10000);

  const out = path.join(dir, 'sslyze.json');
  const r = spawnSync(SSLYZE, ['--quiet', `--certinfo_ca_file=${ca}`, '--mozilla_config=intermediate', `--json_out=${out}`,
    `127.0.0.1:${https}`], { encoding: 'utf8', timeout: 120000 });
  const scan = JSON.parse(fs.readFileSync(out, 'utf8'));
  const result = scan.server_scan_results[0];
  assert.equal(result.scan_status, 'COMPLETED', JSON.stringify(result.connectivity_error_trace || result));
  // --mozilla_config makes sslyze exit non-zero when the server is not compliant.
  assert.equal(r.status, 0, `sslyze --mozilla_config=intermediate: not compliant\n${r.stdout}${r.stderr}`);
  const cmds = result.scan_result;
  for (const old of ['ssl_3_0_cipher_suites', 'tls_1_0_cipher_suites', 'tls_1_1_cipher_suites']) {
    assert.deepEqual(cmds[old].result.accepted_cipher_suites, [], `${old}: refused`);
  }
  assert.ok(cmds.tls_1_2_cipher_suites.result.accepted_cipher_suites.length > 0, 'TLS 1.2 accepted');
  assert.ok(cmds.tls_1_3_cipher_suites.result.accepted_cipher_suites.length > 0, 'TLS 1.3 accepted');
  // The leaf sslyze saw is the tree's ECDSA P-256 one and its chain verifies against the CA.
  const deployment = cmds.certificate_info.result.certificate_deployments[0];
  assert.equal(deployment.received_certificate_chain[0].public_key.algorithm, 'ECPublicKey');
  assert.equal(deployment.received_certificate_chain[0].public_key.ec_curve_name, 'secp256r1');
  assert.ok(deployment.path_validation_results.some((v) => v.was_validation_successful), 'chain verifies against the CA');
});
