'use strict';
// The kit as a user installs it: `npm pack` of this checkout, the tarball
// installed with `npm install -g --prefix DIR` (nothing of the checkout on the
// way), and an empty folder to run it from. One pack and one install per test
// file (installed() returns the same one on every call): a file's tests share it.
// The install fetches the dependencies from npm's cache when they are there,
// else from the registry: bounded by INSTALL_TIMEOUT_MS.
//
//   const { installed, expressApp } = require('../lib/package');
//   const kit = await installed();      // { dir, tarball, prefix, empty, info, home, env, cleanup }
//   const app = await expressApp(kit.dir);   // a folder with app.js (docs/frameworks.md's Express app)

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('./util');
const { ensureFrameworks, recipes } = require('./frameworks');

const ROOT = path.resolve(__dirname, '../..');
const INSTALL_TIMEOUT_MS = 240000;
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

let made = null;

/**
 * The packed and installed kit: tarball, prefix (its bin/ holds `tunekit`),
 * home (PREFIX/lib/node_modules/tunekit), empty (a folder with nothing in it),
 * env (the user's shell: the prefix's bin first on PATH), cleanup().
 */
async function installed() {
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
    env: { PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}` },
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
  return made;
}

/**
 * A user's Express app in a folder of its own under `parent`: app.js is
 * docs/frameworks.md's Express recipe, as written there, beside node_modules (a
 * link to the frameworks cache: test/lib/frameworks.js, no network once built).
 * Returns the folder.
 */
async function expressApp(parent) {
  const frameworks = await ensureFrameworks();
  const dir = path.join(parent, 'myapp');
  fs.mkdirSync(dir);
  const { file, code } = recipes(path.join(ROOT, 'docs/frameworks.md'))['express-cjs'];
  fs.writeFileSync(path.join(dir, file), code);
  fs.symlinkSync(path.join(frameworks, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

module.exports = { installed, expressApp, INSTALL_TIMEOUT_MS, NPM_QUIET };
