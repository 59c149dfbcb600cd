'use strict';
// yamllint (with the repo's .yamllint, which matches ansible-lint's expectations)
// is clean on the variable files this area owns: the profiles, the nginx layer of
// the definition, the template manifest and the parity playbook.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT } = require('../../lib/template');

const YAMLLINT = path.join(ROOT, '.venv/bin/yamllint');

test('yamllint is clean on the profiles, the nginx definition and the manifest', () => {
  const files = [
    '.yamllint',
    'ansible/profiles',
    'roles/tunekit/defaults/main/10-nginx.yml',
    'roles/tunekit/vars/main.yml',
    'test/fixtures/nginx',
  ];
  const r = spawnSync(YAMLLINT, ['--strict', '--format', 'parsable', ...files], { cwd: ROOT, encoding: 'utf8' });
  assert.ok(!r.error, `${YAMLLINT} did not run (${r.error && r.error.code}); run: node bin/setup.js test`);
  assert.equal(`${r.stdout}${r.stderr}`.trim(), '');
  assert.equal(r.status, 0);
});

test('the yamllint config carries the settings ansible-lint insists on', () => {
  // ansible-lint refuses a .yamllint that disagrees with these (its yaml rule).
  const r = spawnSync(path.join(ROOT, '.venv/bin/python'), ['-c', `
import yaml, json
c = yaml.safe_load(open('.yamllint'))['rules']
print(json.dumps([c['comments']['min-spaces-from-content'], c['comments-indentation'],
  c['braces']['max-spaces-inside'], c['octal-values']['forbid-implicit-octal'],
  c['octal-values']['forbid-explicit-octal'], c['truthy']['allowed-values'], c['document-start']['present']]))
`], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [1, false, 1, true, true, ['true', 'false'], true]);
});
