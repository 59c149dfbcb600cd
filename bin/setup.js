#!/usr/bin/env node
'use strict';
// One-step set-up behind `npm run demo`, `npm test`, `npm run bench` and
// `npm run test:e2e`: installs what that job needs, or stops with the exact
// command to run. Idempotent and quiet when everything is already there.
//
//   node bin/setup.js demo|test|bench|e2e|ansible
//
// `ansible` (npm run setup:ansible) installs only the Python tools of
// requirements-dev.txt (Ansible, ansible-lint, gixy) into .venv.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const VENV = path.join(ROOT, '.venv');
const REQUIREMENTS = path.join(ROOT, 'requirements-dev.txt');

// Debian packages per job: [binary that proves it is installed, package].
const DEBIAN = {
  demo: [['/usr/sbin/nginx', 'nginx']],
  bench: [['/usr/sbin/nginx', 'nginx'], ['/usr/bin/wrk', 'wrk'], ['/usr/bin/h2load', 'nghttp2-client'], ['/usr/bin/openssl', 'openssl']],
  e2e: [
    ['/usr/sbin/nginx', 'nginx'],
    ['/usr/sbin/debootstrap', 'debootstrap'],
    ['/usr/bin/systemd-nspawn', 'systemd-container'],
    ['/usr/bin/ssh', 'openssh-client'],
    ['/usr/bin/systemd-analyze', 'systemd'],
  ],
};
DEBIAN.test = [
  ...DEBIAN.bench,
  ...DEBIAN.e2e.filter(([bin]) => bin !== '/usr/sbin/nginx'),
  ['/usr/bin/strace', 'strace'],
  // nft: handshakes.test.js drops UDP on the loopback of a network namespace of its own.
  ['/usr/sbin/nft', 'nftables'],
  ['/usr/bin/chromium', 'chromium'],
  // metrics: prometheus (the scrape tests) and promtool (check and test the rules),
  // mtail, the two exporters.
  ['/usr/bin/prometheus', 'prometheus'],
  ['/usr/bin/promtool', 'prometheus'],
  ['/usr/bin/mtail', 'mtail'],
  ['/usr/bin/prometheus-nginx-exporter', 'prometheus-nginx-exporter'],
  ['/usr/bin/prometheus-node-exporter', 'prometheus-node-exporter'],
  // ansible-test sanity's shellcheck test (the roles' shell scripts); it skips without it.
  ['/usr/bin/shellcheck', 'shellcheck'],
];
const NEEDS_VENV = new Set(['test', 'e2e', 'ansible']);
const JOBS = ['demo', 'test', 'bench', 'e2e', 'ansible'];

function log(msg) {
  console.error(`setup: ${msg}`);
}

function fail(msg) {
  console.error(`setup: ${msg}`);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT, ...opts });
  if (r.status !== 0) fail(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
}

function checkNode() {
  require('../app/node-version').requireSupportedNode('setup');
}

function ensureNpmPackages() {
  const marker = path.join(ROOT, 'node_modules/.package-lock.json');
  const lock = path.join(ROOT, 'package-lock.json');
  const stale = !fs.existsSync(marker) ||
    (fs.existsSync(lock) && fs.statSync(lock).mtimeMs > fs.statSync(marker).mtimeMs + 1000);
  if (!stale) return;
  log('installing npm packages (npm ci)');
  run('npm', ['ci', '--no-audit', '--no-fund']);
}

function ensureDebian(job) {
  const missing = (DEBIAN[job] || []).filter(([bin]) => !fs.existsSync(bin)).map(([, pkg]) => pkg);
  const pkgs = [...new Set(missing)];
  if (!pkgs.length) return;
  const cmd = `apt-get update && apt-get install -y ${pkgs.join(' ')}`;
  if (process.getuid && process.getuid() !== 0) {
    fail(`missing Debian packages: ${pkgs.join(', ')}. Run:\n  sudo sh -c '${cmd}'`);
  }
  log(`installing Debian packages: ${pkgs.join(' ')}`);
  run('sh', ['-c', `${cmd} >/dev/null`], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

function ensureVenv() {
  const py = path.join(VENV, 'bin/python');
  const stamp = path.join(VENV, '.requirements');
  const want = fs.readFileSync(REQUIREMENTS, 'utf8');
  if (fs.existsSync(py) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return;
  const python = ['python3.13', 'python3.12', 'python3.11', 'python3']
    .find((p) => spawnSync(p, ['-c', 'import sys; assert sys.version_info >= (3, 11)']).status === 0);
  if (!python) fail('Python >= 3.11 with venv is needed. Run:\n  apt-get install -y python3 python3-venv');
  if (!fs.existsSync(py)) {
    log(`creating Python virtualenv ${VENV}`);
    const r = spawnSync(python, ['-m', 'venv', VENV], { stdio: 'inherit' });
    if (r.status !== 0) fail(`cannot create ${VENV}. Run:\n  apt-get install -y python3-venv`);
  }
  log(`installing Python tools from ${path.basename(REQUIREMENTS)}`);
  run(path.join(VENV, 'bin/pip'), ['install', '-q', '--disable-pip-version-check', '-r', REQUIREMENTS]);
  fs.writeFileSync(stamp, want);
}

function main() {
  const job = process.argv[2];
  if (!JOBS.includes(job)) fail(`usage: node bin/setup.js ${JOBS.join('|')}`);
  checkNode();
  if (job !== 'ansible') {
    ensureNpmPackages();
    ensureDebian(job);
  }
  if (NEEDS_VENV.has(job)) ensureVenv();
  if (job === 'ansible') log(`Ansible is in ${VENV}/bin (ansible-playbook, ansible-lint)`);
}

if (require.main === module) main();

module.exports = { VENV, DEBIAN };
