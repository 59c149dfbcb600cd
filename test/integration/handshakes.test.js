'use strict';
// loadtest/handshakes.js: nginx's CPU per full TLS handshake, by OpenSSL, leaf
// key and group. One short round against the local nginx (OpenSSL 3.0 on
// Debian 12) and Debian 13's nginx in its cached root filesystem (OpenSSL 3.5):
// every pair negotiates the group it was set up for, the hybrid post-quantum
// group is measured only where the library has it, and every figure is a
// count of real handshakes. With --kit, the kit's own fronts (tls-stock,
// tls-tuned, plain; HTTP/3 where the nginx has it) on the same two: every
// connection a full handshake in the protocol asked for, the kit's default
// group negotiated.
const test = require('node:test');
const assert = require('node:assert/strict');
const { compareVersions } = require('../../lib/template');
const { loadDefaults } = require('../../lib/config');
const handshakes = require('../../loadtest/handshakes');
const { ensureRootfsAll } = require('../lib/nspawn');
const { runInRoot } = require('../../lib/chroot');

const ROOT = require('node:path').join(__dirname, '..', '..');

test('one round: local and Debian 13 fronts, each key and group negotiated and counted', { timeout: 5 * 60 * 1000 }, async () => {
  const { trixie } = await ensureRootfsAll(['trixie']);
  const doc = await handshakes.run({ rootfs: [trixie], rounds: 1, seconds: 1, log: () => {} });
  const { since } = loadDefaults().tunekit_openssl_versions.features.mlkem_hybrid;
  const byFront = (f) => doc.raw.find((r) => r.front === f);
  for (const front of ['local', require('node:path').basename(trixie)]) {
    const r = byFront(front);
    assert.ok(r, `no round for ${front}`);
    const hybrid = compareVersions(r.openssl, since) >= 0;
    const want = ['ec', 'rsa'].flatMap((k) => (hybrid ? ['X25519', 'X25519MLKEM768'] : ['X25519']).map((g) => `${k}/${g}`)).sort();
    assert.deepEqual(r.results.map((x) => `${x.key}/${x.group}`).sort(), want, `${front} (OpenSSL ${r.openssl})`);
    for (const x of r.results) {
      assert.equal(x.negotiated, x.group, `${front} ${x.key}: the server offered ${x.group}, the client negotiated ${x.negotiated}`);
      assert.ok(x.handshakes > 0 && x.cpuUs > 0 && x.usPerHandshake > 0, `${front} ${x.key}/${x.group}: ${JSON.stringify(x)}`);
    }
  }
  assert.ok(compareVersions(byFront(require('node:path').basename(trixie)).openssl, since) >= 0, 'Debian 13 carries OpenSSL 3.5 or later');
  const md = handshakes.markdown(doc);
  assert.match(md, /\| X25519MLKEM768 \| X25519MLKEM768 \|/);
});

