'use strict';
// The collection tunekit.stack as an operator gets it: `ansible-galaxy collection
// build` in the checkout, then `ansible-galaxy collection install` of the tarball
// into a collections path of its own, outside the repository. Used by
// test/checks/collection.test.js and by the e2e suites that deploy through it.
//
//   const c = await installCollection(dir);
//   // c = { tarball, collectionsPath, root }: root is .../ansible_collections/tunekit/stack
//   runCommand(PLAYBOOK, [...], { env: c.env })   // that collections path and nothing of the checkout

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { runCommand } = require('./util');

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, '.venv/bin');
const { version } = require('../../package.json');

/**
 * The environment of a run that sees only the installed collection: its
 * collections path, no ansible.cfg of the checkout (an empty one in `dir`), no
 * collections from Python's sys.path.
 */
function collectionEnv(dir, collectionsPath) {
  const cfg = path.join(dir, 'ansible.cfg');
  if (!fs.existsSync(cfg)) fs.writeFileSync(cfg, '[defaults]\n');
  return {
    ANSIBLE_CONFIG: cfg,
    ANSIBLE_COLLECTIONS_PATH: collectionsPath,
    ANSIBLE_COLLECTIONS_SCAN_SYS_PATH: 'False',
    ANSIBLE_NOCOLOR: '1',
    ANSIBLE_FORCE_COLOR: '0',
    ANSIBLE_LOCAL_TEMP: path.join(dir, 'ansible-local'),
    PATH: `${BIN}:${process.env.PATH}`,
  };
}

/** Build the collection from the checkout and install the tarball under dir/collections. */
async function installCollection(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const dist = path.join(dir, 'dist');
  const collectionsPath = path.join(dir, 'collections');
  fs.mkdirSync(dist, { recursive: true });
  const env = collectionEnv(dir, collectionsPath);
  const build = await runCommand(path.join(BIN, 'ansible-galaxy'), ['collection', 'build', '--output-path', dist, ROOT], { cwd: dir, env, timeoutMs: 600000 });
  assert.equal(build.code, 0, `ansible-galaxy collection build failed:\n${build.out}`);
  const tarball = path.join(dist, `tunekit-stack-${version}.tar.gz`);
  assert.ok(fs.existsSync(tarball), `the build made no ${path.basename(tarball)}:\n${build.out}`);
  const install = await runCommand(path.join(BIN, 'ansible-galaxy'), ['collection', 'install', '-p', collectionsPath, tarball], { cwd: dir, env, timeoutMs: 600000 });
  assert.equal(install.code, 0, `ansible-galaxy collection install failed:\n${install.out}`);
  const root = path.join(collectionsPath, 'ansible_collections/tunekit/stack');
  assert.ok(fs.existsSync(path.join(root, 'MANIFEST.json')), `nothing installed at ${root}:\n${install.out}`);
  return { tarball, collectionsPath, root, env };
}

module.exports = { installCollection, collectionEnv };
