'use strict';
// Several apps on one host (tunekit_apps, lib/config/apps.js): each app's values
// follow its name, what the apps share is divided, and what does not fit is
// refused naming the apps and the numbers, before anything is written; the
// rendered tree holds each app's own files and one nginx for all of them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { listFiles } = require('../lib/util');

const NGINX = ['tunekit_nginx_version=1.22.1'];
const THREE = path.join(ROOT, 'test/fixtures/apps/three-apps.yml');

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-apps-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A vars file of tunekit_apps (and host values) in a temp dir. */
function appsFile(t, doc) {
  const file = path.join(tmpdir(t), 'apps.yml');
  fs.writeFileSync(file, JSON.stringify(doc));
  return file;
}

const resolve = (t, doc, set = []) => config.resolve({ varsFiles: [appsFile(t, doc)], set: [...NGINX, ...set] });
const refusal = (t, doc, set = []) => {
  try {
    resolve(t, doc, set);
  } catch (err) {
    return err.message;
  }
  assert.fail('the set was not refused');
};

const two = (a = {}, b = {}) => ({
  tunekit_host_cpus: 4,
  tunekit_apps: [{ name: 'api', server_name: 'api.example.test', ...a }, { name: 'web', server_name: 'www.example.test', ...b }],
});

test('each app gets its own socket, settings, install directory, upstream and metrics port, derived from its name', (t) => {
  const vars = resolve(t, two({ workers: 3 }));
  const [api, web] = vars.tunekit_apps_resolved;
  assert.equal(api.tunekit_socket_path, '/run/api/app.sock');
  assert.equal(web.tunekit_socket_path, '/run/web/app.sock');
  assert.equal(api.tunekit_app_config_path, '/etc/api/app.json');
  assert.equal(web.tunekit_app_install_dir, '/opt/web');
  assert.equal(api.tunekit_nginx_upstream_name, 'api');
  assert.equal(api.tunekit_nginx_server_name, 'api.example.test');
  assert.equal(api.tunekit_metrics_listen, 'tcp:127.0.0.1:9464');
  assert.equal(web.tunekit_metrics_listen, 'tcp:127.0.0.1:9465');
  // Workers: api fixed at 3, web (0) gets what is left of the 4 CPUs.
  assert.deepEqual([api.tunekit_app_workers, web.tunekit_app_workers], [3, 1]);
  // An entry's own value of any per-app variable wins; the derived ones follow it.
  const own = resolve(t, two({}, { tunekit_socket_dir: '/srv/web-sock', tunekit_nginx_upstream_keepalive: 8 }));
  assert.equal(own.tunekit_apps_resolved[1].tunekit_socket_path, '/srv/web-sock/app.sock');
  assert.equal(own.tunekit_apps_resolved[1].tunekit_nginx_upstream_keepalive, 8);
  assert.equal(own.tunekit_apps_resolved[0].tunekit_nginx_upstream_keepalive, 64);
  // Two apps left at 0 share the CPUs.
  assert.deepEqual(own.tunekit_apps_resolved.map((a) => a.tunekit_app_workers), [2, 2]);
});

