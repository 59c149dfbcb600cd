'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vartable = require('../../lib/config/vartable');
const { loadDefaults } = require('../../lib/config');
const { ROOT } = require('../../lib/template');

test('every tunable in the definition has a comment with unit, upstream default and reason', () => {
  const defs = vartable.readDefinition();
  assert.deepEqual(defs.map((d) => d.key), Object.keys(loadDefaults()));
  for (const d of defs) {
    assert.ok(d.what.length > 10, `${d.key}: says what it does`);
    assert.ok(d.unit, `${d.key}: has a Unit`);
    assert.ok(d.upstream, `${d.key}: has an Upstream default`);
    assert.ok(d.why, `${d.key}: has a Why`);
  }
});

for (const rel of vartable.DOCUMENTS) {
  test(`the variables table in ${rel} is current`, () => {
    const file = path.join(ROOT, rel);
    assert.ok(fs.existsSync(file), `${rel} exists`);
    const text = fs.readFileSync(file, 'utf8');
    assert.equal(text, vartable.splice(text, vartable.table(), rel),
      `${rel} is stale; run: node lib/config/vartable.js --write`);
  });
}

test('a tunable without a comment is refused by the generator, naming it', () => {
  const os = require('node:os');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-vt-'));
  try {
    const file = path.join(tmp, '99-x.yml');
    fs.writeFileSync(file, '---\n# Documented.\n# Unit: n | Upstream default: 1 | Why: w\ntunekit_a: 1\ntunekit_b: 2\n\ntunekit_c: 3\n');
    assert.throws(() => vartable.readDefinition([file]), /tunekit_c has no comment/);
    fs.writeFileSync(file, '---\n# Documented.\n# Unit: n | Upstream default: 1 | Why: w\ntunekit_a: 1\ntunekit_b: 2\n');
    assert.deepEqual(vartable.readDefinition([file]).map((d) => [d.key, d.unit]), [['tunekit_a', 'n'], ['tunekit_b', 'n']]);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test("each row shows the variable's own type, unit and default; a missing one is '–'", () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { table } = require('../../lib/config/vartable');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vartable-'));
  try {
    const file = path.join(dir, 'main.yml');
    fs.writeFileSync(file, [
      '# Worker processes.',
      '# Unit: count | Upstream default: 1 | Why: use every core',
      '# Type: int 0..',
      'tunekit_x_workers: 4',
      '',
      '# Flush mode.',
      '# Why: fewer writes',
      'tunekit_x_flush: buffered',
      '',
    ].join('\n'));
    const rows = table([file]).split('\n').filter((l) => l.startsWith('| `tunekit_'));
    assert.equal(rows[0], '| `tunekit_x_workers` | `4` | `int 0..` | count | 1 | Worker processes. *Why:* use every core. |');
    assert.equal(rows[1], '| `tunekit_x_flush` | `buffered` | – | – | – | Flush mode. Why: fewer writes |');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
