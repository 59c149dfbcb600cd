'use strict';
// `tunekit sysctl apply` against a real kernel, inside a fresh network namespace
// (unshare -n: net.core.somaxconn and the other per-netns keys are private to it)
// and a private mount namespace where /proc/sys/fs is read-only, as in a
// container. Nothing here can change the host's values: per-netns keys die with
// the namespace, global net.core keys are read-only or absent in a child netns,
// and the fs.* keys are behind the read-only bind mount (checked before the
// apply runs).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { createEnv, ROOT } = require('../../lib/template');
const config = require('../../lib/config');

const CLI = path.join(ROOT, 'bin/tunekit.js');

function canUnshare() {
  if (process.getuid() !== 0) return 'needs root (unshare -n -m)';
  const r = spawnSync('unshare', ['-n', '-m', 'true']);
  return r.status === 0 ? null : `unshare -n -m failed: ${String(r.stderr).trim()}`;
}
const skip = canUnshare() || false;

// Runs `script` in a new netns + mount ns with /proc/sys/fs read-only. The
// script aborts (exit 97) unless the read-only mount really holds.
function inNamespace(script) {
  const guard = [
    'set -e',
    'mount --bind /proc/sys/fs /proc/sys/fs',
    'mount -o remount,bind,ro /proc/sys/fs',
    // Writing the live value back would be harmless; it must fail all the same.
    'if (cat /proc/sys/fs/nr_open > /proc/sys/fs/nr_open) 2>/dev/null; then exit 97; fi',
    `[ "$(readlink /proc/self/ns/net)" != "${fs.readlinkSync('/proc/self/ns/net')}" ] || exit 98`,
  ].join('\n');
  const r = spawnSync('unshare', ['-n', '-m', 'sh', '-c', `${guard}\n${script}`], { encoding: 'utf8', timeout: 60000 });
  assert.notEqual(r.status, 97, 'the read-only /proc/sys/fs mount did not hold; refusing to apply');
  assert.notEqual(r.status, 98, 'not in a new network namespace; refusing to apply');
  return r;
}

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-sysctl-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function renderDropIn(dir) {
  const file = path.join(dir, '60-tunekit.conf');
  fs.writeFileSync(file, createEnv().render('sysctl/sysctl.conf.j2', config.resolve()));
  return file;
}

// The apply's JSON report, then one "key=value" line per key read back after it.
function applyIn(dropIn, before, readBack) {
  const r = inNamespace([
    before,
    'set +e',
    `"${process.execPath}" "${CLI}" sysctl apply "${dropIn}" --json > "${dropIn}.json"; echo "rc=$?"`,
    ...readBack.map((k) => `echo "${k}=$(cat /proc/sys/${k.replace(/\./g, '/')})"`),
  ].join('\n'));
  assert.equal(r.status, 0, r.stderr);
  const after = Object.fromEntries(r.stdout.trim().split('\n').map((l) => l.split('=')));
  const report = fs.existsSync(`${dropIn}.json`) && fs.statSync(`${dropIn}.json`).size
    ? JSON.parse(fs.readFileSync(`${dropIn}.json`, 'utf8'))
    : null;
  return { rc: Number(after.rc), after, report, stderr: r.stderr };
}

test('a live somaxconn of 65535 is kept; the drop-in persists 65535', { skip }, (t) => {
  const dropIn = renderDropIn(tmpdir(t));
  const { rc, after, report } = applyIn(dropIn, 'echo 65535 > /proc/sys/net/core/somaxconn', ['net.core.somaxconn']);
  assert.equal(rc, 0);
  assert.equal(after['net.core.somaxconn'], '65535');
  assert.equal(report.keys.find((k) => k.key === 'net.core.somaxconn').action, 'keep');
  assert.match(fs.readFileSync(dropIn, 'utf8'), /^net\.core\.somaxconn = 65535$/m);
});