test('--kit, one round: the kit\'s fronts on local and Debian 13 nginx, full handshakes, HTTP/3 where the module is', { timeout: 5 * 60 * 1000 }, async () => {
  const { trixie } = await ensureRootfsAll(['trixie']);
  const doc = await handshakes.run({ rootfs: [trixie], rounds: 1, seconds: 1, kit: true, log: () => {} });
  const { since } = loadDefaults().tunekit_openssl_versions.features.mlkem_hybrid;
  for (const front of ['local', require('node:path').basename(trixie)]) {
    const r = doc.raw.find((x) => x.front === front);
    assert.ok(r, `no round for ${front}`);
    const pairs = ['plain/h1', 'tls-stock/h1', 'tls-tuned/h1', ...(r.http3 ? ['tls-tuned-h3/h2', 'tls-tuned-h3/h3'] : [])];
    assert.deepEqual(r.results.map((x) => `${x.front}/${x.client}`).sort(), pairs.sort(), `${front} (nginx ${r.nginx})`);
    for (const x of r.results) {
      assert.ok(x.connections > 0 && x.cpuUs > 0, `${front} ${x.front}/${x.client}: ${JSON.stringify(x)}`);
      // Over TLS, every connection nginx logged was a full handshake.
      if (x.front !== 'plain') assert.deepEqual([x.full, x.resumed], [x.connections, 0], `${front} ${x.front}/${x.client}`);
    }
    // The kit offers the hybrid group first where the library has it; so does stock's OpenSSL default.
    const group = compareVersions(r.openssl, since) >= 0 ? 'X25519MLKEM768' : 'X25519';
    assert.deepEqual(r.groups, { 'tls-stock': group, 'tls-tuned': group }, `${front} (OpenSSL ${r.openssl})`);
  }
  assert.equal(doc.raw.find((x) => x.front === 'local').http3, false, 'Debian 12\'s nginx 1.22 has no HTTP/3');
  assert.equal(doc.raw.find((x) => x.front !== 'local').http3, true, 'Debian 13\'s nginx has HTTP/3');
  assert.match(handshakes.markdownKit(doc), /\| rootfs-trixie-\w+ \| 1\.26\.\d+ \| 3\.5\.\d+ \| \d+ \(\d+–\d+\) \| \d+ \(\d+–\d+\) \| \d\.\d\d/);
});

test('--kit over a loopback that drops 5% of UDP: an HTTP/3 curl that stalls is counted and replaced, and the measurement completes', { timeout: 4 * 60 * 1000 }, async () => {
  // Debian 13's curl runs on OpenSSL's own QUIC stack, which can stall for good
  // after a lost datagram (handshakes-kit.js); a loaded machine drops loopback
  // datagrams now and then. Here a network namespace of the test's own drops 5%
  // of them, and measurements go on until one has met a stall (2 minutes at most).
  const { trixie } = await ensureRootfsAll(['trixie']);
  const lossy = 'ip link set lo up && nft add table inet tunekit_loss && ' +
    'nft add chain inet tunekit_loss input \'{ type filter hook input priority 0; }\' && ' +
    'nft add rule inet tunekit_loss input meta l4proto udp numgen random mod 100 lt 5 drop && exec "$@"';
  const r = await runInRoot(trixie, 'node /tmp/tunekit-kit/test/fixtures/loadtest/h3-lossy.js 2 120', {
    binds: { [ROOT]: '/tmp/tunekit-kit' }, timeoutMs: 200 * 1000, prefix: ['unshare', '--net', 'sh', '-c', lossy, 'sh'],
  });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  assert.ok(lines.length && !lines.some((l) => l.error), `exit ${r.code}: ${r.stdout}\n${r.stderr}`);
  assert.deepEqual(lines.at(-1), { done: true }, `exit ${r.code}: ${r.stderr}`);
  const measured = lines.slice(0, -1);
  for (const m of measured) {
    assert.ok(m.connections > 0 && m.usPerConnection > 0, JSON.stringify(m));
    assert.deepEqual([m.full, m.resumed], [m.connections, 0], `every HTTP/3 connection nginx logged was a full handshake: ${JSON.stringify(m)}`);
    // Per connection over every curl started, the stalled ones too: nginx did their handshakes.
    assert.ok(m.usPerConnection <= m.cpuUs / m.connections, JSON.stringify(m));
  }
  assert.ok(measured.some((m) => m.stalled > 0), `no curl stalled in ${measured.length} measurements with 5% of UDP dropped: ${JSON.stringify(measured)}`);
});

test('bad options are refused by name', () => {
  assert.throws(() => handshakes.parseArgs(['--rounds', '0']), /--rounds must be a whole number of at least 1, not 0/);
  assert.throws(() => handshakes.parseArgs(['--nope']), /unknown option --nope; usage: node loadtest\/handshakes\.js/);
  assert.throws(() => handshakes.parseArgs(['--rootfs']), /--rootfs needs a value/);
  assert.throws(() => require('../../lib/chroot').chrootArgv('/nonexistent', 'true'), /\/nonexistent is not a root filesystem \(no bin\/sh\); build one with debootstrap/);
});
