'use strict';
// The tunekit role's type check under real Ansible (the pinned ansible-core in
// .venv/): templates/types.j2 passes the definition's defaults and names each
// wrong value given with -e, as `tunekit render` names it.

const test = require('node:test');
const assert = require('node:assert/strict');
const { templateLines } = require('../lib/ansible');
const { TYPES_TEMPLATE } = require('../../lib/config/types');

const typeRefusals = (t, extra) => templateLines(t, TYPES_TEMPLATE, extra);

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
