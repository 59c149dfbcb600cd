'use strict';
// Node (lib/template.js, nunjucks) and Ansible (ansible.builtin.template, Jinja2)
// render every template of the manifest to the same bytes, for several variable
// sets. Ansible loads the same role defaults (derived values included) and the
// same manifest, so this also proves both evaluate the derived values alike.
// One ansible-playbook run renders all sets: one inventory host per set.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { listFiles } = require('../lib/util');

const ANSIBLE = path.join(ROOT, '.venv/bin/ansible-playbook');
const profile = (p) => path.join(ROOT, 'ansible/profiles', p);

const SETS = {
  // Each set names an nginx version, so both sides of every version branch
  // (docs/versions.md) are rendered by both engines; per_worker and https name a
  // systemd version (the app unit's RestartSteps= from 254), the others leave it unknown.
  uds: { varsFiles: [], set: ['tunekit_nginx_version=1.18.0'] },
  // An app in a home, its folder opened to the unit (ProtectHome=tmpfs, BindReadOnlyPaths=).
  tcp: { varsFiles: [], set: ['tunekit_nginx_version=1.22.1', 'tunekit_upstream_kind=tcp', 'tunekit_app_tcp_port=3101',
    'tunekit_app_module=/home/me/my.app/app.js', 'tunekit_app_read_only_paths=[/home/me/my.app, /home/me/lib]'] },
  per_worker: { varsFiles: [profile('small.yml')], set: ['tunekit_nginx_version=1.26.3', 'tunekit_upstream_kind=per-worker', 'tunekit_app_workers=3', 'tunekit_systemd_version=257'] },
  sticky: { varsFiles: [], set: ['tunekit_nginx_version=1.30.6', 'tunekit_upstream_kind=per-worker', 'tunekit_app_workers=2', 'tunekit_nginx_upstream_sticky=true'] },
  stock: { varsFiles: [profile('stock.yml')], set: ['tunekit_nginx_version=1.30.6', 'tunekit_app_tcp_host=::1'] },
  stock_old: { varsFiles: [profile('stock.yml')], set: ['tunekit_nginx_version=1.18.0'] },
  large: { varsFiles: [profile('large.yml')], set: ['tunekit_nginx_version=1.24.0', 'tunekit_nginx_access_log=off', 'tunekit_nginx_listen_address=127.0.0.1'] },
  https_old: { varsFiles: [], set: ['tunekit_nginx_version=1.24.0', 'tunekit_nginx_tls=true', 'tunekit_nginx_server_name=example.com'] },
  https: { varsFiles: [], set: ['tunekit_nginx_version=1.26.3', 'tunekit_nginx_tls=true', 'tunekit_nginx_tls_profile=modern', 'tunekit_nginx_tls_port=8443',
    'tunekit_nginx_hsts_max_age=63072000', 'tunekit_nginx_tls_stapling_resolver=127.0.0.53', 'tunekit_nginx_gzip_level=6', 'tunekit_systemd_version=252'] },
  http3: { varsFiles: [], set: ['tunekit_nginx_version=1.30.6', 'tunekit_nginx_openssl_version=3.6.5', 'tunekit_nginx_http3_module=true', 'tunekit_nginx_tls=true',
    'tunekit_nginx_http3=true', 'tunekit_nginx_tls_early_data=true', 'tunekit_nginx_quic_retry=true'] },
  // Several apps: two sites, one with a location prefix, one app's own upstream kind and workers.
  apps: { varsFiles: [path.join(ROOT, 'test/fixtures/apps/three-apps.yml')], set: ['tunekit_nginx_version=1.26.3', 'tunekit_host_cpus=4'] },
  dedicated: { varsFiles: [], set: ['tunekit_nginx_version=1.22.1', 'tunekit_nginx_host_mode=dedicated', 'tunekit_nginx_default_server=false', 'tunekit_nginx_server_name=app.example.test'] },
};


// A set's overrides as Ansible host variables: the vars files' mappings, then
// the --set pairs, parsed the way `tunekit render` parses them.
function hostVars(set) {
  const vars = {};
  for (const f of set.varsFiles) Object.assign(vars, config.readYamlFile(f));
  for (const pair of set.set) {
    const [k, v] = config.parseSet(pair);
    vars[k] = v;
  }
  return vars;
}