test('a live somaxconn of 128 is raised to the kit value; per-netns keys are set, global ones reported', { skip }, (t) => {
  const vars = config.resolve();
  const dropIn = renderDropIn(tmpdir(t));
  const { rc, after, report } = applyIn(dropIn, [
    'echo 128 > /proc/sys/net/core/somaxconn',
    'echo 0 > /proc/sys/net/ipv4/tcp_tw_reuse',
  ].join('\n'), ['net.core.somaxconn', 'net.ipv4.tcp_tw_reuse', 'net.ipv4.ip_local_port_range', 'net.unix.max_dgram_qlen']);
  assert.equal(rc, 0, 'keys a namespace cannot set are not fatal');
  assert.equal(after['net.core.somaxconn'], String(vars.tunekit_sysctl_net_core_somaxconn));
  assert.equal(after['net.ipv4.tcp_tw_reuse'], String(vars.tunekit_sysctl_net_ipv4_tcp_tw_reuse));
  assert.equal(after['net.unix.max_dgram_qlen'], String(vars.tunekit_sysctl_net_unix_max_dgram_qlen));
  // The kit's range and the namespace's default (32768 60999), unioned.
  const [low, high] = String(vars.tunekit_sysctl_net_ipv4_ip_local_port_range).split(' ').map(Number);
  assert.deepEqual(after['net.ipv4.ip_local_port_range'].split(/\s+/).map(Number), [Math.min(low, 32768), Math.max(high, 60999)]);
  // netdev_max_backlog is global: the kernel registers it for the initial network
  // namespace only (net/core/sysctl_net_core.c), so a child netns has no such file.
  const backlog = report.keys.find((k) => k.key === 'net.core.netdev_max_backlog');
  assert.equal(backlog.action, 'unreadable', JSON.stringify(backlog));
  assert.equal(backlog.error, 'ENOENT');
  const desired = vars.tunekit_sysctl_net_core_netdev_max_backlog;
  const text = fs.readFileSync(dropIn, 'utf8');
  assert.match(text, new RegExp(`^# tunekit-apply: desired ${desired}; cannot be set here \\(ENOENT\\)`, 'm'));
  assert.match(text, new RegExp(`^-net\\.core\\.netdev_max_backlog = ${desired}$`, 'm'), 'kept, marked ignore-failure');
});

test('a global key above the live value on a read-only /proc/sys/fs is reported as EROFS, not fatal', { skip }, (t) => {
  const dir = tmpdir(t);
  const live = BigInt(fs.readFileSync('/proc/sys/fs/nr_open', 'utf8').trim());
  const dropIn = path.join(dir, 'fs.conf');
  fs.writeFileSync(dropIn, `net.core.somaxconn = 8192\nfs.nr_open = ${live + 1024n}\n`);
  const { rc, after, report } = applyIn(dropIn, '', ['net.core.somaxconn']);
  assert.equal(rc, 0);
  assert.equal(after['net.core.somaxconn'], '8192');
  const nrOpen = report.keys.find((k) => k.key === 'fs.nr_open');
  assert.equal(nrOpen.action, 'not-settable');
  assert.equal(nrOpen.error, 'EROFS');
  assert.equal(fs.readFileSync('/proc/sys/fs/nr_open', 'utf8').trim(), String(live), 'the host value is untouched');
  assert.match(fs.readFileSync(dropIn, 'utf8'), new RegExp(`^-fs\\.nr_open = ${live + 1024n}$`, 'm'));
});

test('a value the kernel refuses fails the run, names the key, and writes no drop-in', { skip }, (t) => {
  const dir = tmpdir(t);
  const dropIn = path.join(dir, 'bad.conf');
  // Above INT_MAX: proc_dointvec answers EINVAL.
  const text = 'net.core.somaxconn = 4096\nnet.unix.max_dgram_qlen = 99999999999\n';
  fs.writeFileSync(dropIn, text);
  const { rc, report } = applyIn(dropIn, 'echo 128 > /proc/sys/net/core/somaxconn', []);
  assert.equal(rc, 1);
  const bad = report.keys.find((k) => k.key === 'net.unix.max_dgram_qlen');
  assert.equal(bad.action, 'failed');
  assert.match(bad.why, /the kernel refused net\.unix\.max_dgram_qlen = 99999999999 \(EINVAL\)/);
  assert.equal(fs.readFileSync(dropIn, 'utf8'), text, 'no half-applied drop-in is persisted');
});
