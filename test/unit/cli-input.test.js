'use strict';
// Bad input, command by command, as a user types it: a value of the wrong type
// for each kind of variable (through --vars, on every command that reads the
// definition), a negative number, an unknown flag and a path that does not
// exist. Each gets one line on stderr that names what was wrong, exit code 2,
// no stack trace, and nothing written: the commands run in an empty directory
// that must stay empty but for the vars file, and their output paths point
// into it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const types = require('../../lib/config/types');
const { runCommand, listFiles } = require('../lib/util');
const { ROOT } = require('../../lib/template');

const CLI = path.join(ROOT, 'bin/tunekit.js');
const typeOf = types.readTypes(config.defaultFiles());

// One variable of each kind of the grammar, the first the definition lists,
// and a value YAML gives a shape that kind refuses.
const WRONG = ['abc', -3, { a: 1 }];
const byKind = new Map();
for (const [key, type] of Object.entries(typeOf)) {
  const value = WRONG.find((w) => types.mismatch(w, type) !== null);
  for (const { kind } of type.alternatives) {
    if (!byKind.has(kind) && value !== undefined) byKind.set(kind, { key, type, value });
  }
}

// The commands that resolve the definition, with what makes each write
// something if it got that far (an output directory, a report file).
const READS_DEFINITION = {
  run: (dir) => ['--listen', `unix:${path.join(dir, 'app.sock')}`],
  render: (dir) => ['--out', path.join(dir, 'out')],
  loadtest: (dir) => ['--duration', '1', '--json', path.join(dir, 'report.json')],
  bench: (dir) => ['--duration', '1', '--json', path.join(dir, 'bench.json')],
};

