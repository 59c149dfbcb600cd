'use strict';
// The Ansible collection tunekit.stack as an operator installs it: built from
// the checkout (`ansible-galaxy collection build`), installed from the tarball
// into a collections path of its own outside the repository, then, with only
// that path and nothing of the checkout:
// - `ansible-test sanity` passes on the installed tree, every test of it, and
//   the tests that apply to it ran (SANITY_RAN; pep8 and pylint find no Python of
//   the collection's own to check: bin/ is JavaScript, listed in its ignore file).
//   yamllint and runtime-metadata install their packages from PyPI into
//   environments of ansible-test's own, with the kit's stand-in for the pip
//   bootstrap ansible-test would fetch from an unreachable host (sanityHome).
// - `ansible-doc -t role tunekit.stack.ROLE` prints each role's variables with
//   their descriptions (its spec, generated from the definition).
// - a user's playbook, outside the repository, listing the kit's roles next to a
//   role of its own, parses and lists the kit's checks first.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { installCollection } = require('../lib/collection');
const argspecs = require('../../lib/config/argspecs');
const { defaultFiles, readDefinition } = require('../../lib/config/definition');

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, '.venv/bin');
// The sanity tests that have files of the collection to check (the others find
// no Python plugins or modules in it and say "No tests applicable").
// pep8 and pylint: the app archiver the role runs on the controller (roles/tunekit_app/files/app-archive.py).
const SANITY_RAN = ['ignores', 'line-endings', 'no-illegal-filenames', 'no-smart-quotes', 'shebang', 'shellcheck', 'symlinks', 'yamllint', 'runtime-metadata', 'pep8', 'pylint'];

// yamllint and runtime-metadata run in virtual environments ansible-test makes
// itself, bootstrapping pip with a script from ci-files.testing.ansible.com
// (unreachable here); it takes a copy from its cache instead, so the run gets a
// HOME whose cache holds the kit's stand-in under the name ansible-test looks for.
function sanityHome(root) {
  const source = fs.readFileSync(path.join(ROOT, '.venv/lib/python3.11/site-packages/ansible_test/_internal/python_requirements.py'), 'utf8');
  const pip = /pip='([0-9.]+)'/.exec(source);
  assert.ok(pip, "ansible-test's pinned pip version not found in its python_requirements.py: update sanityHome() for this ansible-core");
  const home = path.join(root, 'home');
  const cache = path.join(home, '.ansible/test/cache');
  fs.mkdirSync(cache, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'test/fixtures/collection/pip-bootstrap.py'), path.join(cache, `get_pip_${pip[1].replace(/\./g, '_')}.py`));
  return home;
}

let dir;
let c;

test.before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-collection-'));
  c = await installCollection(dir);
});

test.after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('ansible-test sanity passes on the installed collection', async () => {
  const r = await runCommand(path.join(BIN, 'ansible-test'), ['sanity', '--python', '3.11', '--color', 'no', '-v'],
    { cwd: c.root, env: { ...c.env, HOME: sanityHome(dir) }, timeoutMs: 900000 });
  assert.equal(r.code, 0, r.out);
  for (const name of SANITY_RAN) {
    const m = new RegExp(`Running sanity test "${name}"[^\\n]*\\n(.*)`).exec(r.out);
    assert.ok(m, `sanity test ${name} did not run:\n${r.out}`);
    assert.doesNotMatch(m[1], /No tests applicable/, `sanity test ${name} found nothing to check`);
  }
  assert.doesNotMatch(r.out, /Required program "shellcheck" not found/, 'shellcheck is missing: node bin/setup.js test installs it');
});

test('ansible-doc prints every role\'s variables with their descriptions', async () => {
  const squeeze = (s) => s.replace(/\s+/g, '');
  for (const [role, { files }] of Object.entries(argspecs.ROLES)) {
    const r = await runCommand(path.join(BIN, 'ansible-doc'), ['-t', 'role', `tunekit.stack.${role}`], { cwd: dir, env: c.env, timeoutMs: 300000 });
    assert.equal(r.code, 0, r.out);
    assert.match(r.stdout, new RegExp(`ROLE: \\*?tunekit\\.stack\\.${role}\\*? `));
    const vars = readDefinition(defaultFiles().filter((f) => files.includes(path.basename(f))));
    assert.ok(vars.length > 0, `${role} documents no variable`);
    for (const v of vars) {
      assert.match(r.stdout, new RegExp(`^[-\\s]*${v.key}\\s`, 'm'), `ansible-doc for ${role} does not list ${v.key}`);
      // ansible-doc wraps the text (breaking at hyphens too): compare it without the white space.
      assert.ok(squeeze(r.stdout).includes(squeeze(v.what)), `ansible-doc for ${role} does not print what ${v.key} does: ${v.what}`);
    }
  }
});

test("a user's playbook lists the kit's roles next to its own, from the installed collection alone", async () => {
  const user = path.join(dir, 'user');
  fs.mkdirSync(path.join(user, 'roles/my_site/tasks'), { recursive: true });
  fs.writeFileSync(path.join(user, 'roles/my_site/tasks/main.yml'), '---\n- name: My own task\n  ansible.builtin.debug:\n    msg: mine\n');
  fs.writeFileSync(path.join(user, 'site.yml'), [
    '---',
    '- name: My web servers',
    '  hosts: web',
    '  become: true',
    '  roles:',
    '    - tunekit.stack.tunekit_sysctl',
    '    - tunekit.stack.tunekit_app',
    '    - tunekit.stack.tunekit_nginx',
    '    - my_site',
    '',
  ].join('\n'));
  fs.writeFileSync(path.join(user, 'inventory.ini'), '[web]\nweb1\n');
  const env = { ...c.env, ANSIBLE_ROLES_PATH: path.join(user, 'roles') };
  const r = await runCommand(path.join(BIN, 'ansible-playbook'), ['-i', 'inventory.ini', '--list-tasks', 'site.yml'], { cwd: user, env, timeoutMs: 300000 });
  assert.equal(r.code, 0, r.out);
  const roles = [...r.stdout.matchAll(/^\s+(\S+) : /gm)].map((m) => m[1]).filter((x, i, a) => x !== a[i - 1]);
  // The checks role first (a dependency), each kit role after it from the collection, then the user's own.
  assert.deepEqual(roles.filter((x) => x !== 'tunekit.stack.tunekit'), ['tunekit.stack.tunekit_sysctl', 'tunekit.stack.tunekit_app', 'tunekit.stack.tunekit_nginx', 'my_site']);
  assert.equal(roles[0], 'tunekit.stack.tunekit');
  // The kit's own play, by its name in the collection.
  const site = await runCommand(path.join(BIN, 'ansible-playbook'), ['-i', 'inventory.ini', '--syntax-check', 'tunekit.stack.site'], { cwd: user, env, timeoutMs: 300000 });
  assert.equal(site.code, 0, site.out);
  assert.match(site.stdout, /ansible_collections\/tunekit\/stack\/playbooks\/site\.yml/);
});
