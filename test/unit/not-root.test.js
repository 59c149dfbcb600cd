'use strict';
// The commands that need root, run for real as the unprivileged user nobody
// (setpriv): each says so in one line with the command to run as root, and does
// nothing where it cannot. `sysctl apply` exited 0 blaming "a container or a
// network namespace" and wrote the drop-in with every key marked "cannot be set
// here"; `doctor` said "point --nginx-conf" and hid nginx's own
// `open() "/run/nginx.pid" failed (13: Permission denied)`; render into /etc is
// the write render-write.test.js covers, here as /etc itself.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { nginxBinary } = require('../../lib/nginx');
const { nobody, skipNobody: skip, tunekit } = require('../lib/nobody');

/** A directory nobody owns (and may write), removed after the test. */
function nobodysDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-notroot-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.chownSync(dir, nobody.uid, nobody.gid);
  return dir;
}

test('sysctl apply as nobody: one line with the command as root, exit 2, nothing set and the drop-in untouched', { skip }, (t) => {
  const dir = nobodysDir(t);
  const file = path.join(dir, '60-tunekit.conf');
  // Keys the kit sets; the live values are whatever this kernel has: any raise would be refused.
  const text = '# a drop-in\nnet.core.somaxconn = 4096\nnet.core.netdev_max_backlog = 16384\nfs.file-max = 2097152\n';
  fs.writeFileSync(file, text);
  fs.chownSync(file, nobody.uid, nobody.gid);
  const live = fs.readFileSync('/proc/sys/net/core/netdev_max_backlog', 'utf8');
  const res = tunekit(['sysctl', 'apply', file]);
  assert.equal(res.status, 2, `exit 2:\n${res.stdout}${res.stderr}`);
  assert.equal(res.stdout, '', 'no table of keys "not settable"');
  assert.equal(res.stderr, `tunekit: sysctl apply sets kernel values in /proc/sys, which only root may write (you are nobody); nothing was set or written. ` +
    `Run it as root: sudo node bin/tunekit.js sysctl apply ${file} (--dry-run shows what it would change, as any user)\n`);
  assert.doesNotMatch(res.stderr, /container|network namespace/);
  assert.equal(fs.readFileSync(file, 'utf8'), text, 'the drop-in is as it was');
  assert.equal(fs.readFileSync('/proc/sys/net/core/netdev_max_backlog', 'utf8'), live);
  // --dry-run reads and decides, as any user.
  const dry = tunekit(['sysctl', 'apply', file, '--dry-run']);
  assert.equal(dry.status, 0, dry.stderr);
  assert.match(dry.stdout, /^net\.core\.somaxconn +\d+/m);
  assert.match(dry.stdout, /--dry-run: nothing written/);
});

test('doctor as nobody: nginx -T\'s own reason (13: Permission denied) and the command as root; as root the same nginx.conf reads', { skip: skip || (!nginxBinary() && 'nginx is not installed') }, (t) => {
  // A rendered tree root owns (the pid file and logs under it, as on a host).
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-notroot-tree-'));
  t.after(() => fs.rmSync(tree, { recursive: true, force: true }));
  fs.chmodSync(tree, 0o755);
  const r = tunekit(['render', '--out', tree, '--prefix', '--layer', 'nginx'], { asRoot: true });
  assert.equal(r.status, 0, r.stderr);
  const conf = path.join(tree, 'etc/nginx/nginx.conf');

  const res = tunekit(['doctor', '--nginx-conf', conf]);
  assert.equal(res.status, 1, `a failure, exit 1:\n${res.stdout}${res.stderr}`);
  const lines = res.stdout.split('\n');
  const i = lines.findIndex((l) => l.startsWith('FAIL  [read] '));
  assert.ok(i >= 0, res.stdout);
  assert.equal(lines[i], `FAIL  [read] nginx -T -c ${conf} failed: nginx: [emerg] open() "${tree}/run/nginx.pid" failed (13: Permission denied)`);
  assert.equal(lines[i + 1], `      fix: nginx -T needs root (it opens nginx's pid file and logs); run: sudo node bin/tunekit.js doctor --nginx-conf ${conf}`);
  assert.doesNotMatch(res.stdout, /point --nginx-conf/);

  const asRoot = tunekit(['doctor', '--nginx-conf', conf, '--json'], { asRoot: true });
  const { findings } = JSON.parse(asRoot.stdout);
  assert.deepEqual(findings.filter((f) => f.id === 'read'), [], 'as root, nginx -T reads it');
});

test('render into /etc as nobody: one line with the command as root, nothing written', { skip }, (t) => {
  const out = `/etc/tunekit-notroot-${process.pid}`;
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.22.1']);
  assert.equal(res.status, 2, `exit 2:\n${res.stdout}${res.stderr}`);
  assert.equal(res.stderr, `tunekit: --out ${out}: cannot write in /etc (permission denied (EACCES)); nothing was written; ` +
    `choose a path you can write to, or run it as root: sudo node bin/tunekit.js render --out ${out} --nginx-version 1.22.1\n`);
  assert.equal(fs.existsSync(out), false);
  assert.deepEqual(fs.readdirSync('/etc').filter((n) => n.includes('tunekit-notroot')), [], 'no staging directory left in /etc');
});
