'use strict';
// The kit's tunekit_files module (plugins/modules/), run as Ansible runs a
// module (the pinned Python in .venv/, its arguments in a JSON file): every role
// writes its rendered files with it, in one module run. What a deploy relies on:
// files written with their content and mode, parents created when asked; a run
// that changes nothing writes nothing and reports nothing changed; a changed file
// is replaced whole (renamed over, no temporary file left); check mode writes
// nothing; --diff shows before and after; bad input names the file and the fix.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT } = require('../../lib/template');

const PYTHON = path.join(ROOT, '.venv/bin/python');
const MODULE = path.join(ROOT, 'plugins/modules/tunekit_files.py');

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-files-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// Runs the module once; returns its JSON result (failed ones included).
function run(t, dir, args, { check = false, diff = false } = {}) {
  const argsFile = path.join(dir, `args-${process.hrtime.bigint()}.json`);
  fs.writeFileSync(argsFile, JSON.stringify({ ANSIBLE_MODULE_ARGS: { ...args, _ansible_check_mode: check, _ansible_diff: diff } }));
  const r = spawnSync(PYTHON, [MODULE, argsFile], { encoding: 'utf8' });
  fs.rmSync(argsFile);
  assert.ok(!r.error, `${PYTHON} did not run (${r.error && r.error.code}); run: node bin/setup.js test`);
  const line = r.stdout.trim().split('\n').pop();
  try {
    return JSON.parse(line);
  } catch {
    assert.fail(`the module printed no JSON (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
}

const modeOf = (p) => (fs.statSync(p).mode & 0o777).toString(8);

test('writes new files with their content and mode, parents created; the same run again changes nothing', (t) => {
  const dir = tmpdir(t);
  const a = path.join(dir, 'etc/nginx/nginx.conf');
  const b = path.join(dir, 'etc/nginx/tunekit/site.conf');
  const files = [{ dest: a, content: 'events {}\n', mode: '0644' }, { dest: b, content: 'server {}\n', mode: '0640' }];
  const first = run(t, dir, { files, parents: true });
  assert.equal(first.failed, undefined, first.msg);
  assert.equal(first.changed, true);
  assert.deepEqual(first.changed_files, [a, b]);
  assert.deepEqual(first.created_dirs, [path.join(dir, 'etc'), path.join(dir, 'etc/nginx'), path.join(dir, 'etc/nginx/tunekit')]);
  assert.equal(fs.readFileSync(a, 'utf8'), 'events {}\n');
  assert.equal(fs.readFileSync(b, 'utf8'), 'server {}\n');
  assert.deepEqual([modeOf(a), modeOf(b), modeOf(path.dirname(b))], ['644', '640', '755']);

  const inode = fs.statSync(a).ino;
  const mtime = fs.statSync(a).mtimeMs;
  const again = run(t, dir, { files, parents: true });
  assert.equal(again.changed, false, JSON.stringify(again));
  assert.deepEqual(again.changed_files, []);
  assert.equal(fs.statSync(a).ino, inode, 'an unchanged file was rewritten');
  assert.equal(fs.statSync(a).mtimeMs, mtime, 'an unchanged file was touched');
});

test('a changed file is replaced whole and alone; a mode-only change is applied; no temporary file is left', (t) => {
  const dir = tmpdir(t);
  const a = path.join(dir, 'a.conf');
  const b = path.join(dir, 'b.conf');
  run(t, dir, { files: [{ dest: a, content: 'one\n', mode: '0644' }, { dest: b, content: 'two\n', mode: '0644' }] });
  const inodeA = fs.statSync(a).ino;
  const r = run(t, dir, { files: [{ dest: a, content: 'one, changed\n', mode: '0644' }, { dest: b, content: 'two\n', mode: '0600' }] }, { diff: true });
  assert.equal(r.changed, true);
  assert.deepEqual(r.changed_files, [a, b]);
  assert.equal(fs.readFileSync(a, 'utf8'), 'one, changed\n');
  assert.notEqual(fs.statSync(a).ino, inodeA, 'the new content was not renamed over the old file');
  assert.equal(modeOf(b), '600');
  assert.deepEqual(r.diff, [{ before_header: a, after_header: a, before: 'one\n', after: 'one, changed\n' }]);
  assert.deepEqual(fs.readdirSync(dir).filter((f) => f.endsWith('.conf')).sort(), ['a.conf', 'b.conf']);
  assert.deepEqual(fs.readdirSync(dir).filter((f) => f.includes('.tunekit')), [], 'a temporary file was left');
});

test('check mode reports what would change and writes nothing', (t) => {
  const dir = tmpdir(t);
  const old = path.join(dir, 'old.conf');
  fs.writeFileSync(old, 'before\n', { mode: 0o644 });
  const fresh = path.join(dir, 'new/dir/file.conf');
  const r = run(t, dir, {
    files: [{ dest: old, content: 'after\n', mode: '0644' }, { dest: fresh, content: 'x\n', mode: '0644' }],
    parents: true,
  }, { check: true, diff: true });
  assert.equal(r.changed, true);
  assert.deepEqual(r.changed_files, [old, fresh]);
  assert.deepEqual(r.created_dirs, [path.join(dir, 'new'), path.join(dir, 'new/dir')]);
  assert.deepEqual(r.diff.map((d) => [d.before, d.after]), [['before\n', 'after\n'], ['', 'x\n']]);
  assert.equal(fs.readFileSync(old, 'utf8'), 'before\n');
  assert.equal(fs.existsSync(path.join(dir, 'new')), false, 'check mode created a directory');
  // A directory an earlier task would have created (not in check mode): the file is new, not an error.
  const later = path.join(dir, 'made/by/an/earlier/task.conf');
  const r2 = run(t, dir, { files: [{ dest: later, content: 'x\n', mode: '0640', group: 'no-such-group-yet' }] }, { check: true });
  assert.equal(r2.failed, undefined, r2.msg);
  assert.deepEqual([r2.changed, r2.changed_files, r2.created_dirs], [true, [later], []]);
});

test('relocate writes each file at its path under the scratch directory', (t) => {
  const dir = tmpdir(t);
  const scratch = path.join(dir, 'scratch');
  fs.mkdirSync(scratch);
  const r = run(t, dir, {
    files: [{ dest: '/etc/nginx/tunekit/upstream.conf', content: 'upstream x {}\n', mode: '0644' }],
    relocate: { from: '/etc/nginx', to: scratch },
    parents: true,
  });
  assert.equal(r.failed, undefined, r.msg);
  assert.deepEqual(r.changed_files, ['/etc/nginx/tunekit/upstream.conf']);
  assert.equal(fs.readFileSync(path.join(scratch, 'tunekit/upstream.conf'), 'utf8'), 'upstream x {}\n');
});

test('bad input fails naming the file and the fix, and writes nothing', (t) => {
  const dir = tmpdir(t);
  const ok = path.join(dir, 'ok.conf');
  const cases = [
    [{ files: [{ dest: ok, content: 'x', mode: '0644' }, { dest: path.join(dir, 'no/such/dir/f.conf'), content: 'x', mode: '0644' }] },
      /the directory .*no\/such\/dir of .*f\.conf does not exist \(create it first, or set parents: true\)/],
    [{ files: [{ dest: '/etc/passwd', content: 'x', mode: '0644' }], relocate: { from: '/etc/nginx', to: dir } },
      /\/etc\/passwd is not under relocate\.from \(\/etc\/nginx\)/],
    [{ files: [{ dest: dir, content: 'x', mode: '0644' }] }, /exists and is not a regular file; remove it or choose another dest/],
    [{ files: [{ dest: ok, content: 'x' }] }, /files\[0\] \(.*ok\.conf\): missing \['mode'\]/],
    [{ files: [{ dest: ok, content: 'x', mode: '0644', src: 'a.j2' }] }, /files\[0\] \(.*ok\.conf\): unknown keys \['src'\]/],
  ];
  for (const [args, message] of cases) {
    const r = run(t, dir, args);
    assert.equal(r.failed, true, JSON.stringify(args));
    assert.match(r.msg, message);
  }
  assert.equal(fs.existsSync(ok), false, 'a failed run wrote a file before the one it failed on');
});
