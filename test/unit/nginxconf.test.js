'use strict';
// lib/nginxconf.js: where each directive of `nginx -T` output is written, so a
// finding can name the file and line a user opens to change it.
const test = require('node:test');
const assert = require('node:assert/strict');
const nginxconf = require('../../lib/nginxconf');

const DUMP = [
  'nginx: the configuration file /etc/nginx/nginx.conf syntax is ok',
  '# configuration file /etc/nginx/nginx.conf:',
  'events { }',
  'http {',
  '    # a comment with a brace {',
  '    include /etc/nginx/sites-enabled/*;',
  '}',
  '',
  '# configuration file /etc/nginx/sites-enabled/app:',
  'upstream app {',
  '    server unix:/run/app/app.sock;',
  '    add_header X-Note "two',
  'lines";',
  "    keepalive_timeout 65s; keepalive 8;",
  '}',
  '',
].join('\n');

test('every directive carries the file and line it is written on, includes expanded', () => {
  const { tree } = nginxconf.parseDump(DUMP);
  const up = nginxconf.findAll(tree, 'upstream')[0].node;
  const line = (name) => nginxconf.where(nginxconf.child(up.children, name));
  assert.equal(nginxconf.where(up), '/etc/nginx/sites-enabled/app:1');
  assert.equal(line('server'), '/etc/nginx/sites-enabled/app:2');
  assert.equal(line('keepalive_timeout'), '/etc/nginx/sites-enabled/app:5', 'after a quoted value that spans two lines');
  assert.equal(line('keepalive'), '/etc/nginx/sites-enabled/app:5', 'two directives on one line');
  assert.equal(nginxconf.where(nginxconf.child(tree, 'http')), '/etc/nginx/nginx.conf:2');
  assert.equal(nginxconf.where(nginxconf.parse('events {}\n\nhttp { }')[1]), 'line 3', 'text with no file: its line alone');
});
