'use strict';
// docs/reference/ holds committed renders (docs/reference/sets.json lists them).
// They must be exactly what the templates render now: this fails on drift and
// prints the command that regenerates them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { listFiles } = require('../lib/util');

const REF = path.join(ROOT, 'docs/reference');
const SETS = JSON.parse(fs.readFileSync(path.join(REF, 'sets.json'), 'utf8'));


function regenerate(name, set) {
  const args = [...set.vars.flatMap((v) => ['--vars', v]), ...set.set.flatMap((s) => ['--set', s])];
  return `rm -rf docs/reference/${name} && node bin/tunekit.js render --out docs/reference/${name}` +
    (args.length ? ` ${args.join(' ')}` : '');
}

test('sets.json lists at least the UDS default and TCP, each for a named nginx version', () => {
  // Renders depend on the nginx version (docs/versions.md); the references name
  // theirs so they do not change with the nginx of the machine that renders them.
  for (const set of Object.values(SETS)) assert.ok(set.set.some((s) => /^tunekit_nginx_version=\d+\.\d+\.\d+$/.test(s)));
  assert.deepEqual(SETS.uds, { vars: [], set: [SETS.uds.set.find((s) => s.startsWith('tunekit_nginx_version='))] });
  assert.ok(SETS.tcp.set.includes('tunekit_upstream_kind=tcp'));
});

for (const [name, set] of Object.entries(SETS)) {
  test(`docs/reference/${name} matches the templates byte for byte`, (t) => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-ref-'));
    t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const vars = config.resolve({ varsFiles: set.vars.map((v) => path.join(ROOT, v)), set: set.set });
    renderer.render(vars, tmp);
    const fix = `regenerate with:\n  ${regenerate(name, set)}`;
    const committed = path.join(REF, name);
    assert.deepEqual(listFiles(committed), listFiles(tmp), `files differ from the templates' render; ${fix}`);
    for (const f of listFiles(tmp)) {
      const want = fs.readFileSync(path.join(tmp, f));
      const got = fs.readFileSync(path.join(committed, f));
      assert.ok(want.equals(got), `docs/reference/${name}/${f} drifted from its template; ${fix}`);
    }
  });
}
