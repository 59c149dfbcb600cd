'use strict';
// `tunekit render` as a user runs it: refusals exit 2 with a message naming both
// values and write nothing; a good set prints what it wrote.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT } = require('../../lib/template');

const CLI = path.join(ROOT, 'bin/tunekit.js');

function tunekit(args) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT });
}

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-cli-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const REFUSALS = [
  {
    name: 'app keepAliveTimeout not above nginx upstream keepalive_timeout',
    set: ['tunekit_app_keepalive_timeout_ms=30000'],
    both: [/tunekit_app_keepalive_timeout_ms=30000/, /tunekit_nginx_upstream_keepalive_timeout_s=60/],
  },
  {
    name: 'worker_rlimit_nofile below 2 x worker_connections',
    set: ['tunekit_nginx_worker_rlimit_nofile=5000'],
    both: [/tunekit_nginx_worker_rlimit_nofile=5000/, /tunekit_nginx_worker_connections=4096/],
  },
  {
    name: 'backlog above somaxconn',
    set: ['tunekit_listen_backlog=8192', 'tunekit_sysctl_net_core_somaxconn=1024'],
    both: [/tunekit_listen_backlog=8192/, /tunekit_sysctl_net_core_somaxconn=1024/],
  },
  {
    name: 'per-worker sockets without a fixed worker count',
    set: ['tunekit_upstream_kind=per-worker', 'tunekit_app_workers=0'],
    both: [/tunekit_upstream_kind=per-worker/, /tunekit_app_workers > 0, not 0/],
  },
  {
    name: 'a keep-alive pool larger than worker_connections',
    set: ['tunekit_nginx_upstream_keepalive=2048', 'tunekit_nginx_worker_connections=1024'],
    both: [/tunekit_nginx_upstream_keepalive=2048/, /tunekit_nginx_worker_connections=1024/],
  },
  {
    name: 'a keep-alive pool over HTTP/1.0',
    set: ['tunekit_nginx_proxy_http_version="1.0"'],
    both: [/tunekit_nginx_upstream_keepalive=64/, /tunekit_nginx_proxy_http_version=1\.1, not 1\.0/],
  },
  {
    name: 'a keep-alive pool with Connection: close',
    set: ['tunekit_nginx_proxy_connection_default=close'],
    both: [/tunekit_nginx_upstream_keepalive=64/, /tunekit_nginx_proxy_connection_default="", not "close"/],
  },
];

for (const r of REFUSALS) {
  test(`refused, exit 2, naming both values, nothing written: ${r.name}`, (t) => {
    const out = path.join(tmpdir(t), 'tree');
    const res = tunekit(['render', '--out', out, ...r.set.flatMap((s) => ['--set', s])]);
    assert.equal(res.status, 2, res.stderr);
    for (const re of r.both) assert.match(res.stderr, re);
    assert.equal(fs.existsSync(out), false, `${out} must not be created`);
  });
}

test('a good set prints every file it wrote; unknown options and layers are usage errors', (t) => {
  const out = path.join(tmpdir(t), 'tree');
  const res = tunekit(['render', '--out', out, '--layer', 'nginx', '--layer', 'app', '--set', 'tunekit_upstream_kind=tcp']);
  assert.equal(res.status, 0, res.stderr);
  assert.match(res.stdout, /wrote 12 files under /);
  assert.match(res.stdout, /^ {2}etc\/nginx\/nginx\.conf$/m);
  assert.match(res.stdout, /^ {2}etc\/tunekit-app\/app\.json$/m);
  assert.ok(fs.existsSync(path.join(out, 'etc/nginx/tunekit/upstream.conf')));

  const bad = tunekit(['render', '--out', out, '--layer', 'kernel']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--layer kernel: expected one of nginx, app, systemd, sysctl, pm2, metrics; see tunekit render --help/);
  const noOut = tunekit(['render']);
  assert.equal(noOut.status, 2);
  assert.match(noOut.stderr, /--out DIR is required/);
});

