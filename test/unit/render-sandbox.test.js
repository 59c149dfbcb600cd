'use strict';
// The app unit's sandbox (systemd/app.service.j2) and the paths `tunekit render`
// accepts: the unit hides /home, /root and /run/user (ProtectHome=) and has a /tmp
// and /var/tmp of its own (PrivateTmp=yes), so an app there would never start.
// render refuses such a module in one line, exit 2, nothing written, naming the
// variable and the fixes; tunekit_app_read_only_paths opens an app's folder in a
// home, read-only, and nothing else of the homes (ProtectHome=tmpfs with
// BindReadOnlyPaths=). Local stacks (demo, run, --prefix) run as you, outside the
// unit: they accept any path.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const YAML = require('yaml');
const { ROOT } = require('../../lib/template');
const config = require('../../lib/config');

const CLI = path.join(ROOT, 'bin/tunekit.js');

function tunekit(args) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT });
}

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-sandbox-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const sets = (list) => list.flatMap((s) => ['--set', s]);

/** render --out a fresh tree with these --set pairs (and --vars files). */
function render(t, list, more = []) {
  const out = path.join(tmpdir(t), 'tree');
  return { out, res: tunekit(['render', '--out', out, '--nginx-version', '1.22.1', ...sets(list), ...more]) };
}

function refused(t, list, more = []) {
  const { out, res } = render(t, list, more);
  assert.equal(res.status, 2, `refused with exit 2:\n${res.stdout}${res.stderr}`);
  assert.equal(res.stderr.trim().split('\n').length, 1, `one line:\n${res.stderr}`);
  assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
  assert.equal(fs.existsSync(out), false, 'nothing written');
  return res.stderr;
}

/** The Protect/Bind directives of the app unit a render wrote. */
function unitDirectives(out) {
  const unit = fs.readFileSync(path.join(out, 'etc/systemd/system/tunekit-app.service'), 'utf8');
  return unit.split('\n').filter((l) => /^(ProtectHome|BindReadOnlyPaths|BindPaths|PrivateTmp|ProtectSystem)=/.test(l));
}

