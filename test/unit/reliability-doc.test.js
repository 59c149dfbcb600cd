'use strict';
// docs/reliability.md's table is the fault suite's own output: the table that
// test/faults/table.js makes from the kept figures (docs/reliability.json), not
// numbers typed by hand. Regenerate both with:
//   TUNEKIT_FAULTS_REPORT=faults.json npm run test:faults && node test/faults/table.js faults.json --write
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { table, docTable, FIGURES } = require('../faults/table');

test('docs/reliability.md carries the table made from docs/reliability.json', () => {
  const figures = JSON.parse(fs.readFileSync(FIGURES, 'utf8'));
  assert.ok(figures.reload, 'the reload case has figures');
  assert.equal(docTable().text, table(figures));
});

test('a case without a row in the table script is refused, naming it and the fix', () => {
  assert.throws(() => table({ 'no-such-case': {} }), /no-such-case: no row for this case in test\/faults\/table\.js; add one to ROWS/);
});
