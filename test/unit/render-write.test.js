'use strict';
// `tunekit render` writes its tree all or nothing (lib/files.js writeTree): a path
// it cannot write — a file where a directory goes, a directory of another user's —
// leaves --out exactly as it was (files of the user's kept, a replaced file put
// back, no directory or staging directory left) and says which path and why in one
// line, exit 2, no stack trace. The permission cases run the CLI as the
// unprivileged user nobody (setpriv), as a user on a shared host would.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { writeTree } = require('../../lib/files');
const { nobody, skipNobody, tunekit } = require('../lib/nobody');

/** As the test's own user, root; without it, as nobody. */
const AS_ROOT = { asRoot: true };

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-write-'));
  fs.chmodSync(dir, 0o755);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Everything under dir as it is: each path with its type, owner, mode and content. */
function snapshot(dir) {
  const out = [];
  const walk = (rel) => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      const r = path.join(rel, name);
      const st = fs.lstatSync(path.join(dir, r));
      const kind = st.isDirectory() ? 'dir' : 'file';
      out.push([r, kind, st.uid, (st.mode & 0o7777).toString(8), kind === 'file' ? fs.readFileSync(path.join(dir, r), 'utf8') : null]);
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}

function assertOneLine(res) {
  assert.equal(res.status, 2, `exit 2:\n${res.stdout}${res.stderr}`);
  assert.equal(res.stdout, '');
  assert.equal(res.stderr.trim().split('\n').length, 1, `one line:\n${res.stderr}`);
  assert.doesNotMatch(res.stderr, /\bat \S+ \(|writeAtomic|node:internal/, 'no stack trace');
}

function chownTree(dir, uid, gid) {
  fs.chownSync(dir, uid, gid);
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else fs.chownSync(p, uid, gid);
  }
}

test('a file where the tree has a directory: nothing written, the user\'s files kept, one line naming it', (t) => {
  const out = path.join(tmpdir(t), 'host');
  fs.mkdirSync(path.join(out, 'etc/nginx'), { recursive: true });
  fs.writeFileSync(path.join(out, 'etc/systemd'), 'a file of the user\'s\n');
  fs.writeFileSync(path.join(out, 'etc/nginx/nginx.conf'), 'the user\'s nginx.conf\n');
  fs.writeFileSync(path.join(out, 'notes.txt'), 'mine\n');
  const before = snapshot(out);
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.22.1'], AS_ROOT);
  assertOneLine(res);
  assert.equal(res.stderr.trim(), `tunekit: --out ${out}: cannot write ${out}/etc/systemd (it is a file, where the tree has a directory); ` +
    `nothing under ${out} was changed; move ${out}/etc/systemd away, or choose another path`);
  assert.deepEqual(snapshot(out), before, 'the tree is as it was: no file of the kit\'s, no staging directory');
});

test('a good render over a tree of the user\'s: the user\'s files kept, the kit\'s replaced, no staging directory left', (t) => {
  const out = path.join(tmpdir(t), 'host');
  fs.mkdirSync(path.join(out, 'etc/nginx/conf.d'), { recursive: true });
  fs.writeFileSync(path.join(out, 'etc/nginx/nginx.conf'), 'old\n');
  fs.writeFileSync(path.join(out, 'etc/nginx/conf.d/mine.conf'), 'mine\n');
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.22.1'], AS_ROOT);
  assert.equal(res.status, 0, res.stderr);
  const written = res.stdout.split('\n').filter((l) => /^ {2}\S/.test(l)).map((l) => l.trim()).sort();
  const files = snapshot(out).filter((e) => e[1] === 'file').map((e) => e[0]);
  assert.deepEqual(files.filter((f) => f !== 'etc/nginx/conf.d/mine.conf').sort(), written, 'the tree holds what render listed, and the user\'s file');
  assert.equal(fs.readFileSync(path.join(out, 'etc/nginx/conf.d/mine.conf'), 'utf8'), 'mine\n');
  assert.match(fs.readFileSync(path.join(out, 'etc/nginx/nginx.conf'), 'utf8'), /^worker_processes /m);
  assert.deepEqual(fs.readdirSync(out).filter((n) => n.startsWith('.')), [], 'no staging directory left');
});