// Per command: a negative number, an unknown flag, a missing path, and the
// words the one line must hold.
const M = '/nonexistent-tunekit';
const CASES = [
  ['run', ['--workers', '-3'], /tunekit_app_workers=-3 \(from --workers -3\)/],
  ['run', ['--drain-timeout', 'soon'], /tunekit_app_drain_timeout_s=soon \(from --drain-timeout soon\)/],
  ['run', ['--bogus'], /Unknown option '--bogus'; see tunekit run --help/],
  ['run', ['--config', `${M}/app.json`], /settings file \/nonexistent-tunekit\/app.json: no such file/],
  ['render', ['--out', 'DIR/out', '--set', 'tunekit_app_workers=-3'], /tunekit_app_workers=-3 \(from --set/],
  ['render', ['--out', 'DIR/out', '--bogus'], /Unknown option '--bogus'; see tunekit render --help/],
  ['render', ['--out', 'DIR/out', '--vars', `${M}/v.yml`], /variables file \/nonexistent-tunekit\/v.yml: no such file/],
  ['render', ['--out', '/proc/tunekit/out'], /--out \/proc\/tunekit\/out: cannot create \/proc\/tunekit/],
  ['render', ['--out', 'DIR/out', '--nginx-version', '1.16.1'], /1\.16\.1.*1\.18/],
  // A host path the runner would refuse later: refused by every render, not only with --prefix/--check.
  ['render', ['--out', 'DIR/out', '--set', 'tunekit_socket_path=app.sock'], /^tunekit: tunekit_socket_path=app\.sock must be an absolute path .*; give one that starts with \/$/],
  ['render', ['--out', 'DIR/out', '--layer', 'systemd', '--set', 'tunekit_app_install_dir=opt/app'], /^tunekit: tunekit_app_install_dir=opt\/app must be an absolute path/],
  ['demo', ['--workers', '-3'], /--workers -3: expected a whole number/],
  ['demo', ['--connections', 'abc'], /--connections abc: expected a whole number/],
  ['demo', ['--bogus'], /Unknown option '--bogus'; see tunekit demo --help/],
  ['demo', ['--stop', `${M}/stack`], /\/nonexistent-tunekit\/stack is not a stack/],
  ['loadtest', ['--connections', '-3'], /--connections must be a whole number >= 1 \(got "-3"\)/],
  ['loadtest', ['--rate', 'abc'], /--rate must be a number > 0 \(got "abc"\)/],
  ['loadtest', ['--bogus'], /Unknown option '--bogus'; see tunekit loadtest --help/],
  ['loadtest', ['--json', `${M}/r.json`], /--json \/nonexistent-tunekit\/r.json: directory \/nonexistent-tunekit does not exist/],
  ['loadtest', ['--vars', `${M}/v.yml`], /variables file \/nonexistent-tunekit\/v.yml: no such file/],
  ['loadtest', ['--error-log', `${M}/error.log`], /--error-log watches the error log of a deployment given with --url or --socket/],
  ['bench', ['--rounds', '-1'], /--rounds must be a whole number >= 1 \(got "-1"\)/],
  ['bench', ['--bogus'], /Unknown option '--bogus'; see tunekit bench --help/],
  ['bench', ['--md', `${M}/b.md`], /--md \/nonexistent-tunekit\/b.md: directory/],
  ['doctor', ['--bogus'], /Unknown option '--bogus'; see tunekit doctor --help/],
  ['doctor', ['--nginx-conf', `${M}/nginx.conf`], /--nginx-conf \/nonexistent-tunekit\/nginx.conf: no such file/],
  ['doctor', ['--app-config', `${M}/app.json`], /--app-config \/nonexistent-tunekit\/app.json: no such file/],
  ['sysctl', ['apply', `${M}/99.conf`], /drop-in \/nonexistent-tunekit\/99.conf: no such file/],
  ['sysctl', ['apply', '--bogus'], /Unknown option '--bogus'; see tunekit sysctl --help/],
  ['profile', ['--demo', '--duration', '-3'], /--duration -3: expected a whole number/],
  ['profile', ['--demo', '--bogus'], /Unknown option '--bogus'; see tunekit profile --help/],
  ['profile', ['--demo', '--app', `${M}/app.js`], /--app \/nonexistent-tunekit\/app.js: no such file/],
  ['demo', ['--app', `${M}/app.js`], /--app \/nonexistent-tunekit\/app.js: no such file/],
  ['loadtest', ['--app', `${M}/app.js`], /--app \/nonexistent-tunekit\/app.js: no such file/],
  ['bench', ['--app', `${M}/app.js`], /--app \/nonexistent-tunekit\/app.js: no such file/],
  ['loadtest', ['--app', path.join(ROOT, 'app/example.js'), '--url', 'http://127.0.0.1:1/'], /--app puts your app behind the local stack; --url and --socket drive a deployment/],
  ['profile', ['--pid', '1', '--app', path.join(ROOT, 'app/example.js')], /--app goes with --demo/],
  ['demo', ['--upstream', 'udp'], /--upstream udp: expected one of uds, tcp, per-worker; see tunekit demo --help/],
  ['profile', ['--demo', '--svg', `${M}/f.svg`], /--svg \/nonexistent-tunekit\/f.svg: directory/],
  ['frobnicate', [], /unknown command "frobnicate"; one of run, render/],
];

/** Run `tunekit ARGS` in an empty directory; assert the one-line refusal and that nothing was written. */
async function refused(t, argv, message, { files = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-cli-input-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of files) fs.writeFileSync(path.join(dir, name), text);
  const args = argv(dir);
  const r = await runCommand(process.execPath, [CLI, ...args], { cwd: dir, timeoutMs: 60000 });
  const shown = `tunekit ${args.join(' ')} → exit ${r.code}\n${r.out}`;
  assert.equal(r.code, 2, shown);
  assert.doesNotMatch(r.stderr, /\n\s+at /, `no stack trace: ${shown}`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line: ${shown}`);
  assert.match(lines[0], /^tunekit: /, shown);
  assert.match(lines[0], message, shown);
  assert.equal(r.stdout, '', shown);
  assert.deepEqual(listFiles(dir), files.map(([name]) => name).sort(), `nothing written: ${shown}`);
}

test('the definition uses every kind the refusals below cover', () => {
  assert.deepEqual([...byKind.keys()].sort(), [...types.KINDS].sort());
});

for (const [command, outputs] of Object.entries(READS_DEFINITION)) {
  for (const [kind, { key, type, value }] of byKind) {
    const shown = typeof value === 'string' ? value : JSON.stringify(value);
    test(`tunekit ${command}: a wrong ${kind} (${key}=${shown}) from --vars is refused, nothing written`, async (t) => {
      const message = new RegExp(`^tunekit: ${key}=${escape(shown)} \\(from \\S+vars\\.yml\\) is not ${escape(type.spec)}: expected `);
      await refused(t, (dir) => [command, ...outputs(dir), '--vars', path.join(dir, 'vars.yml')], message, {
        files: [['vars.yml', `${key}: ${JSON.stringify(value)}\n`]],
      });
    });
  }
}

for (const [command, argv, message] of CASES) {
  test(`tunekit ${command} ${argv.join(' ')}: one line, exit 2, nothing written`, async (t) => {
    await refused(t, (dir) => [command, ...argv.map((a) => a.replace(/^DIR\//, `${dir}/`))], message);
  });
}

test('node loadtest/syscalls.js: a negative number and an unknown flag get one line each', async () => {
  for (const [argv, message] of [[['--connections', '-1'], /--connections must be a whole number >= 1/], [['--bogus'], /Unknown option '--bogus'/]]) {
    const r = await runCommand(process.execPath, [path.join(ROOT, 'loadtest/syscalls.js'), ...argv], { timeoutMs: 30000 });
    assert.equal(r.code, 2, r.out);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.out);
    assert.match(r.stderr, message);
  }
});

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
