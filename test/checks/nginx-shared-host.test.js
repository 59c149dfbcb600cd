'use strict';
// A shared host: the kit's nginx.conf keeps Debian's include points, so the
// host's own sites stay loaded, and a clash with one of them is nginx's own
// refusal, naming the file and the line. Runs Debian 13's nginx against its own
// /etc/nginx (a copy, with the kit's files rendered in), chrooted in a private
// mount namespace (test/lib/nspawn.js runInRootfs): the cached tree is untouched.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ensureRootfsAll, runInRootfs, DEFAULT_SUITE } = require('../lib/nspawn');

let debianNginx;

test.before(async () => {
  const roots = await ensureRootfsAll([DEFAULT_SUITE]);
  debianNginx = path.join(roots[DEFAULT_SUITE], 'etc/nginx');
});

// Debian's /etc/nginx with the kit's nginx files rendered over it; returns the
// nginx -t result of the distribution's nginx on that tree.
async function nginxTest(t, set, { disable = [], files = {} } = {}) {
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-shared-'));
  t.after(() => fs.rmSync(tree, { recursive: true, force: true }));
  fs.cpSync(debianNginx, tree, { recursive: true, verbatimSymlinks: true });
  for (const site of disable) fs.rmSync(path.join(tree, 'sites-enabled', site));
  for (const [rel, text] of Object.entries(files)) fs.writeFileSync(path.join(tree, rel), text);
  const r = await runInRootfs(DEFAULT_SUITE, 'nginx -v 2>&1');
  const version = /nginx\/(\S+)/.exec(r.stdout)[1];
  const vars = config.resolve({ set: [...set, `tunekit_nginx_version=${version}`] });
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-shared-render-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  renderer.render(vars, out, { layers: ['nginx'] });
  fs.cpSync(path.join(out, 'etc/nginx'), tree, { recursive: true });
  return runInRootfs(DEFAULT_SUITE, 'mkdir -p /run/tunekit-app /var/log/nginx; nginx -t', { binds: { [tree]: '/etc/nginx' } });
}

test("Debian's welcome site is default_server on :80: the kit's default server clashes, and nginx names the file and line", async (t) => {
  const r = await nginxTest(t, []);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /a duplicate default server for 0\.0\.0\.0:80 in \/etc\/nginx\/(sites-enabled\/default|tunekit\/site\.conf):\d+/);
});

test('with that site disabled (its sites-enabled link removed), the shared configuration passes', async (t) => {
  const r = await nginxTest(t, [], { disable: ['default'] });
  assert.equal(r.code, 0, r.stderr);
});

test("the kit's site on a name of its own, not the default server, sits beside Debian's site", async (t) => {
  const r = await nginxTest(t, ['tunekit_nginx_default_server=false', 'tunekit_nginx_server_name=app.example.test']);
  assert.equal(r.code, 0, r.stderr);
});

test("a second upstream of the kit's name is nginx's refusal too, naming where", async (t) => {
  const name = config.loadDefaults().tunekit_nginx_upstream_name;
  const r = await nginxTest(t, [], { disable: ['default'], files: { 'conf.d/legacy.conf': `upstream ${name} {\n    server 127.0.0.1:9;\n}\n` } });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, new RegExp(`duplicate upstream "${name}" in /etc/nginx/`));
});