test('as nobody, a directory of root\'s half way through the tree: the files moved so far are put back, one line with the command as root', { skip: skipNobody }, (t) => {
  const out = path.join(tmpdir(t), 'host');
  // The user's tree: their nginx.conf (replaced first, in the tree's order), then
  // etc/systemd, which root made and nobody may not write into.
  fs.mkdirSync(path.join(out, 'etc/nginx'), { recursive: true });
  fs.writeFileSync(path.join(out, 'etc/nginx/nginx.conf'), 'the user\'s nginx.conf\n');
  chownTree(out, nobody.uid, nobody.gid);
  fs.mkdirSync(path.join(out, 'etc/systemd'), { mode: 0o755 });
  const before = snapshot(out);
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.22.1']);
  assertOneLine(res);
  assert.equal(res.stderr.trim(), `tunekit: --out ${out}: cannot create ${out}/etc/systemd/system (permission denied (EACCES)); ` +
    `nothing under ${out} was changed; choose a path you can write to, or run it as root: sudo node bin/tunekit.js render --out ${out} --nginx-version 1.22.1`);
  assert.deepEqual(snapshot(out), before, 'nginx.conf is the user\'s again, the kit\'s new files and directories are gone');
});

test('as nobody, a tree root made: one line, no stack trace (it was "EACCES ... at writeAtomic"), nothing changed', { skip: skipNobody }, (t) => {
  const out = path.join(tmpdir(t), 'host');
  fs.mkdirSync(path.join(out, 'etc/nginx'), { recursive: true });
  fs.writeFileSync(path.join(out, 'etc/nginx/nginx.conf'), 'root\'s\n');
  const before = snapshot(out);
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.22.1']);
  assertOneLine(res);
  assert.match(res.stderr, new RegExp(`^tunekit: --out ${out}: cannot write in ${out} \\(permission denied \\(EACCES\\)\\); nothing under ${out} was changed; ` +
    'choose a path you can write to, or run it as root: sudo node bin/tunekit\\.js render '));
  assert.deepEqual(snapshot(out), before);
  // A new --out in a directory nobody may not write: nothing made there either.
  const parent = tmpdir(t);
  const res2 = tunekit(['render', '--out', path.join(parent, 'a/b'), '--nginx-version', '1.22.1']);
  assertOneLine(res2);
  assert.match(res2.stderr, new RegExp(`cannot create ${parent}/a \\(permission denied \\(EACCES\\)\\)`));
  assert.deepEqual(fs.readdirSync(parent), []);
});

test('render --target kubernetes: a directory where a manifest goes, nothing written', (t) => {
  const out = path.join(tmpdir(t), 'k8s');
  fs.mkdirSync(path.join(out, 'service.yaml'), { recursive: true });
  const before = snapshot(out);
  const res = tunekit(['render', '--target', 'kubernetes', '--out', out, '--nginx-version', '1.22.1'], AS_ROOT);
  assertOneLine(res);
  assert.match(res.stderr, new RegExp(`cannot write ${out}/service\\.yaml \\(it is a directory, where the tree has a file\\); nothing under ${out} was changed`));
  assert.deepEqual(snapshot(out), before);
});

test('writeTree: a new root appears whole by one rename; a failed build leaves no root, no parent it made', (t) => {
  const dir = tmpdir(t);
  const root = path.join(dir, 'p/q/tree');
  const files = writeTree(root, (stage) => {
    fs.mkdirSync(path.join(stage, 'a'), { mode: 0o750 });
    fs.writeFileSync(path.join(stage, 'a/x'), 'x');
  });
  assert.deepEqual(files, [path.join(root, 'a/x')]);
  assert.equal(fs.statSync(path.join(root, 'a')).mode & 0o777, 0o750);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'p/q')), ['tree'], 'no staging directory beside it');

  const other = path.join(dir, 'r/s/tree');
  assert.throws(() => writeTree(other, (stage) => {
    fs.writeFileSync(path.join(stage, 'x'), 'x');
    fs.writeFileSync(path.join(stage, 'no/such/dir/y'), 'y');
  }), (err) => err.name === 'KitError' && err.message === `${other}: cannot write ${other}/no/such/dir/y (no such file (ENOENT)); nothing was written; choose a path where you can write`);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['p'], 'r/ and r/s/ removed again');
});
