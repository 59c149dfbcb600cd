'use strict';
// A user's app of real size deployed with Ansible onto two booted Debian 13
// systemd hosts, over SSH, as the README tells it: the README's own playbook (its
// yaml block, as written, beside a role of the user's own, the app folder it
// names replaced by the fixture's) run through the installed collection against
// stock hosts whose nginx serves Debian's `default` site:
//  - check mode before anything is deployed passes (unarchive, whose destination
//    must exist, is not asked to compare) and changes nothing;
//  - the run deploys, and takes :80 from that welcome page only because the
//    playbook names it; the app folder, whose node_modules holds more than 500
//    files (a dependency of 520 modules, installed by npm on the controller from
//    a tarball in the app's vendor/, so the hosts need no registry), reaches each
//    host in one archive, without node_modules and .git; npm ci builds
//    node_modules there from package-lock.json; the app answers through nginx
//    with what the dependency exports;
//  - a second run after every file was touched (a fresh clone: new dates, same
//    code) sends nothing new: no unpack, no npm ci.
// A changed app folder rolling out is ansible-site.test.js's (the fleet rollout).
// The deploy's time per step is printed (ANSIBLE_LOG_PATH's timestamps), never
// asserted. Teardown leaves no process, mount or veth (test/lib/nspawn.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { bootHosts, stopHosts } = require('../lib/nspawn');
const { installCollection } = require('../lib/collection');
const ansible = require('../lib/ansible');

const { ROOT, PLAYBOOK, tailOf, sh } = ansible;
const PORT = 80;
const MODULES = 520; // files of the dependency's lib/, past the 500 the deploy must carry
const STEPS = 3;
// The app folder the README's playbook names, replaced by the fixture's.
const README_APP = '/srv/build/myapp';
const SOURCE_DIR = '/opt/tunekit-app/current'; // tunekit_app_source_dir's default

/** Must succeed on the controller. */
async function must(cmd, args, opts) {
  const r = await runCommand(cmd, args, { timeoutMs: 300000, ...opts });
  assert.equal(r.code, 0, `\`${cmd} ${args.join(' ')}\` failed (${r.code}):\n${r.out}`);
  return r.stdout;
}

/** Every file under dir (not folders), counted. */
function countFiles(dir) {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) n += e.isDirectory() ? countFiles(path.join(dir, e.name)) : 1;
  return n;
}

/**
 * An app as a user keeps it: its code, package.json and package-lock.json, a
 * node_modules installed by npm (from vendor/, no registry), and a git history.
 */
async function makeApp(tmp) {
  const pkg = path.join(tmp, 'fixture-bulk');
  fs.mkdirSync(path.join(pkg, 'lib'), { recursive: true });
  fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'fixture-bulk', version: '1.0.0', main: 'index.js', license: 'MIT' }, null, 2));
  const names = Array.from({ length: MODULES }, (_, i) => `m${String(i).padStart(3, '0')}`);
  for (const [i, n] of names.entries()) fs.writeFileSync(path.join(pkg, 'lib', `${n}.js`), `'use strict';\nmodule.exports = ${i + 1};\n`);
  fs.writeFileSync(path.join(pkg, 'index.js'), [
    "'use strict';",
    `const parts = ${JSON.stringify(names)}.map((n) => require(\`./lib/\${n}\`));`,
    'module.exports = { modules: parts.length, sum: parts.reduce((a, b) => a + b, 0) };',
    '',
  ].join('\n'));
  const app = path.join(tmp, 'big-app');
  fs.mkdirSync(path.join(app, 'vendor'), { recursive: true });
  await must('npm', ['pack', '--pack-destination', path.join(app, 'vendor'), '--loglevel=error'], { cwd: pkg });
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
    name: 'fixture-big-app', version: '1.0.0', private: true, main: 'server.js',
    dependencies: { 'fixture-bulk': 'file:vendor/fixture-bulk-1.0.0.tgz' },
  }, null, 2));
  writeServer(app, 'one');
  await must('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], { cwd: app });
  const git = ['-c', 'user.name=tunekit', '-c', 'user.email=tunekit@example.test'];
  await must('git', ['init', '-q', app]);
  await must('git', [...git, '-C', app, 'add', 'server.js', 'package.json', 'package-lock.json', 'vendor']);
  await must('git', [...git, '-C', app, 'commit', '-q', '-m', 'the app']);
  return app;
}

function writeServer(app, version) {
  fs.writeFileSync(path.join(app, 'server.js'), [
    "'use strict';",
    "const bulk = require('fixture-bulk');",
    '',
    'module.exports = (req, res) => {',
    `  const body = JSON.stringify({ app: 'fixture-big-app', version: '${version}', modules: bulk.modules, sum: bulk.sum });`,
    "  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });",
    '  res.end(body);',
    '};',
    '',
  ].join('\n'));
}

/** The yaml block of README.md that holds "# your playbook", as written. */
function readmePlaybook() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.startsWith('# your playbook'));
  assert.ok(block, 'README.md has no ```yaml block starting "# your playbook"');
  return block;
}