// The numbered steps after the list: "N. text" lines, numbered from 1 without a gap.
function steps(stdout) {
  const [, after] = stdout.split('\nNext, as root on the host:\n');
  assert.ok(after, `render ends with the next steps:\n${stdout}`);
  const numbered = after.split('\n').filter((l) => /^ ?\d+\. /.test(l)).map((l) => Number(l.trim().split('.')[0]));
  assert.deepEqual(numbered, numbered.map((_, i) => i + 1), after);
  return after;
}

test('render ends with numbered steps for what it wrote: users and group, the runner, the files, sysctl, systemd, nginx', (t) => {
  const out = path.join(tmpdir(t), 'tree');
  const res = tunekit(['render', '--out', out, '--nginx-version', '1.24.0']);
  assert.equal(res.status, 0, res.stderr);
  const next = steps(res.stdout);
  for (const line of [
    'id -u tunekit >/dev/null 2>&1 || useradd --system --gid tunekit --no-create-home --shell /usr/sbin/nologin tunekit',
    'usermod -aG tunekit www-data',
    `mkdir -p /opt/tunekit-app && cp -r ${path.join(ROOT, 'app')} /opt/tunekit-app/`,
    `cp -r ${out}/etc/. /etc/`,
    // cp leaves root the group: the unit's user reads app.json through its group, as the role installs it.
    'chgrp -R tunekit /etc/tunekit-app && chmod 0750 /etc/tunekit-app',
    'node bin/tunekit.js sysctl apply /etc/sysctl.d/60-tunekit.conf',
    'systemctl daemon-reload && systemctl enable --now tunekit-app',
    'nginx -t && systemctl restart nginx',
  ]) assert.ok(next.split('\n').some((l) => l.trim() === line), `a step runs: ${line}\n${next}`);
  assert.match(next, /the unit starts \/usr\/bin\/node \/opt\/tunekit-app\/app\/cluster\.js/);
  assert.match(next, /to serve yours, render again with --set tunekit_app_module=/);
  assert.match(next, /doctor audits every layer \(run npm ci in /);
});

test('the steps follow the values and the layers rendered', (t) => {
  const dir = tmpdir(t);
  const app = tunekit(['render', '--out', path.join(dir, 'a'), '--layer', 'app', '--layer', 'systemd', '--set', 'tunekit_app_name=shop',
    '--set', 'tunekit_app_user=web', '--set', 'tunekit_app_module=/srv/shop/app.js', '--set', 'tunekit_upstream_kind=tcp']);
  assert.equal(app.status, 0, app.stderr);
  const next = steps(app.stdout);
  assert.match(next, /useradd --system --gid tunekit --no-create-home --shell \/usr\/sbin\/nologin web/);
  assert.match(next, /systemctl enable --now shop$/m);
  assert.match(next, /mkdir -p \/opt\/shop && cp -r /);
  assert.match(next, /It serves \/srv\/shop\/app\.js: the user web must be able to read it/);
  assert.doesNotMatch(next, /usermod|nginx -t|sysctl apply/, 'no nginx, no socket group, no sysctl layer: no step for them');

  const nginx = tunekit(['render', '--out', path.join(dir, 'n'), '--layer', 'nginx', '--nginx-version', '1.24.0', '--set', 'tunekit_nginx_listen_port=8081']);
  assert.equal(nginx.status, 0, nginx.stderr);
  const n = steps(nginx.stdout);
  assert.match(n, /^ {5}nginx -t && systemctl reload nginx$/m, 'no LimitNOFILE drop-in rendered: a reload is enough');
  assert.match(n, /curl -s http:\/\/127\.0\.0\.1:8081\//);
  assert.doesNotMatch(n, /systemctl daemon-reload|useradd/);
});

test('render --check prints nothing when nginx -t passes', (t) => {
  const out = path.join(tmpdir(t), 'tree');
  const res = tunekit(['render', '--out', out, '--check']);
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout, '');
  assert.equal(res.stderr, '');
  assert.ok(fs.existsSync(path.join(out, 'etc/nginx/nginx.conf')));
});
