'use strict';
// The playbook and roles pass ansible-lint's production profile and yamllint
// with zero findings, and the playbook parses. Uses the pinned tools in .venv/
// (requirements-dev.txt; `node bin/setup.js test` creates it). Offline: the roles
// use ansible.builtin only, so no collection is fetched from Galaxy.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const ANSIBLE_DIR = path.join(ROOT, 'ansible');
const BIN = path.join(ROOT, '.venv/bin');

function tool(name, args) {
  const r = spawnSync(path.join(BIN, name), args, {
    cwd: ANSIBLE_DIR,
    encoding: 'utf8',
    timeout: 300000,
    env: {
      ...process.env,
      PATH: `${BIN}:${process.env.PATH}`,
      NO_COLOR: '1',
      ANSIBLE_NOCOLOR: '1',
      PY_COLORS: '0',
      ANSIBLE_CONFIG: path.join(ANSIBLE_DIR, 'ansible.cfg'),
    },
  });
  if (r.error) throw new Error(`${name}: ${r.error.message} (run \`node bin/setup.js test\` to create .venv)`);
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

test('ansible-lint (production profile) finds nothing', () => {
  const r = tool('ansible-lint', ['--offline', '--profile', 'production', '--nocolor']);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /0 failure\(s\), 0 warning\(s\)/);
  assert.match(r.out, /Profile 'production' was required, and it passed/);
});

test('yamllint finds nothing', () => {
  const r = tool('yamllint', ['--strict', '-c', '.yamllint', '.']);
  assert.equal(r.code, 0, r.out);
  assert.equal(r.out.trim(), '');
});

test('site.yml parses', () => {
  const r = tool('ansible-playbook', ['--syntax-check', '-i', 'localhost,', 'site.yml']);
  assert.equal(r.code, 0, r.out);
});

test('no lint rule is skipped or ignored anywhere', () => {
  assert.ok(!fs.existsSync(path.join(ANSIBLE_DIR, '.ansible-lint-ignore')), 'ansible/.ansible-lint-ignore must not exist');
  const cfg = fs.readFileSync(path.join(ANSIBLE_DIR, '.ansible-lint'), 'utf8');
  assert.doesNotMatch(cfg, /^\s*(skip_list|warn_list)\s*:/m, 'no skip_list / warn_list in .ansible-lint');
  const r = spawnSync('grep', ['-rn', 'noqa', ANSIBLE_DIR], { encoding: 'utf8' });
  assert.equal(r.stdout, '', 'no # noqa in ansible/');
});