test('workers of all apps beyond the CPUs are refused, naming each app and the sum', (t) => {
  const msg = refusal(t, { ...two({ workers: 3 }, { workers: 2 }) });
  assert.match(msg, /tunekit_apps: api 3 \+ web 2 = 5 app workers on 4 CPUs/);
  assert.match(msg, /nginx's event-driven workers \(worker_processes auto\) run on the same CPUs/);
  assert.match(msg, /add up to 4 or less/);
});

test('one server_name and location claimed twice, one socket or upstream name twice are refused, naming both apps', (t) => {
  assert.match(refusal(t, two({}, { server_name: 'api.example.test' })),
    /tunekit_apps: api and web both claim server_name api\.example\.test location \/; give one another server_name, or each its own location prefix/);
  // The same name with different locations is one site with two locations: accepted.
  const shared = resolve(t, two({}, { server_name: 'api.example.test', location: '/web/' }));
  assert.equal(shared.tunekit_apps_resolved[1].tunekit_nginx_location, '/web/');
  assert.match(refusal(t, two({ tunekit_socket_path: '/run/shared.sock' }, { tunekit_socket_path: '/run/shared.sock' })),
    /api and web both listen on \/run\/shared\.sock; give each app its own tunekit_socket_path/);
  assert.match(refusal(t, two({ tunekit_nginx_upstream_name: 'app' }, { tunekit_nginx_upstream_name: 'app' })),
    /api and web both name their upstream block app/);
  assert.match(refusal(t, two({ tunekit_metrics_listen: 'tcp:127.0.0.1:9500' }, { tunekit_metrics_listen: 'tcp:127.0.0.1:9500' })),
    /api and web both serve metrics at tcp:127\.0\.0\.1:9500/);
});

test('the apps\' upstream pools beyond nginx\'s worker_connections are refused with the sum', (t) => {
  const msg = refusal(t, two({ tunekit_nginx_upstream_keepalive: 600 }, { tunekit_nginx_upstream_keepalive: 500 }), ['tunekit_nginx_worker_connections=1024']);
  assert.match(msg, /the upstream pools api 600 \+ web 500 = 1100 idle connections per nginx worker exceed tunekit_nginx_worker_connections=1024/);
});

test('an entry without a name, a name used twice, a host-wide or unknown key is refused before anything is evaluated', (t) => {
  assert.match(refusal(t, { tunekit_apps: [{ server_name: 'x.test' }] }), /tunekit_apps\[0\] has no name/);
  assert.match(refusal(t, { tunekit_apps: ['api'] }), /tunekit_apps\[0\] must be a mapping with at least a name/);
  assert.match(refusal(t, { tunekit_apps: [{ name: 'api' }, { name: 'api', server_name: 'b.test' }] }),
    /entries 0 and 1 are both named api; give each app its own name/);
  assert.match(refusal(t, two({ tunekit_nginx_worker_connections: 8 })),
    /tunekit_apps\[0\] \(api\): tunekit_nginx_worker_connections is host-wide .*; set it outside tunekit_apps/);
  assert.match(refusal(t, two({}, { wokers: 2 })), /tunekit_apps\[1\] \(web\): unknown key wokers; an app takes name, source, server_name, location, workers/);
  assert.match(refusal(t, two({ workers: 2, tunekit_app_workers: 2 })), /sets both workers and tunekit_app_workers; keep one/);
});

test('an app\'s value of the wrong type, or one that breaks a cross-layer rule, names the app', (t) => {
  assert.match(refusal(t, two({ workers: 'two' })), /tunekit_app_workers=two \(from tunekit_apps\[0\] \(api\)\) is not int 0\.\./);
  const msg = refusal(t, two({}, { tunekit_app_keepalive_timeout_ms: 1000 }));
  assert.match(msg, /^inconsistent settings: app web: tunekit_app_keepalive_timeout_ms=1000 must be greater than/);
  // A host-wide value that breaks a rule is said once, for every app.
  const host = refusal(t, two(), ['tunekit_nginx_worker_rlimit_nofile=100']);
  assert.match(host, /inconsistent settings: tunekit_nginx_worker_rlimit_nofile=100 must be at least 2 x/);
  assert.doesNotMatch(host, /app (api|web):/);
});

test('PM2 and the exporters serve one app per host: several apps are refused with them', (t) => {
  assert.match(refusal(t, two(), ['tunekit_process_manager=pm2']), /2 apps need tunekit_process_manager=systemd, not pm2/);
  assert.match(refusal(t, two(), ['tunekit_metrics_exporters=true']), /2 apps need tunekit_metrics_exporters=false/);
});

test('the render holds each app\'s settings and unit, an upstream per app and a site per server_name with a location per app', (t) => {
  const dir = tmpdir(t);
  const vars = config.resolve({ varsFiles: [THREE], set: ['tunekit_nginx_version=1.26.3', 'tunekit_host_cpus=4'] });
  renderer.render(vars, dir);
  const files = listFiles(dir);
  for (const app of ['api', 'web', 'admin']) {
    assert.ok(files.includes(`etc/${app}/app.json`), `${app}'s settings`);
    assert.ok(files.includes(`etc/systemd/system/${app}.service`), `${app}'s unit`);
  }
  assert.ok(!files.includes('etc/systemd/system/tunekit-app.service'), 'no unit for the host-wide name, which is no app');
  const settings = (app) => JSON.parse(fs.readFileSync(path.join(dir, `etc/${app}/app.json`), 'utf8'));
  assert.equal(settings('api').listen, 'unix:/run/api/app.sock');
  assert.equal(settings('api').workers, 2);
  assert.equal(settings('admin').listen, 'unix:/run/admin/app.sock');
  const site = fs.readFileSync(path.join(dir, 'etc/nginx/tunekit/site.conf'), 'utf8');
  const servers = site.split(/^server \{$/m).slice(1);
  assert.equal(servers.length, 2, 'two server_names, two servers');
  assert.match(servers[0], /server_name api\.example\.test;[\s\S]*location \/ \{[\s\S]*proxy_pass http:\/\/api;/);
  assert.match(servers[0], /listen 80 backlog=\d+ reuseport;/, 'the first site holds the listen options');
  assert.match(servers[1], /^ {4}listen 80;$/m, 'later sites repeat no listen option (nginx refuses them twice)');
  assert.match(servers[1], /location \/ \{[\s\S]*proxy_pass http:\/\/web;[\s\S]*location \/admin\/ \{[\s\S]*proxy_pass http:\/\/admin;/);
  // --app: only that app's own files, nginx's for all.
  const one = tmpdir(t);
  renderer.render(vars, one, { only: 'web' });
  const oneFiles = listFiles(one);
  assert.ok(oneFiles.includes('etc/web/app.json') && !oneFiles.includes('etc/api/app.json'));
  assert.equal(fs.readFileSync(path.join(one, 'etc/nginx/tunekit/site.conf'), 'utf8'), site);
});

test('nginx -t accepts the several apps\' tree as rendered', (t) => {
  const dir = tmpdir(t);
  const vars = config.resolve({ varsFiles: [THREE], set: ['tunekit_host_cpus=4'] });
  const { vars: prefixed } = renderer.render(vars, dir, { prefix: true });
  const r = renderer.checkNginx(prefixed);
  assert.ok(r.ok, `${r.command}: ${r.output}`);
  // Each app's socket directory exists for its runner.
  for (const app of ['api', 'web', 'admin']) assert.ok(fs.statSync(path.join(dir, `run/${app}`)).isDirectory());
});

test('doctor and status --app NAME find that app\'s settings among the host\'s, or name the apps there', (t) => {
  const { appConfigByName } = require('../../lib/apphost');
  const etc = tmpdir(t);
  for (const app of ['api', 'web']) {
    fs.mkdirSync(path.join(etc, app));
    fs.writeFileSync(path.join(etc, app, 'app.json'), JSON.stringify({ name: app, listen: `unix:/run/${app}/app.sock` }));
  }
  fs.mkdirSync(path.join(etc, 'other'));
  fs.writeFileSync(path.join(etc, 'other', 'app.json'), '{"not": "the runner\'s"}');
  assert.equal(appConfigByName('web', etc), path.join(etc, 'web', 'app.json'));
  assert.throws(() => appConfigByName('shop', etc), /--app shop: no .*\/\*\/app\.json is the settings of an app named shop \(the apps here: api, web\); give its settings file with --app-config FILE/);
});

test('the Kubernetes render gives each app a pod of its own, named after it', (t) => {
  const kubernetes = require('../../lib/kubernetes');
  const { files } = kubernetes.renderKubernetes({ varsFiles: [THREE], set: ['tunekit_nginx_version=1.26.3'] });
  assert.deepEqual(files.map((f) => f.dest).filter((d) => d.endsWith('deployment.yaml')).sort(),
    ['admin/deployment.yaml', 'api/deployment.yaml', 'web/deployment.yaml']);
  const deployment = (app) => files.find((f) => f.dest === `${app}/deployment.yaml`).content;
  assert.match(deployment('api'), /^ {2}name: api$/m);
  const config = files.find((f) => f.dest === 'admin/configmap.yaml').content;
  assert.match(config, /server_name admin\.example\.test;/);
  assert.match(config, /location \/admin\/ \{/);
  // Each pod is checked alone: the apps' sum of workers against this machine's CPUs does not apply.
  assert.doesNotMatch(files.map((f) => f.content).join('\n'), /upstream web/);
});

test('an app\'s module given relative is a path in its own deployed code; a Jinja value in an entry reads the host-wide values', (t) => {
  const dir = tmpdir(t);
  const vars = resolve(t, two({ module: 'server.js', source: '/srv/api' }, { tunekit_app_module: '{{ tunekit_app_install_dir }}/main.js' }));
  renderer.render(vars, dir, { layers: ['app'] });
  const settings = (app) => JSON.parse(fs.readFileSync(path.join(dir, `etc/${app}/app.json`), 'utf8'));
  assert.equal(settings('api').module, '/opt/api/current/server.js');
  // Evaluated as Ansible evaluates the list: with the host-wide tunekit_app_install_dir.
  assert.equal(settings('web').module, '/opt/tunekit-app/main.js');
});
