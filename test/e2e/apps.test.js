'use strict';
// Several apps on one booted Debian 13 systemd host (tunekit_apps), deployed by
// site.yml over SSH: api on its own server_name, web on another under a location
// prefix. Each answers through nginx from its own socket and workers; a new
// release of api rolls api's workers while web's main process, socket inode and
// workers stay as they were and web's clients see no failure; a second run
// changes nothing; an app list that over-commits the CPUs, or claims one
// server_name and location twice, is refused before anything changes, naming
// both apps. Teardown leaves no process, mount or veth (test/lib/nspawn.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { sleep } = require('../lib/util');
const { bootHosts, stopHosts, copyInto } = require('../lib/nspawn');
const ansible = require('../lib/ansible');

const { ROOT, tailOf, sh } = ansible;
const APP = path.join(ROOT, 'test/fixtures/ansible/counting-app');
const PORT = 80;
const STEPS = 5;

const API = { name: 'api', server_name: 'api.example.test' };
const WEB = { name: 'web', server_name: 'www.example.test', location: '/web/' };

let hosts = [];
let runner;

/** An app's code in a directory of its own (a release is a change to it). */
function appDir(tmp, name) {
  const dir = path.join(tmp, name);
  fs.cpSync(APP, dir, { recursive: true });
  return dir;
}

const get = (h, app, urlPath = '/') => ansible.get(h.ip, PORT, `${(app.location || '/').replace(/\/$/, '')}${urlPath}`, { host: app.server_name });

/** What identifies an app's processes and socket on the host. */
async function state(h, name) {
  const main = await sh(h, `systemctl show -P MainPID ${name}.service`);
  return {
    main,
    inode: await sh(h, `stat -c %i /run/${name}/app.sock`),
    workers: (await sh(h, `pgrep -P ${main} | sort`)).split('\n').filter(Boolean),
  };
}

/** Checksums of every file the kit writes for the apps and nginx. */
const files = (h) => sh(h, 'sha256sum /etc/nginx/nginx.conf /etc/nginx/tunekit/* /etc/systemd/system/api.service /etc/systemd/system/web.service /etc/api/app.json /etc/web/app.json');

