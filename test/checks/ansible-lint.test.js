'use strict';
// The collection (galaxy.yml, meta/, roles/, playbooks/) and the checkout's
// ansible/ pass ansible-lint's production profile and yamllint with zero
// findings, and the checkout's playbook parses. Uses the pinned tools in .venv/
// (requirements-dev.txt; `node bin/setup.js test` creates it). Offline: the roles
// use ansible.builtin only, so no collection is fetched from Galaxy.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const ANSIBLE_DIR = path.join(ROOT, 'ansible');
// The Ansible content of the repository (.ansible-lint excludes the rest).
const CONTENT = ['galaxy.yml', 'meta', 'roles', 'playbooks', 'ansible'];
const BIN = path.join(ROOT, '.venv/bin');

function tool(name, args, cwd = ROOT) {
  const r = spawnSync(path.join(BIN, name), args, {
    cwd,
    encoding: 'utf8',
    // A bound for a hung tool: this file took 33 s to 379 s here, by the load beside it.
    timeout: 900000,
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
  const r = tool('yamllint', ['--strict', '-c', '.yamllint', ...CONTENT]);
  assert.equal(r.code, 0, r.out);
  assert.equal(r.out.trim(), '');
});

test("the checkout's site.yml parses (ansible.cfg's roles_path finds ../roles)", () => {
  const r = tool('ansible-playbook', ['--syntax-check', '-i', 'localhost,', 'site.yml'], ANSIBLE_DIR);
  assert.equal(r.code, 0, r.out);
});

test('no lint rule is skipped or ignored anywhere', () => {
  assert.ok(!fs.existsSync(path.join(ROOT, '.ansible-lint-ignore')), '.ansible-lint-ignore must not exist');
  const cfg = fs.readFileSync(path.join(ROOT, '.ansible-lint'), 'utf8');
  assert.doesNotMatch(cfg, /^\s*(skip_list|warn_list)\s*:/m, 'no skip_list / warn_list in .ansible-lint');
  const r = spawnSync('grep', ['-rn', 'noqa', ...CONTENT], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.stdout, '', `no # noqa in ${CONTENT.join(', ')}`);
});
