'use strict';
// The sysctl apply step against a fake /proc/sys (--proc): never lowers, the
// port range widens, tcp_tw_reuse modes rank 0 < 2 < 1, keys that cannot be set
// are reported and written with "-", a second apply changes nothing.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const sysctl = require('../../lib/sysctl');
const { createEnv, ROOT } = require('../../lib/template');
const config = require('../../lib/config');

const CLI = path.join(ROOT, 'bin/tunekit.js');

function fakeProc(t, values) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-proc-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [key, value] of Object.entries(values)) {
    const file = path.join(dir, ...key.split('.'));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${value}\n`);
  }
  return dir;
}

function read(dir, key) {
  return fs.readFileSync(path.join(dir, ...key.split('.')), 'utf8').trim();
}

function cli(args) {
  const r = spawnSync(process.execPath, [CLI, 'sysctl', ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('a number is raised when the live value is lower and kept when it is higher', () => {
  assert.deepEqual(sysctl.higher('net.core.somaxconn', '4096', '128').effective, '4096');
  assert.equal(sysctl.higher('net.core.somaxconn', '4096', '128').action, 'raise');
  assert.deepEqual(sysctl.higher('net.core.somaxconn', '4096', '65535').effective, '65535');
  assert.equal(sysctl.higher('net.core.somaxconn', '4096', '65535').action, 'keep');
  // systemd sets fs.file-max to 2^63-1: compared exactly, not as a float.
  const big = '9223372036854775807';
  assert.equal(sysctl.higher('fs.file-max', '2097152', big).effective, big);
  assert.equal(sysctl.higher('fs.file-max', '9223372036854775807', '9223372036854775806').action, 'raise');
});

test('the port range only widens: the union of the live and the desired range', () => {
  assert.equal(sysctl.higher('net.ipv4.ip_local_port_range', '10240 65535', '32768 60999').effective, '10240 65535');
  assert.equal(sysctl.higher('net.ipv4.ip_local_port_range', '10240 60000', '1024 65000').effective, '1024 65000');
  assert.equal(sysctl.higher('net.ipv4.ip_local_port_range', '10240 60000', '1024 65000').action, 'keep');
  assert.equal(sysctl.higher('net.ipv4.ip_local_port_range', '10240 65535', '20000 65000').effective, '10240 65535');
  assert.throws(() => sysctl.higher('net.ipv4.ip_local_port_range', '9000', '32768 60999'), /low high/);
});

test('tcp_tw_reuse modes rank 0 < 2 < 1: the broader reuse wins', () => {
  const key = 'net.ipv4.tcp_tw_reuse';
  assert.deepEqual([sysctl.higher(key, '2', '0').effective, sysctl.higher(key, '2', '0').action], ['2', 'raise']);
  assert.deepEqual([sysctl.higher(key, '2', '1').effective, sysctl.higher(key, '2', '1').action], ['1', 'keep']);
  assert.deepEqual([sysctl.higher(key, '1', '2').effective, sysctl.higher(key, '1', '2').action], ['1', 'raise']);
  assert.equal(sysctl.higher(key, '2', '2').action, 'same');
  assert.throws(() => sysctl.higher(key, '3', '2'), /0, 1 or 2/);
});

test('the rendered drop-in applies: raises, keeps, reports a missing key, and a second apply changes nothing', (t) => {
  const vars = config.resolve();
  const text = createEnv().render('sysctl/sysctl.conf.j2', vars);
  const proc = fakeProc(t, {
    'net.core.somaxconn': 65535,
    'net.ipv4.tcp_max_syn_backlog': 128,
    'net.ipv4.ip_local_port_range': '32768\t60999',
    'net.ipv4.tcp_tw_reuse': 1,
    'net.core.rmem_max': 212992,
    'net.core.wmem_max': 212992,
    'net.core.wmem_default': 212992,
    'net.unix.max_dgram_qlen': 512,
    'fs.file-max': '9223372036854775807',
    'fs.nr_open': 1048576,
    // net.core.netdev_max_backlog missing, as inside a network namespace
  });
  const dropIn = path.join(proc, '60-tunekit.conf');
  fs.writeFileSync(dropIn, text);

  const first = cli(['apply', dropIn, '--proc', proc, '--json']);
  assert.equal(first.code, 0, first.stderr);
  const report = JSON.parse(first.stdout);
  const by = Object.fromEntries(report.keys.map((k) => [k.key, k]));
  assert.equal(report.changed, true);
  assert.equal(read(proc, 'net.core.somaxconn'), '65535', 'a higher live somaxconn is never lowered');
  assert.equal(by['net.core.somaxconn'].action, 'keep');
  assert.equal(read(proc, 'net.ipv4.tcp_max_syn_backlog'), String(vars.tunekit_sysctl_net_ipv4_tcp_max_syn_backlog));
  assert.equal(read(proc, 'net.ipv4.ip_local_port_range'), '10240\t65535');
  assert.equal(read(proc, 'net.ipv4.tcp_tw_reuse'), '1', 'mode 1 is broader than the desired 2');
  assert.equal(read(proc, 'fs.file-max'), '9223372036854775807');
  assert.equal(by['net.core.netdev_max_backlog'].action, 'unreadable');
  assert.equal(by['net.core.netdev_max_backlog'].error, 'ENOENT');

  const written = fs.readFileSync(dropIn, 'utf8');
  assert.match(written, /^net\.core\.somaxconn = 65535$/m, 'the drop-in persists the kept value, so a reboot does not lower it');
  assert.match(written, /^# tunekit-apply: desired 4096; live 65535 is higher/m);
  assert.match(written, /^-net\.core\.netdev_max_backlog = 16384$/m, 'a key that cannot be set here is skipped at boot too');
  assert.match(written, /^fs\.file-max = 9223372036854775807$/m);
  assert.match(written, /^# fs\.file-max|^# Open files in the whole system/m, 'comments stay');

  const second = cli(['apply', dropIn, '--proc', proc, '--json']);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(JSON.parse(second.stdout).changed, false);
  assert.equal(fs.readFileSync(dropIn, 'utf8'), written, 'applying the effective drop-in again is a no-op');
  // The note keeps what the template asked for.
  assert.equal(JSON.parse(second.stdout).keys.find((k) => k.key === 'net.core.somaxconn').desired, '4096');
});

test('--dry-run writes neither /proc/sys nor the drop-in', (t) => {
  const proc = fakeProc(t, { 'net.core.somaxconn': 128 });
  const dropIn = path.join(proc, 'x.conf');
  fs.writeFileSync(dropIn, 'net.core.somaxconn = 4096\n');
  const r = cli(['apply', dropIn, '--proc', proc, '--dry-run']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /net\.core\.somaxconn\s+128\s+4096\s+4096\s+raise/);
  assert.equal(read(proc, 'net.core.somaxconn'), '128');
  assert.equal(fs.readFileSync(dropIn, 'utf8'), 'net.core.somaxconn = 4096\n');
});

test('--out writes the effective drop-in elsewhere and leaves the template output alone', (t) => {
  const proc = fakeProc(t, { 'net.core.somaxconn': 128 });
  const desired = path.join(proc, 'desired.conf');
  const out = path.join(proc, 'effective.conf');
  fs.writeFileSync(desired, '# c\nnet.core.somaxconn = 4096\n');
  const r = cli(['apply', desired, '--out', out, '--proc', proc]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(read(proc, 'net.core.somaxconn'), '4096');
  assert.equal(fs.readFileSync(out, 'utf8'), '# c\nnet.core.somaxconn = 4096\n');
  assert.equal(fs.readFileSync(desired, 'utf8'), '# c\nnet.core.somaxconn = 4096\n');
});

test('a key that cannot be read is reported, not fatal, and skipped at boot', (t) => {
  const proc = fakeProc(t, { 'net.core.somaxconn': 128 });
  // A directory where the key's file should be: reading it fails (EISDIR).
  fs.mkdirSync(path.join(proc, 'fs', 'nr_open'), { recursive: true });
  const dropIn = path.join(proc, 'x.conf');
  fs.writeFileSync(dropIn, 'net.core.somaxconn = 4096\nfs.nr_open = 2097152\n');
  const r = cli(['apply', dropIn, '--proc', proc, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const keys = JSON.parse(r.stdout).keys;
  assert.equal(keys[0].action, 'raise');
  assert.equal(keys[1].action, 'unreadable');
  assert.equal(keys[1].error, 'EISDIR');
  assert.match(fs.readFileSync(dropIn, 'utf8'), /^-fs\.nr_open = 2097152$/m);
  // Once the key is readable again, the "-" the apply step added is dropped.
  fs.rmSync(path.join(proc, 'fs', 'nr_open'), { recursive: true });
  fs.writeFileSync(path.join(proc, 'fs', 'nr_open'), '1048576\n');
  const again = cli(['apply', dropIn, '--proc', proc, '--json']);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(read(proc, 'fs.nr_open'), '2097152');
  assert.match(fs.readFileSync(dropIn, 'utf8'), /^fs\.nr_open = 2097152$/m);
});

test('a drop-in that is not "key = value", or sets a key twice, is refused with the line', (t) => {
  const proc = fakeProc(t, {});
  const bad = path.join(proc, 'bad.conf');
  fs.writeFileSync(bad, '# ok\nnet.core.somaxconn 4096\n');
  let r = cli(['apply', bad, '--proc', proc]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.conf:2: "net\.core\.somaxconn 4096" is not "key = value"/);
  fs.writeFileSync(bad, 'net.core.somaxconn = 1\nnet/core/somaxconn = 2\n');
  r = cli(['apply', bad, '--proc', proc]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /net\.core\.somaxconn is set twice \(lines 1 and 2\)/);
  r = cli(['apply', path.join(proc, 'missing.conf')]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /cannot read the drop-in .*missing\.conf: no such file \(ENOENT\)/);
});

test('every key of the drop-in template is commented with its scope and default', () => {
  const text = fs.readFileSync(path.join(ROOT, 'sysctl/sysctl.conf.j2'), 'utf8');
  const blocks = text.split(/\n\n+/).filter((b) => /^[a-z]+\.[a-z0-9_.-]+ = /m.test(b));
  const keys = blocks.flatMap((b) => b.match(/^[a-z]+\.[a-z0-9_.-]+(?= = )/gm));
  assert.deepEqual(keys.sort(), [
    'fs.file-max', 'fs.nr_open', 'net.core.netdev_max_backlog', 'net.core.rmem_max',
    'net.core.somaxconn', 'net.core.wmem_default', 'net.core.wmem_max',
    'net.ipv4.ip_local_port_range', 'net.ipv4.tcp_max_syn_backlog', 'net.ipv4.tcp_tw_reuse',
    'net.unix.max_dgram_qlen',
  ]);
  for (const b of blocks) {
    assert.match(b, /Scope: (per netns|global)/, `scope stated for ${b.split('\n').pop()}`);
    assert.match(b, /^# Default: /m, `default stated for ${b.split('\n').pop()}`);
  }
});

// The role copies only tunekit_sysctl_kit_files to the host (no node_modules,
// nothing else of the kit): the command, its refusals included, runs from them.
test('`tunekit sysctl apply` runs from the files the role copies to the host, and nothing else', (t) => {
  const YAML = require('yaml');
  const { tunekit_sysctl_kit_files: files } = YAML.parse(fs.readFileSync(path.join(ROOT, 'roles/tunekit_sysctl/vars/main.yml'), 'utf8'));
  const kit = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-kit-'));
  t.after(() => fs.rmSync(kit, { recursive: true, force: true }));
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(kit, f)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, f), path.join(kit, f));
  }
  const onHost = (args) => spawnSync(process.execPath, [path.join(kit, 'bin/tunekit.js'), 'sysctl', ...args], { encoding: 'utf8', cwd: kit });
  const proc = fakeProc(t, { 'net.core.somaxconn': 128 });
  const dropIn = path.join(proc, 'x.conf');
  fs.writeFileSync(dropIn, 'net.core.somaxconn = 4096\n');
  let r = onHost(['apply', dropIn, '--proc', proc, '--json']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(read(proc, 'net.core.somaxconn'), '4096');
  for (const args of [['apply', path.join(proc, 'missing.conf')], ['apply', dropIn, '--bogus']]) {
    r = onHost(args);
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /^tunekit: /);
  }
});
