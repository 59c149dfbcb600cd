'use strict';
// A clone without `npm ci`, as a new user has it: every command that needs the
// kit's npm packages says in one line which are missing and the command that
// installs them (exit 2, no stack, nothing written); the runner, which uses
// node: built-ins alone, runs from a rendered app.json without any of them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { runCommand } = require('../lib/util');
const h = require('../fixtures/runner/harness');

const ROOT = path.resolve(__dirname, '../..');
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

// The project's files (tracked and new, not ignored) copied to a temp dir: no node_modules.
function cloneWithoutPackages(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-nopkg-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\n');
  for (const f of files) {
    const from = path.join(ROOT, f);
    if (!f || !fs.existsSync(from) || !fs.statSync(from).isFile()) continue;
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(from, path.join(dir, f));
  }
  assert.ok(!fs.existsSync(path.join(dir, 'node_modules')));
  return dir;
}

// Each command as a new user first types it (with what it would write into the clone).
const COMMANDS = [
  ['render', '--out', 'out'],
  ['run'],
  ['doctor'],
  ['demo'],
  ['loadtest', '--duration', '1', '--json', 'report.json'],
  ['bench', '--duration', '1'],
  ['profile', '--demo'],
];

test('on a clone without npm ci, every command that needs npm packages names them and `npm ci` in one line', async (t) => {
  const dir = cloneWithoutPackages(t);
  const before = fs.readdirSync(dir).sort();
  const all = Object.keys(PKG.dependencies).sort().join(', ');
  for (const argv of COMMANDS) {
    const r = await runCommand(process.execPath, [path.join(dir, 'bin/tunekit.js'), ...argv], { cwd: dir, timeoutMs: 60000 });
    const shown = `tunekit ${argv.join(' ')} → exit ${r.code}\n${r.out}`;
    assert.equal(r.code, 2, shown);
    assert.equal(r.stdout, '', shown);
    assert.equal(r.stderr, `tunekit: npm packages ${all} are not installed; run \`npm ci\` in ${dir}\n`, shown);
  }
  assert.deepEqual(fs.readdirSync(dir).sort(), before, 'nothing written');
});

test('on a clone without npm ci, help still prints and the runner serves from a rendered app.json', async (t) => {
  const dir = cloneWithoutPackages(t);
  const help = await runCommand(process.execPath, [path.join(dir, 'bin/tunekit.js'), 'help', 'run'], { cwd: dir, timeoutMs: 60000 });
  assert.equal(help.code, 0, help.out);
  assert.match(help.stdout, /^usage: tunekit run/);

  const sock = path.join(dir, 'app.sock');
  const file = h.writeConfig(dir, { workers: 1 });
  const argv = [process.execPath, path.join(dir, 'bin/tunekit.js'), 'run', '--config', file, '--listen', `unix:${sock}`];
  const r = h.start(t, { via: 'argv', argv, cwd: dir });
  await r.ready();
  const res = await h.request(sock, '/');
  assert.equal(res.status, 200);
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null });
});
