'use strict';
// The collection tunekit.stack ships what its roles read: every path a role
// templates, copies or looks up under tunekit_repo_root (the kit's root, in a
// checkout or an installed collection) exists and is not left out by
// galaxy.yml's build_ignore. test/checks/collection.test.js builds and installs
// the collection for real; this names the path when a build would miss it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');
const collection = require('../../lib/collection');
const { runCommand } = require('../lib/util');

const ROOT = path.resolve(__dirname, '../..');
const read = (rel) => fs.readFileSync(path.join(ROOT, rel), 'utf8');

function roleFiles(dir = 'roles') {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return roleFiles(rel);
    return rel.endsWith('.yml') ? [rel] : [];
  });
}

/** The literal paths the roles' tasks read under tunekit_repo_root, and the template manifest's and the sysctl tool's files. */
function pathsTheRolesRead() {
  const literal = [];
  for (const file of roleFiles()) {
    for (const m of read(file).matchAll(/tunekit_repo_root(?: \}\}\/| ~ '\/)([A-Za-z0-9_./-]+)/g)) literal.push({ rel: m[1].replace(/\/$/, ''), from: file });
  }
  const manifest = YAML.parse(read('roles/tunekit/vars/main.yml')).tunekit_templates.map((t) => ({ rel: t.src, from: 'tunekit_templates' }));
  const kit = YAML.parse(read('roles/tunekit_sysctl/vars/main.yml')).tunekit_sysctl_kit_files.map((rel) => ({ rel, from: 'tunekit_sysctl_kit_files' }));
  // The sampler's kit, less the npm modules: those come from the checkout's `npm ci`
  // (node_modules is no part of the collection).
  const sampler = YAML.parse(read('roles/tunekit_metrics/vars/main.yml')).tunekit_metrics_kit_paths
    .filter((rel) => !rel.startsWith('node_modules/')).map((rel) => ({ rel, from: 'tunekit_metrics_kit_paths' }));
  return [...literal, ...manifest, ...kit, ...sampler];
}

test('build_ignore leaves out what its patterns name, and keeps the rest', () => {
  const patterns = collection.ignored();
  assert.equal(collection.leftOut('test/unit/collection.test.js', patterns), true);
  assert.equal(collection.leftOut('node_modules/yaml/package.json', patterns), true);
  assert.equal(collection.leftOut('loadtest/autocannon.js', patterns), true);
  assert.equal(collection.leftOut('tests/sanity/ignore-2.19.txt', patterns), false);
  assert.equal(collection.leftOut('roles/tunekit/defaults/main/00-app.yml', patterns), false);
});

// What npm leaves in a checkout: `npm pack`'s tarball (the name npm itself
// reports), its debug logs, a project .npmrc (where a registry token may be kept).
test("build_ignore leaves out what npm leaves in the checkout", async () => {
  const r = await runCommand('npm', ['pack', '--dry-run', '--json', '--ignore-scripts', '--loglevel=error'], { cwd: ROOT, timeoutMs: 120000 });
  assert.equal(r.code, 0, `npm pack --dry-run failed:\n${r.out}`);
  const [{ filename }] = JSON.parse(r.stdout);
  const patterns = collection.ignored();
  for (const rel of [filename, 'npm-debug.log', '.npmrc']) {
    assert.equal(collection.leftOut(rel, patterns), true, `galaxy.yml's build_ignore ships ${rel} in the collection`);
  }
});

test('every path the roles read exists and is shipped in the collection', () => {
  const paths = pathsTheRolesRead();
  // The scan found the reads it must: a template, the runner, the checks' templates, the sysctl tool.
  for (const rel of ['nginx/nginx.conf.j2', 'app', 'roles/tunekit/templates/checks.j2', 'bin/tunekit.js', 'metrics/queue-sampler.js', 'lib']) {
    assert.ok(paths.some((p) => p.rel === rel), `the scan did not find the roles reading ${rel}`);
  }
  const patterns = collection.ignored();
  for (const { rel, from } of paths) {
    assert.ok(fs.existsSync(path.join(ROOT, rel)), `${from} reads ${rel}, which does not exist`);
    assert.equal(collection.leftOut(rel, patterns), false, `${from} reads ${rel}, which galaxy.yml's build_ignore leaves out of the collection`);
  }
});

test("galaxy.yml's version is package.json's", () => {
  assert.equal(YAML.parse(read('galaxy.yml')).version, JSON.parse(read('package.json')).version);
});
