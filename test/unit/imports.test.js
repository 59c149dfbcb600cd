'use strict';
// Imports between top-level folders run one way. The allowed arrows are the
// "may import" column of the README's folder table (the one place they are
// stated); every relative require() in the kit's JavaScript must follow them.
// Also: every top-level folder has a README.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ROOT } = require('../../lib/template');
const { listFiles } = require('../lib/util');

const folders = () => fs.readdirSync(ROOT, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
  .map((e) => e.name);

/** folder → Set of folders it may import, or null for "anything", from README.md. */
function allowedArrows() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const out = new Map();
  for (const m of readme.matchAll(/^\| `(\w+)\/` \|.*\| ([^|]+) \|$/gm)) {
    const cell = m[2].trim();
    out.set(m[1], cell === 'anything' ? null : new Set([m[1], ...[...cell.matchAll(/`(\w+)\/`/g)].map((x) => x[1])]));
  }
  return out;
}

/** Every relative require() in the tree's .js files: [{from, to, line}]. */
function requires() {
  const out = [];
  for (const folder of folders()) {
    for (const rel of listFiles(path.join(ROOT, folder)).filter((f) => f.endsWith('.js'))) {
      const file = path.join(ROOT, folder, rel);
      for (const m of fs.readFileSync(file, 'utf8').matchAll(/require\(\s*['"](\.{1,2}\/[^'"]*)['"]\s*\)/g)) {
        const target = path.relative(ROOT, path.resolve(path.dirname(file), m[1]));
        out.push({ from: path.join(folder, rel), to: target, fromFolder: folder, toFolder: target.split(path.sep)[0] });
      }
    }
  }
  return out;
}

test('the README states the imports of every folder that holds JavaScript', () => {
  const allowed = allowedArrows();
  const withJs = folders().filter((f) => listFiles(path.join(ROOT, f)).some((x) => x.endsWith('.js')));
  assert.deepEqual(withJs.filter((f) => !allowed.has(f)), [], 'README.md folder table: add a "may import" cell');
  // The stated graph has no cycle: no folder may import one that may import it back.
  for (const [a, set] of allowed) {
    for (const b of set || []) {
      if (b === a) continue;
      const back = allowed.get(b);
      assert.ok(back && !back.has(a), `README.md lets ${a}/ import ${b}/ and ${b}/ import ${a}/`);
    }
  }
});

test('every require() between top-level folders follows the README\'s arrows', () => {
  const allowed = allowedArrows();
  const all = requires();
  assert.ok(all.some((r) => r.fromFolder === 'bin' && r.toFolder === 'loadtest'), 'the scan finds the CLI\'s imports');
  const wrong = all.filter((r) => {
    const may = allowed.get(r.fromFolder);
    return may !== null && !(may && may.has(r.toFolder));
  }).map((r) => `${r.from} → ${r.to}`);
  assert.deepEqual(wrong, []);
});

test('every top-level folder has a README.md', () => {
  assert.deepEqual(folders().filter((f) => !fs.existsSync(path.join(ROOT, f, 'README.md'))), []);
});
