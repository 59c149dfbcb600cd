'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vartable = require('../../lib/config/vartable');
const { loadDefaults } = require('../../lib/config');

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

// The tables being current is checked with every other generated file (generate.test.js).

test('only paths are moved under a --prefix tree, and every # Pod: and # Stock: value fits its type', () => {
  const types = require('../../lib/config/types');
  const { yamlScalar } = require('../../lib/config/definition');
  const typeOf = types.readTypes(require('../../lib/config').defaultFiles());
  for (const d of vartable.readDefinition()) {
    if (d.prefix) assert.ok(typeOf[d.key].alternatives.some((a) => a.kind === 'path'), `${d.key}: # Prefix: yes on a ${typeOf[d.key].spec}`);
    for (const text of [d.pod, d.stock].filter((x) => x !== null)) {
      const value = yamlScalar(text);
      if (typeof value === 'string' && value.includes('{{')) continue; // checked once rendered (config resolve)
      assert.equal(types.mismatch(value, typeOf[d.key]), null, `${d.key}: ${text} is not ${typeOf[d.key].spec}`);
    }
  }
});

test('an annotation line outside its grammar is refused, naming the variable and the fix', () => {
  const os = require('node:os');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-vt-'));
  try {
    const file = path.join(tmp, '99-x.yml');
    const block = (line) => `---\n# Documented.\n# Unit: n | Upstream default: 1 | Why: w\n# Type: path\n${line}\ntunekit_a: /x\n`;
    fs.writeFileSync(file, block('# Prefix: no'));
    assert.throws(() => vartable.readDefinition([file]), /99-x\.yml: tunekit_a: "# Prefix: no": write "# Prefix: yes", or leave the line out/);
    fs.writeFileSync(file, block('# Pod: [a, b]'));
    assert.throws(() => vartable.readDefinition([file]), /tunekit_a: "# Pod: \[a, b\]": write one value/);
    fs.writeFileSync(file, block('# Stock: "{{ tunekit_b }}/y"'));
    assert.deepEqual(vartable.readDefinition([file]).map((d) => [d.key, d.stock, d.what]), [['tunekit_a', '"{{ tunekit_b }}/y"', 'Documented.']]);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

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