test('several apps on one booted systemd host', { timeout: 30 * 60 * 1000 }, async (t) => {
  let passed = 0;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-apps-e2e-'));
  t.after(async () => {
    await stopHosts(hosts);
    if (runner) runner.cleanup(passed === STEPS);
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const step = (name, fn) => t.test(name, async (st) => {
    await fn(st);
    passed += 1;
  });

  hosts = await bootHosts(1, { name: 'tkapps' });
  const [h] = hosts;
  const cpus = Number(await sh(h, 'nproc'));
  const sources = { api: appDir(tmp, 'api'), web: appDir(tmp, 'web') };
  const apps = (a = {}, w = {}) => [
    { ...API, source: sources.api, module: 'server.js', ...a },
    { ...WEB, source: sources.web, module: 'server.js', ...w },
  ];
  const groupVars = (list) => ({ tunekit_nginx_disable_sites: ['default'], tunekit_nginx_default_server: false, tunekit_apps: list });
  runner = ansible.createRunner(hosts, { name: 'tunekit-apps-e2e', groupVars: groupVars(apps()), extraArgs: ['-e', 'tunekit_serial=100%'] });
  const writeGroupVars = (list) => fs.writeFileSync(path.join(runner.tmp, 'group_vars/tunekit.yml'), `${JSON.stringify(groupVars(list), null, 2)}\n`);

  await step('one run deploys both apps; each answers through nginx from its own socket and workers', async () => {
    const r = await runner.playbook();
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.equal(await sh(h, 'systemctl is-active api.service web.service nginx.service'), 'active\nactive\nactive');
    const upstream = await sh(h, 'cat /etc/nginx/tunekit/upstream.conf');
    assert.match(upstream, /upstream api \{[^}]*server unix:\/run\/api\/app\.sock /);
    assert.match(upstream, /upstream web \{[^}]*server unix:\/run\/web\/app\.sock /);
    for (const app of [API, WEB]) {
      const s = await state(h, app.name);
      // Workers left at 0: the CPUs divided between the two apps (the runner's settings say how many).
      const settings = JSON.parse(await sh(h, `cat /etc/${app.name}/app.json`));
      assert.equal(settings.workers, Math.max(1, Math.floor(cpus / 2)), `${app.name}'s workers in its settings`);
      assert.ok(s.workers.length >= settings.workers, `${app.name}'s worker processes: ${s.workers}`);
      const seen = new Set();
      for (let i = 0; i < 8; i++) {
        const res = await get(h, app, '/hello');
        assert.equal(res.status, 200, `${app.name} through nginx: ${res.status} ${res.body}`);
        seen.add(String(JSON.parse(res.body).pid));
        assert.ok(res.headers['x-tunekit-release'], `${app.name}: no release header`);
      }
      for (const pid of seen) assert.ok(s.workers.includes(pid), `${app.name} answered from pid ${pid}, not one of its workers ${s.workers}`);
    }
    // web is served under its prefix only: its site has no location /.
    assert.equal((await get(h, { ...WEB, location: '/' }, '/hello')).status, 404);

    // The operator's view of one app of several: `tunekit status --app web` on the
    // host (a copy of the kit, as docs/observability.md says) finds web's settings,
    // its socket and its runner's metrics (web, the second app, on the next port).
    for (const d of ['app', 'bin', 'lib', 'roles', 'ansible', 'node_modules', 'package.json']) copyInto(h, path.join(ROOT, d), path.join('opt/tunekit-kit', d));
    const st = await h.ssh('node /opt/tunekit-kit/bin/tunekit.js status --json --app web');
    assert.equal(st.code, 0, `tunekit status --app web (exit ${st.code}):\n${st.stdout}\n${st.stderr}`);
    const d = JSON.parse(st.stdout);
    assert.equal(d.app.appConfig, '/etc/web/app.json');
    assert.deepEqual(d.acceptQueue.sockets.map((x) => x.socket), ['/run/web/app.sock']);
    assert.match(String(d.app.endpoints), /127\.0\.0\.1:9465/);
    assert.ok(d.workers.some((w) => w.worker !== 'spare'), `no worker of web in tunekit status: ${st.stdout}`);
  });

  await step('a second run changes nothing', async () => {
    const r = await runner.playbook();
    assert.equal(r.code, 0, `second run failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.equal(r.recap[h.name].changed, 0, `the second run changed ${r.recap[h.name].changed} things (log ${r.log})`);
  });

  await step('a new release of api leaves web untouched: same main process, socket and workers, no failed request', async () => {
    const webBefore = await state(h, 'web');
    const apiBefore = await state(h, 'api');
    const releaseBefore = (await get(h, API)).headers['x-tunekit-release'];
    fs.appendFileSync(path.join(sources.api, 'server.js'), '// release 2\n');
    // web's clients, while api is deployed: bounded by the deploy and by time.
    const tally = { requests: 0, failures: [] };
    let stop = false;
    const deadline = Date.now() + 15 * 60 * 1000;
    const client = (async () => {
      while (!stop && Date.now() < deadline) {
        tally.requests += 1;
        const res = await get(h, WEB, '/load').catch((err) => ({ status: err.code || err.message }));
        if (res.status !== 200) tally.failures.push(res.status);
        await sleep(20);
      }
    })();
    const r = await runner.playbook();
    stop = true;
    await client;
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.ok(tally.requests > 0, 'no request reached web during the deploy');
    assert.deepEqual(tally.failures, [], `web's clients saw failures during api's deploy (${tally.requests} requests)`);
    assert.deepEqual(await state(h, 'web'), webBefore, 'web was restarted or reloaded');
    const apiAfter = await state(h, 'api');
    assert.equal(apiAfter.main, apiBefore.main, 'new code alone rolls the workers: api keeps its main process');
    assert.notDeepEqual(apiAfter.workers, apiBefore.workers, "api's workers were not replaced");
    const releaseAfter = (await get(h, API)).headers['x-tunekit-release'];
    assert.ok(releaseAfter && releaseAfter !== releaseBefore, `api still serves release ${releaseBefore}`);
  });

  for (const [what, list, refusal] of [
    ['more workers than CPUs', apps({ workers: cpus }, { workers: cpus }),
      new RegExp(`tunekit_apps: api ${cpus} \\+ web ${cpus} = ${2 * cpus} app workers on ${cpus} CPUs`)],
    ['one server_name and location claimed twice', apps({}, { server_name: API.server_name, location: '/' }),
      /tunekit_apps: api and web both claim server_name api\.example\.test location \/; give one another server_name, or each its own location prefix/],
  ]) {
    await step(`an app list with ${what} is refused before anything changes, naming both apps`, async () => {
      const before = [await files(h), await state(h, 'api'), await state(h, 'web')];
      writeGroupVars(list);
      const r = await runner.playbook();
      writeGroupVars(apps());
      assert.notEqual(r.code, 0, `site.yml accepted ${what} (log ${r.log})`);
      assert.match(r.out, refusal, `the refusal (log ${r.log}):\n${tailOf(r.out)}`);
      assert.deepEqual([await files(h), await state(h, 'api'), await state(h, 'web')], before, 'the refused run changed the host');
    });
  }
});
