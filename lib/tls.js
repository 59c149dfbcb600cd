'use strict';
// Throwaway certificates for the demo and the tests, made with the `openssl`
// CLI: a local CA and a leaf it signs for localhost and 127.0.0.1 (what the
// kit's HTTPS front serves): ECDSA P-256, or RSA 2048 for the `tls-stock`
// baseline of the TLS bench.
// Clients trust the CA file (`curl --cacert ca.pem`); nothing here is meant
// for a public host, where certbot issues the certificate.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { UsageError } = require('./errors');

// The names the leaf covers: the loopback the demo and the tests connect to.
const LEAF_NAMES = ['DNS:localhost', 'IP:127.0.0.1', 'IP:::1'];
// Short-lived on purpose: a leaked throwaway key is worthless within a month.
const DAYS = 30;

function openssl(args, what) {
  const r = spawnSync('openssl', args, { encoding: 'utf8' });
  if (r.error) throw new UsageError(`openssl could not run (${r.error.message}); install it: apt-get install openssl`);
  if (r.status !== 0) throw new UsageError(`openssl failed to ${what}:\nopenssl ${args.join(' ')}\n${r.stderr.trim()}`);
  return r.stdout;
}

// A private key, readable by its owner only (the key never lands world-readable).
function newKey(file, algorithm) {
  const opts = algorithm === 'ec' ? ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']
    : ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'];
  // Created 0600 first: openssl keeps the mode of a file it overwrites.
  fs.writeFileSync(file, '', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  openssl(['genpkey', ...opts, '-out', file], `make the key ${file}`);
  return file;
}

/** A local CA (ECDSA P-256): {cert, key} paths under dir. */
function makeCA(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const key = newKey(path.join(dir, 'ca.key'), 'ec');
  const cert = path.join(dir, 'ca.pem');
  openssl(['req', '-x509', '-new', '-key', key, '-out', cert, '-days', String(DAYS), '-sha256',
    '-subj', '/CN=tunekit throwaway CA',
    '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], `make the CA certificate ${cert}`);
  return { cert, key };
}

/**
 * A leaf for localhost/127.0.0.1/::1 signed by ca: {cert, key} (dir/leaf.pem
 * and dir/leaf.key unless paths are given). Its key is ECDSA P-256, or RSA
 * 2048 with algorithm 'rsa' (the tls-stock baseline: the key type most guides
 * still make).
 */
function makeLeaf(dir, ca, paths = {}, { algorithm = 'ec' } = {}) {
  const cert = paths.cert || path.join(dir, 'leaf.pem');
  const keyFile = paths.key || path.join(dir, 'leaf.key');
  for (const d of new Set([dir, path.dirname(cert), path.dirname(keyFile)])) fs.mkdirSync(d, { recursive: true });
  const key = newKey(keyFile, algorithm);
  openssl(['req', '-x509', '-new', '-key', key, '-CA', ca.cert, '-CAkey', ca.key, '-out', cert,
    '-days', String(DAYS), '-sha256', '-subj', '/CN=localhost',
    '-addext', `subjectAltName=${LEAF_NAMES.join(',')}`,
    '-addext', 'basicConstraints=critical,CA:FALSE',
    '-addext', `keyUsage=critical,${algorithm === 'rsa' ? 'digitalSignature,keyEncipherment' : 'digitalSignature'}`,
    '-addext', 'extendedKeyUsage=serverAuth'], `sign the leaf certificate ${cert}`);
  return { cert, key };
}

/**
 * Everything the demo and the tests need, under dir: {ca, leaf, rsa}, each
 * {cert, key}; leaf (ECDSA P-256) and rsa (RSA 2048) are signed by ca.
 */
function makeThrowaway(dir) {
  const ca = makeCA(dir);
  return {
    ca,
    leaf: makeLeaf(dir, ca),
    rsa: makeLeaf(dir, ca, { cert: path.join(dir, 'rsa.pem'), key: path.join(dir, 'rsa.key') }, { algorithm: 'rsa' }),
  };
}

module.exports = { makeCA, makeLeaf, makeThrowaway, LEAF_NAMES, DAYS };
