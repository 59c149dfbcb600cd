'use strict';
// The kit as an npm package a Node user installs: `npm pack` makes the tarball
// (no test, no fixture, no docs), `npm install -g --prefix DIR TARBALL` installs it
// beside nothing of the checkout, and from an empty folder the installed `tunekit`
// prints its help, renders a host tree whose next steps say `tunekit …` (never
// `npm ci`, never `node …/bin/tunekit.js`), runs the demo on its own files, and
// says what reinstalls a missing npm package. npx's copy says `npx tunekit`.
// The install fetches the dependencies from npm's cache when they are there, else
// from the registry: bounded by INSTALL_TIMEOUT_MS.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { runCommand } = require('../lib/util');
const { alive } = require('../../lib/proc');

const ROOT = path.resolve(__dirname, '../..');
const INSTALL_TIMEOUT_MS = 240000;
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

// The numbered steps `render` prints after the file list.
const nextSteps = (out) => out.slice(out.indexOf('Next, as root on the host:'));

// One tarball and one install for every test of the file.
let made = null;
async function installed(t) {
  if (made) return made;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-package-'));
  const pack = await runCommand('npm', ['pack', '--json', '--pack-destination', dir, '--loglevel=error'], { cwd: ROOT, timeoutMs: 120000 });
  assert.equal(pack.code, 0, pack.stderr);
  const [info] = JSON.parse(pack.stdout);
  const tarball = path.join(dir, info.filename);
  const prefix = path.join(dir, 'prefix');
  const inst = await runCommand('npm', ['install', '-g', '--prefix', prefix, ...NPM_QUIET, tarball], { cwd: dir, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(inst.code, 0, `npm install -g --prefix ${prefix} ${tarball}: exit ${inst.code} ${inst.signal || ''}\n${inst.stderr}`);
  const empty = path.join(dir, 'empty');
  fs.mkdirSync(empty);
  made = {
    dir, tarball, prefix, empty, info,
    home: path.join(prefix, 'lib/node_modules/tunekit'),
    // The user's shell: the prefix's bin first on PATH, nothing of the checkout.
    env: { PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}` },
  };
  return made;
}

test.after(() => {
  if (made) fs.rmSync(made.dir, { recursive: true, force: true });
});

test('npm pack: the runtime files only, no test, fixture or doc', async (t) => {
  const { info } = await installed(t);
  const files = info.files.map((f) => f.path);
  const stray = files.filter((f) => /^(test|tests|docs|examples|\.ci)\//.test(f) || /\.test\.(js|yml)$/.test(f) || /(^|\/)fixtures\//.test(f));
  assert.deepEqual(stray, [], 'in the tarball');
  // What the CLI reads when it runs: the one definition, the manifest and its templates, the runner.
  for (const f of ['bin/tunekit.js', 'roles/tunekit/defaults/main/00-app.yml', 'roles/tunekit/vars/main.yml', 'roles/tunekit/vars/rules.yml',
    'roles/tunekit/templates/checks.j2', 'nginx/nginx.conf.j2', 'app/cluster.js', 'app/worker.js', 'ansible/profiles/stock.yml', 'kubernetes/templates.yml']) {
    assert.ok(files.includes(f), `${f} is in the tarball`);
  }
  // The dev dependencies stay out of what an install pulls in.
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  for (const dev of Object.keys(pkg.devDependencies)) assert.ok(!Object.hasOwn(pkg.dependencies, dev), `${dev} is a dev dependency only`);
});

test('installed globally: tunekit --help and render work from an empty folder, and its next steps say tunekit', async (t) => {
  const { env, empty } = await installed(t);
  const help = await runCommand('tunekit', ['--help'], { cwd: empty, env, timeoutMs: 30000 });
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /^usage: tunekit <command> \[options\]$/m);
  const out = path.join(empty, 'X');
  const r = await runCommand('tunekit', ['render', '--out', 'X'], { cwd: empty, env, timeoutMs: 60000 });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.existsSync(path.join(out, 'etc/nginx/nginx.conf')), r.stdout);
  const steps = nextSteps(r.stdout);
  assert.match(steps, /^ {5}tunekit sysctl apply \/etc\/sysctl\.d\/60-tunekit\.conf$/m);
  assert.match(steps, /; tunekit doctor audits every layer/);
  assert.doesNotMatch(steps, /npm ci|bin\/tunekit\.js/);
  fs.rmSync(out, { recursive: true, force: true });
});

test('installed globally: the demo runs on the package\'s own files and leaves nothing behind', { timeout: 180000 }, async (t) => {
  const { env, empty } = await installed(t);
  const r = await runCommand('tunekit', ['demo', '--duration', '1', '--connections', '2'], { cwd: empty, env, timeoutMs: 150000 });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /^ {2}requests +\d+ \(0 non-2xx, 0 errors, 0 timeouts\)$/m);
  const stopped = /^stopped: \d+ processes exited \(([\d ]+)\), socket and (\S+) removed$/m.exec(r.stdout);
  assert.ok(stopped, r.stdout);
  assert.deepEqual(stopped[1].split(' ').map(Number).filter(alive), []);
  assert.equal(fs.existsSync(stopped[2]), false);
});

test('installed globally: a missing npm package is one line naming the reinstall, not npm ci', async (t) => {
  const { env, empty, home } = await installed(t);
  // Last in the file: the install is not used after this.
  fs.rmSync(path.join(home, 'node_modules/yaml'), { recursive: true, force: true });
  const r = await runCommand('tunekit', ['render', '--out', 'Y'], { cwd: empty, env, timeoutMs: 30000 });
  assert.equal(r.code, 2, r.stdout);
  assert.equal(r.stderr, 'tunekit: npm package yaml is not installed; reinstall it: `npm install -g tunekit`\n');
});

test('npx from the tarball: render\'s next steps say npx tunekit', { timeout: INSTALL_TIMEOUT_MS + 60000 }, async (t) => {
  const { tarball, empty } = await installed(t);
  const cache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();
  const npxDirs = () => new Set(fs.existsSync(path.join(cache, '_npx')) ? fs.readdirSync(path.join(cache, '_npx')) : []);
  const before = npxDirs();
  // npx keeps the package it installed in its cache, one folder per spec: this test's goes.
  t.after(() => {
    for (const d of npxDirs()) if (!before.has(d)) fs.rmSync(path.join(cache, '_npx', d), { recursive: true, force: true });
  });
  const r = await runCommand('npx', ['--yes', ...NPM_QUIET, '--package', tarball, '--', 'tunekit', 'render', '--out', 'N'], { cwd: empty, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(r.code, 0, r.stderr);
  const steps = nextSteps(r.stdout);
  assert.match(steps, /^ {5}npx tunekit sysctl apply /m);
  assert.doesNotMatch(steps, /npm ci|bin\/tunekit\.js/);
});
