'use strict';
// The throwaway certificates (lib/tls.js): the leaf verifies against the CA
// with openssl and with Node, covers the loopback names for server auth, and
// its key is readable by its owner only.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { X509Certificate, createPrivateKey } = require('node:crypto');
const { spawnSync } = require('node:child_process');
const tls = require('../../lib/tls');

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const x509 = (file) => new X509Certificate(fs.readFileSync(file));

test('the leaf verifies against its CA (openssl verify -CAfile) and not against another CA', (t) => {
  const dir = tmpdir(t);
  const { ca, leaf } = tls.makeThrowaway(dir);
  const ok = spawnSync('openssl', ['verify', '-CAfile', ca.cert, '-purpose', 'sslserver', leaf.cert], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /: OK$/m);

  const other = tls.makeCA(path.join(dir, 'other'));
  const bad = spawnSync('openssl', ['verify', '-CAfile', other.cert, leaf.cert], { encoding: 'utf8' });
  assert.notEqual(bad.status, 0, 'a leaf must not verify against a CA that did not sign it');
});

test('the leaf is ECDSA P-256 for localhost, 127.0.0.1 and ::1, server auth, 30 days', (t) => {
  const dir = tmpdir(t);
  const { ca, leaf } = tls.makeThrowaway(dir);
  const cert = x509(leaf.cert);
  assert.equal(cert.publicKey.asymmetricKeyType, 'ec');
  assert.equal(cert.publicKey.asymmetricKeyDetails.namedCurve, 'prime256v1');
  assert.ok(cert.verify(x509(ca.cert).publicKey), 'signed by the CA key');
  assert.equal(cert.ca, false);
  assert.equal(x509(ca.cert).ca, true);
  assert.equal(cert.checkHost('localhost'), 'localhost');
  assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(cert.checkIP('::1'), '::1');
  assert.equal(cert.checkHost('example.com'), undefined);
  assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1'], 'extendedKeyUsage serverAuth only');
  const days = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / 86400e3;
  assert.equal(Math.round(days), tls.DAYS);
  // The key is the certificate's key.
  assert.ok(cert.checkPrivateKey(createPrivateKey(fs.readFileSync(leaf.key))));
});

test('the tls-stock certificate is RSA 2048, signed by the same CA, for localhost', (t) => {
  const { ca, rsa } = tls.makeThrowaway(tmpdir(t));
  const cert = x509(rsa.cert);
  assert.equal(cert.publicKey.asymmetricKeyType, 'rsa');
  assert.equal(cert.publicKey.asymmetricKeyDetails.modulusLength, 2048);
  assert.ok(cert.verify(x509(ca.cert).publicKey), 'signed by the CA key');
  assert.equal(cert.checkHost('localhost'), 'localhost');
  assert.ok(cert.checkPrivateKey(createPrivateKey(fs.readFileSync(rsa.key))));
});

test('private keys are readable by their owner only', (t) => {
  const { ca, leaf, rsa } = tls.makeThrowaway(tmpdir(t));
  for (const key of [ca.key, leaf.key, rsa.key]) {
    assert.equal(fs.statSync(key).mode & 0o777, 0o600, key);
  }
});