/** Seconds between TASK lines of an ANSIBLE_LOG_PATH log: from the first task named by `from` to the next task not named by `within`. */
function stepSeconds(log, from, within) {
  const tasks = [...fs.readFileSync(log, 'utf8').matchAll(/^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*\| TASK \[([^\]]*)\]/gm)]
    .map((m) => ({ at: Date.parse(`${m[1].replace(' ', 'T').replace(',', '.')}`), name: m[2].replace(/^tunekit\.stack\./, '') }));
  const start = tasks.findIndex((x) => from.test(x.name));
  assert.ok(start >= 0, `no task matching ${from} in ${log}`);
  let end = start + 1;
  while (end < tasks.length && within.test(tasks[end].name)) end += 1;
  assert.ok(end < tasks.length, `no task after ${from} in ${log}`);
  return (tasks[end].at - tasks[start].at) / 1000;
}

test('an app of real size deployed with Ansible onto two booted hosts', { timeout: 40 * 60 * 1000 }, async (t) => {
  let passed = 0;
  let hosts = [];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-app-source-e2e-'));
  t.after(async () => {
    await stopHosts(hosts);
    if (passed === STEPS) fs.rmSync(tmp, { recursive: true, force: true });
    else process.stderr.write(`app-source e2e: controller files kept in ${tmp}\n`);
  });
  const step = (name, fn) => t.test(name, async (st) => {
    await fn(st);
    passed += 1;
  });

  const [booted, app, collection] = await Promise.all([
    bootHosts(2, { name: 'tksrc' }),
    makeApp(tmp),
    installCollection(path.join(tmp, 'collection')),
  ]);
  hosts = booted;
  const nodeModulesFiles = countFiles(path.join(app, 'node_modules'));
  assert.ok(nodeModulesFiles >= 500, `the controller's node_modules holds ${nodeModulesFiles} files`);

  // The user's side: an inventory with the README's group, the README's playbook
  // with their app's folder, and the role of their own it lists beside the kit's.
  const dir = path.join(tmp, 'user');
  const role = path.join(dir, 'roles/my_monitoring/tasks');
  fs.mkdirSync(role, { recursive: true });
  fs.writeFileSync(path.join(role, 'main.yml'), [
    '- name: Leave a mark (the user\'s own role ran)',
    '  ansible.builtin.copy:',
    '    content: "monitoring\\n"',
    '    dest: /etc/my-monitoring',
    '    mode: "0644"',
    '',
  ].join('\n'));
  const sshArgs = (h) => h.sshArgs.filter((a) => a !== '-i' && a !== h.keyFile).join(' ');
  fs.writeFileSync(path.join(dir, 'inventory.ini'), [
    '[web]',
    ...hosts.map((h) => `${h.name} ansible_host=${h.ip} ansible_user=root ansible_ssh_private_key_file=${h.keyFile} ansible_ssh_common_args='${sshArgs(h)}'`),
    '',
  ].join('\n'));
  const playbook = readmePlaybook();
  assert.ok(playbook.includes(`tunekit_app_source: ${README_APP}`), `the README's playbook names no app folder (tunekit_app_source: ${README_APP})`);
  fs.writeFileSync(path.join(dir, 'playbook.yml'), `---\n${playbook.replace(`tunekit_app_source: ${README_APP}`, `tunekit_app_source: ${app}`)}`);
  let runs = 0;
  const play = async (args = [], env = {}) => {
    runs += 1;
    const r = await runCommand(PLAYBOOK, ['-i', 'inventory.ini', ...args, 'playbook.yml'], {
      cwd: dir, env: { ...collection.env, ANSIBLE_ROLES_PATH: path.join(dir, 'roles'), ...env }, timeoutMs: 900000,
    });
    const log = path.join(tmp, `run-${runs}.out`);
    fs.writeFileSync(log, r.out);
    assert.equal(r.code, 0, `the README's playbook${args.length ? ` ${args.join(' ')}` : ''} failed (output ${log}):\n${tailOf(r.out)}`);
    return r;
  };
  // Each host's outcome of a task in a run's output: "changed", "ok" or "skipping".
  const outcomes = (out, task) => {
    const section = out.split(/^(?=TASK \[)/m).find((x) => new RegExp(`^TASK \\[(tunekit\\.stack\\.)?tunekit_app : ${task.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`).test(x));
    assert.ok(section, `no task "${task}" in the run`);
    return Object.fromEntries([...section.matchAll(/^(changed|ok|skipping|fatal): \[([^\]]+)\]/gm)].map((x) => [x[2], x[1]]));
  };
  const every = (what) => Object.fromEntries(hosts.map((h) => [h.name, what]));

  await step('check mode with the README\'s playbook on a stock host, before anything is deployed: the play passes and changes nothing', async () => {
    for (const h of hosts) {
      // Debian's nginx package starts nginx on install; the test hosts' root
      // filesystem leaves it off (test/lib/nspawn.js): back to the stock state.
      await sh(h, 'systemctl enable --now nginx.service');
      assert.equal(await sh(h, 'readlink /etc/nginx/sites-enabled/default'), '/etc/nginx/sites-available/default', `${h.name} is not stock`);
      assert.match((await ansible.get(h.ip, PORT, '/')).body, /Welcome to nginx/, `${h.name}: the welcome page does not answer`);
    }
    // Check mode on one of the two: they are the same stock host (a play costs
    // about a minute of the suite's CPU per host).
    const [h] = hosts;
    const r = await play(['--check', '--limit', h.name]);
    assert.deepEqual(outcomes(r.out, "Create the app's directory"), { [h.name]: 'changed' });
    assert.equal((await h.ssh(`test -e ${SOURCE_DIR}`)).code, 1, `${h.name}: check mode created ${SOURCE_DIR}`);
    assert.match((await ansible.get(h.ip, PORT, '/')).body, /Welcome to nginx/, `${h.name}: check mode changed what :${PORT} serves`);
  });

  await step(`the README's playbook deploys onto those stock hosts and sends the app (node_modules of ${nodeModulesFiles} files on the controller) to each in one archive, without node_modules and .git; npm ci builds node_modules there`, async () => {
    const log = path.join(tmp, 'deploy.log');
    const began = Date.now();
    const r = await play(['-vvv'], { ANSIBLE_LOG_PATH: log });
    const wall = (Date.now() - began) / 1000;
    const send = stepSeconds(log, /^tunekit_app : (Send|Copy) the app|^tunekit_app : Make a scratch file for the archive/, /^tunekit_app : (Pack|Unpack|Remove|Send|Copy) .*(app|archive)/);
    const npmCi = stepSeconds(log, /^tunekit_app : Run npm ci/, /^$/);
    process.stderr.write(`app-source e2e: 2 hosts, ${nodeModulesFiles} files in the controller's node_modules: the app's code sent in ${send.toFixed(1)} s, npm ci ${npmCi.toFixed(1)} s, the README's playbook ${wall.toFixed(0)} s (the whole stack, first run)\n`);
    // What crossed the wire (ssh's PUT lines at -vvv): one archive a host, no file of the folder.
    const fromApp = r.out.split('\n').filter((l) => l.includes(`PUT ${app}/`));
    assert.equal(fromApp.length, 0, `files of the app's folder were sent one by one (${fromApp.length}), e.g.:\n${fromApp.slice(0, 3).join('\n')}`);
    for (const h of hosts) {
      const archives = r.out.split('\n').filter((l) => l.startsWith(`<${h.ip}> PUT `) && /\.tunekit-app\.tar\.gz TO /.test(l));
      assert.equal(archives.length, 1, `${h.name}: the app arrived in ${archives.length} archives`);
    }
    assert.deepEqual(outcomes(r.out, 'Run npm ci'), every('changed'), 'npm ci ran once per host');
    for (const h of hosts) {
      const res = await ansible.get(h.ip, PORT, '/');
      assert.equal(res.status, 200, `${h.name}: ${res.body}`);
      assert.ok(res.headers['x-tunekit-release'], `${h.name}: the kit's runner does not answer on :${PORT}: ${res.body.slice(0, 200)}`);
      const body = JSON.parse(res.body);
      assert.deepEqual([body.app, body.version, body.modules, body.sum], ['fixture-big-app', 'one', MODULES, (MODULES * (MODULES + 1)) / 2], `${h.name} answered ${JSON.stringify(body)}`);
      assert.equal(await sh(h, `find ${SOURCE_DIR}/node_modules/fixture-bulk/lib -type f | wc -l`), String(MODULES), `${h.name}: node_modules is not the package's`);
      assert.equal((await h.ssh(`test -f ${SOURCE_DIR}/node_modules/.package-lock.json`)).code, 0, `${h.name}: node_modules was not built by npm`);
      assert.equal((await h.ssh(`test -e ${SOURCE_DIR}/.git`)).code, 1, `${h.name}: the app's .git was sent`);
      assert.equal(await sh(h, `stat -c '%U %a' ${SOURCE_DIR}/server.js ${SOURCE_DIR}/vendor`), 'root 644\nroot 755');
      assert.equal((await h.ssh('test -e /etc/nginx/sites-enabled/default')).code, 1, `${h.name}: the default site is still enabled`);
      assert.equal((await h.ssh('test -f /etc/nginx/sites-available/default')).code, 0, `${h.name}: the default site itself was removed`);
      assert.equal(await sh(h, 'cat /etc/my-monitoring'), 'monitoring');
    }
  });

  await step('a second run after every file of the app was touched (new dates, same code) sends nothing new: the unpack reports no change, npm ci does not run', async () => {
    const now = new Date();
    const touch = (d) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, e.name);
        if (e.isDirectory()) touch(p);
        fs.utimesSync(p, now, now);
      }
    };
    touch(app);
    const r = await play();
    // The app's own steps (the whole run's changed=0 is ansible-site.test.js's, with no app source).
    assert.deepEqual(outcomes(r.out, 'Unpack the app into its directory'), every('ok'));
    assert.deepEqual(outcomes(r.out, 'Run npm ci'), every('skipping'));
  });
});
