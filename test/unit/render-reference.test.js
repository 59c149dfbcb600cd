'use strict';
// docs/reference/ holds committed renders (docs/reference/sets.json lists them),
// written by `npm run generate`; generate.test.js fails when one drifted from
// the templates. Here: what the list must hold.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ROOT } = require('../../lib/template');

const REF = path.join(ROOT, 'docs/reference');
const SETS = JSON.parse(fs.readFileSync(path.join(REF, 'sets.json'), 'utf8'));

test('sets.json lists at least the UDS default and TCP, each for a named nginx version', () => {
  // Renders depend on the nginx version (docs/versions.md); the references name
  // theirs so they do not change with the nginx of the machine that renders them.
  for (const set of Object.values(SETS)) assert.ok(set.set.some((s) => /^tunekit_nginx_version=\d+\.\d+\.\d+$/.test(s)));
  assert.deepEqual(SETS.uds, { vars: [], set: [SETS.uds.set.find((s) => s.startsWith('tunekit_nginx_version='))] });
  assert.ok(SETS.tcp.set.includes('tunekit_upstream_kind=tcp'));
});
