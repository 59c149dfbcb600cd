'use strict';
// The README's Ansible section as a newcomer follows it from the top: its first
// command installs Ansible (the npm script that exists, putting ansible-galaxy,
// ansible-playbook and ansible-doc into the folder the next line puts on PATH),
// before any ansible-* command. Its playbook runs on a stock Debian host as
// written: test/e2e/app-source.test.js runs it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { VENV } = require('../../bin/setup');

const ROOT = path.resolve(__dirname, '../..');

/** The commands of the section's fenced sh blocks, in order (comments dropped). */
function ansibleSectionCommands() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Deploy with Ansible');
  assert.ok(start >= 0, 'README.md has no "## Deploy with Ansible" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1].split('\n'))
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

test("the README's Ansible section starts with the command that installs Ansible, then puts it on PATH", () => {
  const commands = ansibleSectionCommands();
  assert.equal(commands[0], 'npm run setup:ansible', `the section's first command: ${commands[0]}`);
  const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;
  assert.match(scripts['setup:ansible'] || '', /bin\/setup\.js ansible$/, 'package.json has no setup:ansible script running bin/setup.js ansible');
  assert.equal(commands[1], `export PATH="$PWD/${path.relative(ROOT, VENV)}/bin:$PATH"`, "the second command does not put setup's venv on PATH");
  const firstAnsible = commands.findIndex((c) => /^ansible(-\w+)?\b/.test(c));
  assert.ok(firstAnsible > 1, `an ansible command comes before Ansible is installed: ${commands[firstAnsible]}`);
});
