'use strict';
// The tunekit role's type check under real Ansible (the pinned ansible-core in
// .venv/): templates/types.j2 passes the definition's defaults and names each
// wrong value given with -e, as `tunekit render` names it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { defaultFiles } = require('../../lib/config');
const { TYPES_TEMPLATE } = require('../../lib/config/types');

const ROOT = path.resolve(__dirname, '../..');
const PLAYBOOK = path.join(ROOT, '.venv/bin/ansible-playbook');

async function typeRefusals(t, extra) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-ansible-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const play = path.join(dir, 'play.yml');
  fs.writeFileSync(play, [
    '- hosts: localhost',
    '  gather_facts: false',
    '  connection: local',
    '  tasks:',
    '    - name: Write the type refusals',
    '      ansible.builtin.copy:',
    // A heading line, so that no refusals is still content.
    `        content: "refusals:\\n{{ lookup('ansible.builtin.template', '${path.join(ROOT, TYPES_TEMPLATE)}') }}"`,
    `        dest: ${path.join(dir, 'refusals.txt')}`,
    '        mode: "0600"',
    '',
  ].join('\n'));
  const vars = defaultFiles().flatMap((f) => ['-e', `@${f}`]);
  const r = await runCommand(PLAYBOOK, ['-i', 'localhost,', play, ...vars, '-e', 'tunekit_nginx_version=1.22.1',
    '-e', `ansible_python_interpreter=${path.join(ROOT, '.venv/bin/python')}`, ...extra], {
    cwd: dir, env: { ANSIBLE_NOCOLOR: '1' }, timeoutMs: 300000,
  });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const text = fs.readFileSync(path.join(dir, 'refusals.txt'), 'utf8');
  const [heading, ...lines] = text.split('\n');
  assert.equal(heading, 'refusals:');
  return lines.map((l) => l.trim()).filter(Boolean);
}

test('the defaults pass the role\'s type check', async (t) => {
  assert.deepEqual(await typeRefusals(t, []), []);
});

test('the role names each wrong value with its type', async (t) => {
  const lines = await typeRefusals(t, [
    '-e', 'tunekit_app_workers=abc',
    '-e', '{"tunekit_socket_mode": 660}',
    '-e', 'tunekit_nginx_reuseport=maybe',
    '-e', 'tunekit_nginx_listen_port=99999',
  ]);
  assert.deepEqual(lines, [
    'tunekit_socket_mode=660 is not mode: expected an octal mode of four digits, e.g. "0660"',
    'tunekit_app_workers=abc is not int 0..: expected a whole number, at least 0',
    'tunekit_nginx_listen_port=99999 is not port: expected a port number 1..65535',
    'tunekit_nginx_reuseport=maybe is not bool: expected true or false',
  ]);
});

// -e key=value passes text (Ansible documents it); a derived value would then
// be computed from text ("30" + 5). The role names the input and the JSON form
// instead of failing inside a derived expression.
test('the role names a number given as text with -e key=value, and how to pass it', async (t) => {
  const lines = await typeRefusals(t, [
    '-e', 'tunekit_nginx_upstream_keepalive_timeout_s=30',
    '-e', 'tunekit_nginx_tls=false',
  ]);
  assert.deepEqual(lines, [
    'tunekit_nginx_upstream_keepalive_timeout_s="30" is text where int 1.. wants a number: write it without quotes in YAML; ' +
      'ansible-playbook -e key=value always passes text, so give it as JSON: -e \'{"tunekit_nginx_upstream_keepalive_timeout_s": 30}\'',
    'tunekit_nginx_tls="false" is text where bool wants true or false: write it without quotes in YAML; ' +
      'ansible-playbook -e key=value always passes text, so give it as JSON: -e \'{"tunekit_nginx_tls": false}\'',
  ]);
});
