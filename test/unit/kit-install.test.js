'use strict';
// lib/kit.js: how this copy of the kit was installed, read from where its files
// are, and the command prefix and install command every printed step takes from
// it. Each layout is built as npm builds it (test/integration/package.test.js
// installs the real tarball).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const kit = require('../../lib/kit');

function tree(t) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'tk-kit-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A copy of the kit's CLI file at root/bin/tunekit.js. */
function kitAt(root) {
  fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
  fs.writeFileSync(path.join(root, 'bin/tunekit.js'), '#!/usr/bin/env node\n', { mode: 0o755 });
  return root;
}

test('a checkout: node bin/tunekit.js from its root, the absolute path elsewhere, npm ci in it', (t) => {
  const root = kitAt(path.join(tree(t), 'tunekit'));
  assert.deepEqual(kit.installation(root), { kind: 'checkout' });
  assert.equal(kit.invocation({ root, cwd: root, env: {} }), 'node bin/tunekit.js');
  assert.equal(kit.invocation({ root, cwd: tree(t), env: {} }), `node ${root}/bin/tunekit.js`);
  assert.equal(kit.installCommand({ root }), `run \`npm ci\` in ${root}`);
  assert.equal(kit.onTheHost({ root }), `(run npm ci in ${root} first)`);
});

test('npm install -g: tunekit when its bin is on PATH, the absolute path when it is not', (t) => {
  const prefix = tree(t);
  const root = kitAt(path.join(prefix, 'lib/node_modules/tunekit'));
  fs.mkdirSync(path.join(prefix, 'bin'));
  fs.symlinkSync('../lib/node_modules/tunekit/bin/tunekit.js', path.join(prefix, 'bin/tunekit'));
  assert.deepEqual(kit.installation(root), { kind: 'global' });
  const elsewhere = tree(t);
  assert.equal(kit.invocation({ root, cwd: elsewhere, env: { PATH: `/usr/bin:${prefix}/bin` } }), 'tunekit');
  assert.equal(kit.invocation({ root, cwd: elsewhere, env: { PATH: '/usr/bin' } }), `node ${root}/bin/tunekit.js`);
  // Another tunekit first on PATH is not this copy.
  const other = kitAt(path.join(tree(t), 'other'));
  fs.symlinkSync(path.join(other, 'bin/tunekit.js'), path.join(other, 'tunekit'));
  assert.equal(kit.invocation({ root, cwd: elsewhere, env: { PATH: `${other}:${prefix}/bin` } }), `node ${root}/bin/tunekit.js`);
  // Not on the npm registry: the package's own files, packed, are what installs it again.
  fs.writeFileSync(path.join(root, 'package.json'), '{"name":"tunekit","version":"1.2.3"}\n');
  assert.equal(kit.installCommand({ root }), `reinstall it from its own files: \`npm pack ${root} && npm install -g ./tunekit-1.2.3.tgz\``);
  assert.equal(kit.onTheHost({ root }), `(on another host, install the kit there first: npm pack ${root} here makes its tarball, npm install -g ./tunekit-1.2.3.tgz there)`);
});

test('npx: npx tunekit, even with its own node_modules/.bin on PATH (npm put it there, not the user)', (t) => {
  const cache = tree(t);
  const root = kitAt(path.join(cache, '_npx/0123abcd/node_modules/tunekit'));
  const bin = path.join(cache, '_npx/0123abcd/node_modules/.bin');
  fs.mkdirSync(bin);
  fs.symlinkSync('../tunekit/bin/tunekit.js', path.join(bin, 'tunekit'));
  assert.deepEqual(kit.installation(root), { kind: 'npx' });
  assert.equal(kit.invocation({ root, cwd: tree(t), env: { PATH: `${bin}:/usr/bin`, npm_command: 'exec' } }), 'npx tunekit');
  assert.doesNotMatch(kit.installCommand({ root }), /npm ci/);
});

test('a project\'s dependency: npx tunekit inside the project, the absolute path outside, npm install in the project', (t) => {
  const project = tree(t);
  fs.writeFileSync(path.join(project, 'package.json'), '{"name":"myapp","dependencies":{"tunekit":"^0.1.0"}}\n');
  const root = kitAt(path.join(project, 'node_modules/tunekit'));
  assert.deepEqual(kit.installation(root), { kind: 'dependency', project });
  fs.mkdirSync(path.join(project, 'src'));
  assert.equal(kit.invocation({ root, cwd: path.join(project, 'src'), env: { PATH: `${project}/node_modules/.bin:/usr/bin` } }), 'npx tunekit');
  assert.equal(kit.invocation({ root, cwd: tree(t), env: { PATH: '/usr/bin' } }), `node ${root}/bin/tunekit.js`);
  assert.equal(kit.installCommand({ root }), `run \`npm install\` in ${project}`);
});

test('this checkout is a checkout', () => {
  assert.equal(kit.installation().kind, 'checkout');
  assert.equal(kit.invocation({ cwd: kit.ROOT }), 'node bin/tunekit.js');
});
