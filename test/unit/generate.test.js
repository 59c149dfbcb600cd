'use strict';
// `npm run generate` (lib/generate.js) writes every generated file of the tree:
// the Ansible role's types.j2, the variables and version tables, the stock
// profile, the roles' argument specs, the collection's version and sanity
// ignore file, the reference configs. The committed tree must be what it writes,
// and a change made in the definition and a template alone must reach all of
// them (checked in a copy of the repository, never in this one).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { generate, checkReport } = require('../../lib/generate');
const { ROOT } = require('../../lib/template');
const { runCommand } = require('../lib/util');
const YAML = require('yaml');

test('the committed tree is what npm run generate writes', () => {
  const changes = generate({ write: false });
  assert.deepEqual(changes, [], checkReport(changes));
});

// The project's files (tracked and new, not ignored) copied into a temp dir,
// node_modules linked; removed after the test.
function copyRepo(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-generate-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n').filter((f) => f && fs.existsSync(path.join(ROOT, f)) && !fs.lstatSync(path.join(ROOT, f)).isSymbolicLink());
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

const npm = (dir, ...args) => runCommand('npm', ['run', '--silent', ...args], { cwd: dir, timeoutMs: 120000 });
const read = (dir, rel) => fs.readFileSync(path.join(dir, rel), 'utf8');
const edit = (dir, rel, fn) => fs.writeFileSync(path.join(dir, rel), fn(read(dir, rel)));

test('a directive added to the definition and a template reaches every generated file', async (t) => {
  const dir = copyRepo(t);
  edit(dir, 'roles/tunekit/defaults/main/10-nginx.yml', (text) => `${text}
# Whether nginx sets SO_KEEPALIVE on its connections to the app.
# Unit: bool | Upstream default: off | Why: a directive added by the generate test
# Type: bool
# Stock: false
# See: https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_socket_keepalive
tunekit_nginx_proxy_socket_keepalive: true
`);
  edit(dir, 'nginx/tunekit/proxy.conf.j2', (text) =>
    `${text}proxy_socket_keepalive {{ 'on' if tunekit_nginx_proxy_socket_keepalive else 'off' }};\n`);

  const stale = await npm(dir, 'generate', '--', '--check');
  assert.equal(stale.code, 1, stale.out);
  assert.match(stale.stderr, /^ {2}docs\/variables\.md: differs from what generate writes$/m);
  assert.match(stale.stderr, /\nrun: npm run generate\n$/);

  const run = await npm(dir, 'generate');
  assert.equal(run.code, 0, run.out);
  const refs = ['uds', 'tcp', 'stock', 'https'].map((n) => `docs/reference/${n}/etc/nginx/tunekit/proxy.conf`);
  assert.deepEqual(run.stdout.trim().split('\n').sort(), [
    'roles/tunekit/templates/types.j2', 'ansible/README.md', 'docs/variables.md', 'ansible/profiles/stock.yml',
    'roles/tunekit_nginx/meta/argument_specs.yml', ...refs,
  ].map((f) => `wrote ${f}`).sort());
  // The same lines as the stale check named: --check lists what generate writes.
  assert.deepEqual(stale.stderr.split('\n').filter((l) => l.startsWith('  ')).map((l) => l.trim().split(':')[0]).sort(),
    run.stdout.trim().split('\n').map((l) => l.replace(/^wrote /, '')).sort());

  assert.match(read(dir, 'roles/tunekit/templates/types.j2'), /tunekit_nginx_proxy_socket_keepalive=\{\{ tunekit_nginx_proxy_socket_keepalive \}\} is not bool/);
  for (const doc of ['docs/variables.md', 'ansible/README.md']) {
    assert.match(read(dir, doc), /^\| `tunekit_nginx_proxy_socket_keepalive` \| `true` \| `bool` \| bool \| off \| Whether nginx sets SO_KEEPALIVE/m, doc);
  }
  assert.match(read(dir, 'ansible/profiles/stock.yml'), /^tunekit_nginx_proxy_socket_keepalive: false$/m);
  // ansible-doc -t role tunekit.stack.tunekit_nginx: the variable, what it does, its type and default.
  const spec = YAML.parse(read(dir, 'roles/tunekit_nginx/meta/argument_specs.yml')).argument_specs.main.options.tunekit_nginx_proxy_socket_keepalive;
  assert.equal(spec.description[0], 'Whether nginx sets SO_KEEPALIVE on its connections to the app.');
  assert.deepEqual([spec.type, spec.default], ['bool', true]);
  for (const ref of refs) {
    const want = ref.includes('/stock/') ? 'off' : 'on';
    assert.match(read(dir, ref), new RegExp(`\\nproxy_socket_keepalive ${want};\\n$`), ref);
  }

  // Done: the drift check passes, and a second run changes nothing and prints nothing.
  const check = await npm(dir, 'generate', '--', '--check');
  assert.equal(check.code, 0, check.out);
  const again = await npm(dir, 'generate');
  assert.equal(again.code, 0, again.out);
  assert.equal(again.stdout, '');
});

test('generate removes a reference file no template produces, and --check names it', async (t) => {
  const dir = copyRepo(t);
  fs.writeFileSync(path.join(dir, 'docs/reference/uds/etc/nginx/tunekit/old.conf'), 'gone\n');
  const check = await npm(dir, 'generate', '--', '--check');
  assert.equal(check.code, 1, check.out);
  assert.equal(check.stderr, '1 generated file(s) out of date:\n' +
    '  docs/reference/uds/etc/nginx/tunekit/old.conf: not generated any more (generate removes it)\nrun: npm run generate\n');
  const run = await npm(dir, 'generate');
  assert.equal(run.stdout, 'removed docs/reference/uds/etc/nginx/tunekit/old.conf\n');
  assert.ok(!fs.existsSync(path.join(dir, 'docs/reference/uds/etc/nginx/tunekit/old.conf')));
});

test('a definition generate cannot read is refused in one line, and nothing is written', async (t) => {
  const dir = copyRepo(t);
  edit(dir, 'roles/tunekit/defaults/main/10-nginx.yml', (text) =>
    text.replace('# Stock: 768\n', '# Stock: {{ tunekit_x }}\n').replace('tunekit_nginx_worker_connections: 4096', 'tunekit_nginx_worker_connections: 2048'));
  const before = read(dir, 'docs/variables.md');
  const run = await npm(dir, 'generate');
  assert.equal(run.code, 2, run.out);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, /^generate: roles\/tunekit\/defaults\/main\/10-nginx\.yml: tunekit_nginx_worker_connections: "# Stock: \{\{ tunekit_x \}\}": quote a Jinja expression, as the definition's values do: "\{\{ tunekit_x \}\}"\n$/);
  assert.equal(read(dir, 'docs/variables.md'), before);
});
