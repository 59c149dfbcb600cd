'use strict';
// A host that fails to boot leaks nothing and hangs nothing. test/run.js runs
// test/fixtures/run/boot-fails.js as it runs every test file (its own process
// group, a limit, the sweep of its tag): one host booted and never stopped, and
// one that cannot boot (sshd masked) booted in one call with one that can. The
// file fails on the host that could not boot, with an error naming it, its
// address and ssh's own last error; it ends on its own, well within its limit
// (nothing keeps it alive); and nothing of any of its three hosts is left:
// processes, veths, mounts, routes, directories, nor anything carrying its tag.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runFile } = require('../run');
const { leftoversOf } = require('../lib/nspawn');

const skip = process.getuid() !== 0 ? 'needs root (systemd-nspawn)' : false;
const LIMIT_S = 900; // the fixture's three boots; it must end by itself long before

test('a host that cannot boot beside one that does, and one forgotten: the file fails by itself, nothing left', { skip, timeout: (LIMIT_S + 120) * 1000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-boot-failure-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  process.env.FIXTURE_HOSTS = path.join(dir, 'hosts');
  const chunks = [];
  const result = await runFile('test/fixtures/run/boot-fails.js', {
    lane: { name: 'e2e' }, tag: `b${crypto.randomBytes(4).toString('hex')}`, out: (c) => chunks.push(String(c)), live: false, limitS: LIMIT_S,
  });
  const out = chunks.join('');
  const hosts = fs.readFileSync(process.env.FIXTURE_HOSTS, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(hosts.map((h) => h.name.replace(/\d+$/, '')).sort(), ['tkbad', 'tkfgt', 'tkok']);
  assert.equal(new Set(hosts.map((h) => h.ip)).size, 3, `two hosts shared an address: ${hosts.map((h) => h.ip).join(' ')}`);
  assert.doesNotMatch(out, /exceeded its limit/, 'the file did not end by itself');
  assert.doesNotMatch(out, /left behind/);
  assert.deepEqual([result.counts.pass, result.counts.fail], [1, 1], out);
  const bad = hosts.find((h) => h.name.startsWith('tkbad'));
  assert.match(out, new RegExp(`ssh root@${bad.ip.replace(/\./g, '\\.')} to ${bad.name} \\(trixie, ${bad.ip.replace(/\./g, '\\.')}, veth ${bad.iface}\\) failed for 15 s \\(\\d+ tries\\); ssh's last error: .*Connection refused`));
  for (const h of hosts) assert.deepEqual(leftoversOf(h), [], `left of ${h.name}`);
});
