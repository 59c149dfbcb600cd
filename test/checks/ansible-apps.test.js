'use strict';
// Several apps (tunekit_apps) under real Ansible: the tunekit role expands and
// checks the list (tasks/apps.yml) with the very lines `tunekit render` refuses
// it with — an entry's own faults, an app's broken rule, a host-wide value said
// once, what the apps share — and divides the CPUs between their workers alike.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { ROOT } = require('../lib/ansible');
const config = require('../../lib/config');

const PLAYBOOK = path.join(ROOT, '.venv/bin/ansible-playbook');
const PLAY = path.join(ROOT, 'test/fixtures/apps/check-playbook.yml');

/** The role on `doc` (tunekit_apps and host values): {ok, lines (its refusal), out}. */
async function role(t, doc) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-ansible-apps-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'vars.json');
  fs.writeFileSync(file, JSON.stringify({ tunekit_nginx_version: '1.22.1', ...doc }));
  const r = await runCommand(PLAYBOOK, ['-i', 'localhost,', PLAY, '-e', `@${file}`, '-e', `ansible_python_interpreter=${path.join(ROOT, '.venv/bin/python')}`,
    '--skip-tags', 'tunekit_host_checks'], {
    cwd: dir, env: { ANSIBLE_NOCOLOR: '1', ANSIBLE_ROLES_PATH: path.join(ROOT, 'roles'), ANSIBLE_LOCAL_TEMP: path.join(dir, 'tmp') }, timeoutMs: 300000,
  });
  const fatal = /^fatal: \[localhost\]: FAILED! => (\{.*\})$/m.exec(r.out);
  if (r.code === 0) return { ok: true, lines: [], out: r.out };
  assert.ok(fatal, `the play failed without a refusal:\n${r.out.slice(-3000)}`);
  return { ok: false, lines: JSON.parse(fatal[1]).msg.split('\n'), out: r.out };
}

/** The lines `tunekit render` refuses `doc` with. */
function render(doc) {
  try {
    config.resolve({ overrides: { tunekit_nginx_version: '1.22.1', ...doc } });
  } catch (err) {
    const m = /^(?:inconsistent settings|tunekit_apps):\n {2}- ([\s\S]*)$/.exec(err.message);
    if (m) return m[1].split('\n  - ');
    return [err.message.replace(/^inconsistent settings: /, '')];
  }
  return [];
}

const apps = (a = {}, b = {}) => [{ name: 'api', server_name: 'api.example.test', ...a }, { name: 'web', server_name: 'www.example.test', ...b }];

test('a list that fits passes, its workers dividing the CPUs as render divides them', async (t) => {
  const doc = { tunekit_host_cpus: 4, tunekit_apps: apps({ workers: 1 }) };
  const r = await role(t, doc);
  assert.ok(r.ok, r.out.slice(-3000));
  const workers = config.resolve({ overrides: { tunekit_nginx_version: '1.22.1', ...doc } }).tunekit_apps_resolved.map((a) => [a.tunekit_app_name, a.tunekit_app_workers]);
  assert.deepEqual(workers, [['api', 1], ['web', 3]]);
  const said = /"msg": (\[[\s\S]*?\]\s*\])/.exec(r.out);
  assert.ok(said, r.out.slice(-2000));
  assert.deepEqual(JSON.parse(said[1]), workers);
});

for (const [what, doc, count] of [
  ['what the apps share: more workers than CPUs, one server_name and location twice',
    { tunekit_host_cpus: 2, tunekit_apps: apps({ workers: 2 }, { workers: 1, server_name: 'api.example.test' }) }, 2],
  ['an app\'s broken rule, and a host-wide one said once',
    { tunekit_host_cpus: 2, tunekit_nginx_worker_rlimit_nofile: 100, tunekit_apps: apps({}, { tunekit_app_keepalive_timeout_ms: 1000 }) }, 2],
  ['an entry without a name, a host-wide key, an unknown key',
    { tunekit_apps: [{ server_name: 'x.test' }, { name: 'api', tunekit_nginx_worker_connections: 8 }, { name: 'web', wokers: 1 }] }, 3],
]) {
  test(`the role refuses ${what} with render's lines`, async (t) => {
    const expected = render(doc);
    assert.equal(expected.length, count, expected.join('\n'));
    const r = await role(t, doc);
    assert.deepEqual(r.lines, expected);
  });
}
