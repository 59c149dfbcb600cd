'use strict';
// ESLint over the tree (eslint.config.js): every name used is defined, every
// import is used. A require() left out otherwise shows only when that line
// runs: `loadtest --json` once threw "makeDirs is not defined" this way.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { ROOT } = require('../../lib/template');

test('eslint: no undefined name, no unused import', async () => {
  const r = await runCommand(process.execPath, [path.join(ROOT, 'node_modules/eslint/bin/eslint.js'), '--max-warnings', '0', '.'], { cwd: ROOT, timeoutMs: 120000 });
  assert.equal(r.code, 0, r.out);
});