test('an app under /home is refused, naming the variable and both fixes: move it, or open its folder', (t) => {
  const err = refused(t, ['tunekit_app_module=/home/me/myapp/app.js']);
  assert.match(err, /^tunekit: inconsistent settings: tunekit_app_module=\/home\/me\/myapp\/app\.js is under \/home, which the app's unit hides \(ProtectHome=yes\)/);
  assert.match(err, /move the app \(e\.g\. to \/srv\/myapp or \/opt\/myapp\)/);
  assert.match(err, /tunekit_app_read_only_paths=\[\/home\/me\/myapp\]/);
  // root's home: hidden too, and no opening offered: under ProtectHome=tmpfs
  // /root stays 0700, so the app's user could not reach a folder bound there.
  const root = refused(t, ['tunekit_app_module=/root/app/app.js']);
  assert.match(root, /tunekit_app_module=\/root\/app\/app\.js is under \/root, root's home, which the app's unit hides \(ProtectHome=yes\); opening a folder of it would not help/);
  assert.match(root, /move the app \(e\.g\. to \/srv\/myapp or \/opt\/myapp\)/);
  assert.doesNotMatch(root, /tunekit_app_read_only_paths=\[\/root/);
  // Opening it is refused too: both lines.
  const both = render(t, ['tunekit_app_module=/root/app/app.js', 'tunekit_app_read_only_paths=[/root/app]']);
  assert.equal(both.res.status, 2, both.res.stderr);
  assert.match(both.res.stderr, /tunekit_app_module=\/root\/app\/app\.js is under \/root/);
  assert.match(both.res.stderr, /tunekit_app_read_only_paths=\[\/root\/app\] may list only folders inside \/home .* one under \/root, \/tmp or \/run\/user cannot be opened/);
  // A user's runtime directory is there only while they are logged in: no opening it.
  const run = refused(t, ['tunekit_app_module=/run/user/1000/app/app.js']);
  assert.match(run, /tunekit_app_module=\/run\/user\/1000\/app\/app\.js is under \/run\/user, a user's runtime directory, there only while they are logged in/);
  assert.doesNotMatch(run, /tunekit_app_read_only_paths=\[/);
});

test('an app under /tmp or /var/tmp is refused with one fix, moving it: the unit\'s /tmp is private', (t) => {
  for (const dir of ['/tmp', '/var/tmp']) {
    const err = refused(t, [`tunekit_app_module=${dir}/myapp/app.js`]);
    assert.match(err, new RegExp(`tunekit_app_module=${dir}/myapp/app\\.js is under ${dir}, and the app's unit has a private one \\(PrivateTmp=yes\\)`));
    assert.match(err, /move the app out of it \(e\.g\. to \/srv\/myapp or \/opt\/myapp\)/);
    assert.doesNotMatch(err, /tunekit_app_read_only_paths=\[/, 'opening it would not help: no read-only path is offered');
  }
  // Opening /tmp is no way out either: both are refused.
  const { out, res } = render(t, ['tunekit_app_module=/tmp/myapp/app.js', 'tunekit_app_read_only_paths=[/tmp/myapp]']);
  assert.equal(res.status, 2, res.stderr);
  assert.deepEqual(res.stderr.split('\n').filter((l) => l.startsWith('  - ')).map((l) => l.split(' ').slice(3, 4)[0]),
    ['tunekit_app_module=/tmp/myapp/app.js', 'tunekit_app_read_only_paths=[/tmp/myapp]'], res.stderr);
  assert.match(res.stderr, /tunekit_app_read_only_paths=\[\/tmp\/myapp\] may list only folders inside \/home .* one under \/root, \/tmp or \/run\/user cannot be opened/);
  assert.equal(fs.existsSync(out), false, 'nothing written');
});

test('a module relative to tunekit_app_source_dir is checked where it lands', (t) => {
  const dir = tmpdir(t);
  const vars = path.join(dir, 'app.yml');
  fs.writeFileSync(vars, YAML.stringify({ tunekit_app_source_dir: '/home/deploy/shop', tunekit_app_module: 'server.js' }));
  const err = refused(t, [], ['--vars', vars]);
  assert.match(err, /tunekit_app_module=server\.js \(\/home\/deploy\/shop\/server\.js, in tunekit_app_source_dir\) is under \/home/);
  assert.match(err, /tunekit_app_read_only_paths=\[\/home\/deploy\/shop\]/);
});

test('tunekit_app_read_only_paths opens the app\'s folder read-only: ProtectHome=tmpfs and one BindReadOnlyPaths=', (t) => {
  const { out, res } = render(t, ['tunekit_app_module=/home/me/myapp/dist/server.js', 'tunekit_app_read_only_paths=[/home/me/myapp]']);
  assert.equal(res.status, 0, res.stderr);
  assert.deepEqual(unitDirectives(out), ['ProtectSystem=strict', 'ProtectHome=tmpfs', 'BindReadOnlyPaths=/home/me/myapp', 'PrivateTmp=yes']);
  const two = render(t, ['tunekit_app_module=/home/me/myapp/app.js', 'tunekit_app_read_only_paths=[/home/me/myapp, /home/me/shared-lib]']);
  assert.equal(two.res.status, 0, two.res.stderr);
  assert.deepEqual(unitDirectives(two.out).filter((l) => l.startsWith('Bind')), ['BindReadOnlyPaths=/home/me/myapp /home/me/shared-lib']);
});

test('the default unit and an app under /srv or /opt: every home hidden, nothing bound', (t) => {
  for (const list of [[], ['tunekit_app_module=/srv/myapp/app.js'], ['tunekit_app_module=/opt/myapp/app.js']]) {
    const { out, res } = render(t, list);
    assert.equal(res.status, 0, res.stderr);
    assert.deepEqual(unitDirectives(out), ['ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes'], list.join(' '));
  }
});

test('an opened folder covers the paths inside it only: a sibling that shares its prefix stays hidden', (t) => {
  const err = refused(t, ['tunekit_app_module=/home/me/myapp2/app.js', 'tunekit_app_read_only_paths=[/home/me/myapp]']);
  assert.match(err, /tunekit_app_module=\/home\/me\/myapp2\/app\.js is under \/home/);
  // A dot in the folder's name is a dot, not "any character".
  assert.match(refused(t, ['tunekit_app_module=/home/me/myXapp/app.js', 'tunekit_app_read_only_paths=[/home/me/my.app]']),
    /tunekit_app_module=\/home\/me\/myXapp\/app\.js is under \/home/);
});

test('tunekit_app_read_only_paths takes folders inside a home only, as clean absolute paths', (t) => {
  for (const bad of ['/home', '/root/app', 'home/me/app', '/home/me/../other', '/home/me/./app', '/home/me/my app', '/home/me/a:b', '/srv/app', '/run/user/1000/app']) {
    const err = refused(t, ['tunekit_app_module=/srv/app/app.js', `tunekit_app_read_only_paths=["${bad}"]`]);
    assert.match(err, /may list only folders inside \/home \(/, bad);
  }
});

test('the runner, its settings and Node are checked too: the unit starts Node from tunekit_node_bin', (t) => {
  const err = refused(t, ['tunekit_node_bin=/home/me/.nvm/versions/node/v22.11.0/bin/node']);
  assert.match(err, /tunekit_node_bin=\/home\/me\/\.nvm\/versions\/node\/v22\.11\.0\/bin\/node is out of the app unit's sight/);
  assert.match(err, /Debian's nodejs, or an official tarball under \/opt/);
  const both = refused(t, ['tunekit_app_install_dir=/tmp/tk', 'tunekit_app_config_path=/root/app.json']);
  assert.match(both, /tunekit_app_install_dir=\/tmp\/tk is out of the app unit's sight; tunekit_app_config_path=\/root\/app\.json is out of the app unit's sight;/);
});

test('several apps: each app\'s module is checked with its own opened folders', (t) => {
  const dir = tmpdir(t);
  const vars = path.join(dir, 'apps.yml');
  fs.writeFileSync(vars, YAML.stringify({
    tunekit_apps: [
      { name: 'web', module: '/home/web/site/app.js', tunekit_app_read_only_paths: ['/home/web/site'] },
      { name: 'api', module: '/home/api/svc/app.js', location: '/api/' },
    ],
  }));
  const err = refused(t, [], ['--vars', vars]);
  assert.match(err, /^tunekit: inconsistent settings: app api: tunekit_app_module=\/home\/api\/svc\/app\.js is under \/home/);
  fs.writeFileSync(vars, YAML.stringify({
    tunekit_apps: [
      { name: 'web', module: '/home/web/site/app.js', tunekit_app_read_only_paths: ['/home/web/site'] },
      { name: 'api', module: '/srv/api/app.js', location: '/api/' },
    ],
  }));
  const { out, res } = render(t, [], ['--vars', vars]);
  assert.equal(res.status, 0, res.stderr);
  const unit = (name) => fs.readFileSync(path.join(out, `etc/systemd/system/${name}.service`), 'utf8');
  assert.match(unit('web'), /^ProtectHome=tmpfs\nBindReadOnlyPaths=\/home\/web\/site$/m);
  assert.match(unit('api'), /^ProtectHome=yes$/m);
  assert.doesNotMatch(unit('api'), /^BindReadOnlyPaths=/m);
});

test('what runs as you, outside the unit, takes an app anywhere: --prefix trees, PM2, demo/run\'s resolve', (t) => {
  const home = ['tunekit_app_module=/home/me/myapp/app.js'];
  assert.equal(render(t, home, ['--prefix']).res.status, 0, '--prefix');
  assert.equal(render(t, [...home, 'tunekit_process_manager=pm2']).res.status, 0, 'pm2 runs apps from its own unit, unsandboxed');
  // demo, loadtest and run resolve without host: the local stack.
  assert.equal(config.resolve({ set: ['tunekit_app_module=/tmp/myapp/app.js'] }).tunekit_app_module, '/tmp/myapp/app.js');
  assert.throws(() => config.resolve({ set: ['tunekit_app_module=/tmp/myapp/app.js'], host: true }), /is under \/tmp/);
});