test('Node and Ansible render every manifest template to the same bytes', { timeout: 600_000 }, (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-parity-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const hosts = {};
  for (const [name, set] of Object.entries(SETS)) {
    hosts[name] = { ...hostVars(set), parity_out: path.join(tmp, 'ansible', name) };
    const vars = config.resolve(set);
    renderer.render(vars, path.join(tmp, 'node', name));
  }
  const inventory = {
    all: {
      vars: { ansible_connection: 'local', ansible_python_interpreter: path.join(ROOT, '.venv/bin/python'), parity_repo: ROOT },
      hosts,
    },
  };
  // JSON is YAML: Ansible's yaml inventory plugin reads it.
  fs.writeFileSync(path.join(tmp, 'inventory.yml'), JSON.stringify(inventory, null, 2));

  // --skip-tags: the tunekit role's host checks (apt, nginx -v, nginx -t) are for
  // real hosts; the parity run needs only its definition and templates.
  const r = spawnSync(ANSIBLE, ['-i', path.join(tmp, 'inventory.yml'), path.join(ROOT, 'test/fixtures/nginx/parity-playbook.yml'),
    '--skip-tags', 'tunekit_host_checks'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: {
      ...process.env,
      ANSIBLE_ROLES_PATH: path.join(ROOT, 'roles'),
      ANSIBLE_LIBRARY: path.join(ROOT, 'plugins/modules'),
      ANSIBLE_NOCOLOR: '1',
      ANSIBLE_LOCAL_TEMP: path.join(tmp, 'ansible-tmp'),
      ANSIBLE_RETRY_FILES_ENABLED: '0',
    },
  });
  assert.ok(!r.error, `${ANSIBLE} did not run (${r.error && r.error.code}); run: node bin/setup.js test`);
  assert.equal(r.status, 0, `ansible-playbook failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`);

  for (const name of Object.keys(SETS)) {
    const a = path.join(tmp, 'ansible', name);
    const n = path.join(tmp, 'node', name);
    const files = listFiles(n);
    assert.ok(files.includes('etc/nginx/nginx.conf'), `${name}: node rendered no nginx.conf`);
    assert.deepEqual(listFiles(a), files, `${name}: Ansible and Node rendered different file sets`);
    for (const f of files) {
      const want = fs.readFileSync(path.join(n, f), 'utf8');
      const got = fs.readFileSync(path.join(a, f), 'utf8');
      assert.equal(got, want, `${name}: ${f} differs between Ansible (actual) and Node (expected)`);
    }
  }
  // The sets differ where they should: a vacuous comparison would not catch drift.
  const up = (name) => fs.readFileSync(path.join(tmp, 'node', name, 'etc/nginx/tunekit/upstream.conf'), 'utf8');
  assert.match(up('per_worker'), /server unix:\/run\/tunekit-app\/app\.sock\.3 /);
  assert.match(up('tcp'), /server 127\.0\.0\.1:3101 /);
  const unit = (name) => fs.readFileSync(path.join(tmp, 'node', name, 'etc/systemd/system/tunekit-app.service'), 'utf8');
  assert.match(unit('tcp'), /^ProtectHome=tmpfs\nBindReadOnlyPaths=\/home\/me\/my\.app \/home\/me\/lib$/m);
  assert.match(unit('uds'), /^ProtectHome=yes$/m);
  assert.ok(!fs.existsSync(path.join(tmp, 'ansible', 'stock', 'etc/nginx/tunekit/upstream.conf')));
  // Several apps: each its own settings and unit, its upstream block and its location.
  assert.match(up('apps'), /upstream api \{[^}]*server unix:\/run\/api\/app\.sock\.1 [^}]*server unix:\/run\/api\/app\.sock\.2 /);
  assert.match(up('apps'), /upstream admin \{[^}]*server unix:\/run\/admin\/app\.sock /);
  const site = fs.readFileSync(path.join(tmp, 'node', 'apps', 'etc/nginx/tunekit/site.conf'), 'utf8');
  assert.match(site, /server_name admin\.example\.test;[\s\S]*location \/admin\/ \{\s*#[^\n]*\n[^\n]*\n\s*proxy_pass http:\/\/admin;/);
  for (const app of ['api', 'web', 'admin']) {
    assert.ok(fs.existsSync(path.join(tmp, 'ansible', 'apps', `etc/systemd/system/${app}.service`)), `apps: Ansible rendered no ${app}.service`);
  }
});
