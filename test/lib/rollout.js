'use strict';
// The fleet rollout (site.yml's serial batches, load-balancer hooks and health
// gate) checked on booted hosts a suite has already provisioned, with the same
// app on each: test/e2e/ansible-site.test.js runs these steps on its two hosts.
//
// The load balancer is played by the test's own client: the drain and enable
// hooks create and remove a file per host in a directory on the controller, and
// the client sends each request to the next host whose file is absent, over a
// new connection, to the hosts' own addresses. Bounded by stop() and in time.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const ansible = require('./ansible');
const { sleep, until } = require('./util');

const { ROOT, tailOf, sh } = ansible;
const FIXTURES = path.join(ROOT, 'test/fixtures/ansible');

/** GET / from one host, as the client's load balancer does: {status, release} or {status: null, error}. */
function request(h, port) {
  return ansible.get(h.ip, port, '/').then(
    (r) => ({ status: r.status, release: r.headers['x-tunekit-release'] || null }),
    (err) => ({ status: null, error: err.code || err.message }),
  );
}

/**
 * Clients that keep asking the hosts not drained (no DIR/<name>.out), round
 * robin, until stop() or maxMs. stop() resolves the tally; answered(what)
 * resolves once every host has answered again since the call.
 */
function startLoad(hosts, port, dir, { clients = 3, pauseMs = 100, maxMs = 600000 } = {}) {
  const tally = { requests: 0, failures: [], perHost: Object.fromEntries(hosts.map((h) => [h.name, { requests: 0, releases: [] }])) };
  const deadline = Date.now() + maxMs;
  let stopped = false;
  let next = 0;
  async function client() {
    while (!stopped && Date.now() < deadline) {
      const open = hosts.filter((h) => !fs.existsSync(path.join(dir, `${h.name}.out`)));
      if (!open.length) {
        await sleep(50);
        continue;
      }
      const h = open[next++ % open.length];
      tally.requests += 1;
      const r = await request(h, port);
      const mine = tally.perHost[h.name];
      mine.requests += 1;
      if (r.status !== 200) tally.failures.push({ host: h.name, ...r });
      else if (mine.releases[mine.releases.length - 1] !== r.release) mine.releases.push(r.release);
      await sleep(pauseMs);
    }
  }
  const running = Promise.all(Array.from({ length: clients }, client));
  return {
    answered(what) {
      const from = hosts.map((h) => tally.perHost[h.name].requests);
      return until(`every host to answer the load ${what}`, () => hosts.every((h, i) => tally.perHost[h.name].requests > from[i]), 60000);
    },
    async stop() {
      stopped = true;
      await running;
      return tally;
    },
  };
}

/**
 * Adds the rollout steps to a suite. `step(name, fn)` is the suite's own step
 * function; `runner` its ansible runner; hosts are served already.
 */
async function rolloutSteps({ step, hosts, runner, vars }) {
  const port = vars.tunekit_nginx_listen_port;
  const lbDir = path.join(runner.tmp, 'lb');
  fs.mkdirSync(lbDir, { recursive: true });
  const events = path.join(lbDir, 'events');
  const readEvents = () => (fs.existsSync(events) ? fs.readFileSync(events, 'utf8').trim().split('\n') : []);
  const releaseFile = `${vars.tunekit_app_install_dir}/release`;
  // No warm spare: after a failed rolling reload the old workers keep serving
  // (a spare would be forked again and again from the broken code, each failure
  // in the runner's log; the cluster, proved by the old workers, would not stop)
  // — the case only the release check catches, and a host the later steps can still use.
  const app = (dir) => JSON.stringify({
    tunekit_app_source: path.join(FIXTURES, dir),
    tunekit_app_module: '{{ tunekit_app_source_dir }}/server.js',
    tunekit_app_spare_workers: 0,
  });
  // The hooks as an operator writes them: templated per host, run on the controller.
  const rollout = ['-e', 'tunekit_serial=1', '-e', JSON.stringify({
    tunekit_lb_drain_cmd: `touch ${lbDir}/{{ inventory_hostname }}.out && echo "drain {{ inventory_hostname }} $TUNEKIT_ADDRESS" >> ${events}`,
    tunekit_lb_enable_cmd: `rm ${lbDir}/{{ inventory_hostname }}.out && echo "enable {{ inventory_hostname }} $TUNEKIT_ADDRESS" >> ${events}`,
  })];
  const served = async (h) => {
    const r = await ansible.get(h.ip, port, '/');
    assert.equal(r.status, 200, `GET / on ${h.name}: ${r.body}`);
    return { body: JSON.parse(r.body), release: r.headers['x-tunekit-release'] };
  };

  await step('a good release rolls through the hosts one at a time (serial 1), each out of the balancer until its gate passed; a client load on both sees 0 failed requests', async () => {
    const before = await Promise.all(hosts.map(served));
    const load = startLoad(hosts, port, lbDir);
    let r;
    let tally;
    try {
      await load.answered('before the first host is drained');
      r = await runner.playbook([...rollout, '-e', app('fleet-app')]);
      // The client sees each host's new release: every host answers again after the rollout.
      if (r.code === 0) await load.answered('after the rollout');
    } finally {
      tally = await load.stop();
    }
    assert.equal(r.code, 0, `the rollout failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.deepEqual(readEvents(), hosts.flatMap((h) => [`drain ${h.name} ${h.ip}`, `enable ${h.name} ${h.ip}`]),
      'each host was drained, deployed and enabled before the next one was drained');
    // One batch a host, in inventory order, each through the gate.
    const gates = [...r.out.replace(/\s+/g, ' ').matchAll(/(\w[\w.-]*): 5 healthy answers in a row from (\S+) \(release (\w+)\)/g)];
    assert.deepEqual(gates.map((m) => m[1]), hosts.map((h) => h.name), `gate results:\n${tailOf(r.out)}`);
    assert.equal(tally.failures.length, 0, `failed requests during the rollout: ${JSON.stringify(tally.failures.slice(0, 5))} of ${tally.requests}`);
    for (const [i, h] of hosts.entries()) {
      const now = await served(h);
      const deployed = await sh(h, `cat ${releaseFile}`);
      assert.equal(now.body.app, 'fixture-fleet-app', `${h.name} serves ${JSON.stringify(now.body)}`);
      assert.equal(now.body.greeting, 'hello from fixture-fleet-app', `${h.name}: the production dependency is not what answered`);
      assert.equal(await sh(h, `ls ${vars.tunekit_app_install_dir}/current/node_modules`), 'fixture-greeting',
        `${h.name}: npm ci --omit=dev installs the production dependency only`);
      assert.equal(now.release, deployed, `${h.name}: X-Tunekit-Release is not the release file`);
      assert.equal(now.body.release, deployed, `${h.name}: the app was not handed $TUNEKIT_RELEASE`);
      assert.equal(gates[i][3], deployed, `${h.name}: the gate passed on another release`);
      assert.notEqual(before[i].release, deployed, `${h.name}: the release did not change`);
      // The client saw the old release, then the new, and nothing after.
      assert.deepEqual(tally.perHost[h.name].releases, [before[i].release, deployed], `${h.name}: releases seen by the client`);
    }
    assert.equal([...r.out.matchAll(/TASK \[tunekit_app : Run npm ci --omit=dev[^\n]*\nchanged: \[/g)].length, hosts.length,
      `npm ci did not run once per host (log ${r.log})`);
    process.stderr.write(`rollout under load: ${tally.requests} requests, ${JSON.stringify(Object.fromEntries(
      Object.entries(tally.perHost).map(([k, v]) => [k, v.requests])))}\n`);
  });

  await step('the same release again, without balancer hooks: nothing changes (npm ci is not run again)', async () => {
    const h = hosts[1];
    const r = await runner.playbook(['-e', app('fleet-app')], { limit: h.name });
    assert.equal(r.code, 0, `the second run failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.equal(r.recap[h.name]?.changed, 0, `the second run changed ${h.name} (log ${r.log}):\n${
      r.out.split('\n').filter((l) => l.startsWith('changed:') || l.startsWith('TASK')).join('\n')}`);
  });

  await step('a release that fails to load stops the rollout at its first host: the gate names host, release expected and seen, and the fix; the second host is untouched and still serves the old release', async () => {
    fs.writeFileSync(events, '');
    const [first, second] = hosts;
    const before = await Promise.all(hosts.map(served));
    const codeBefore = await sh(second, `sha256sum ${vars.tunekit_app_install_dir}/current/server.js`);
    const r = await runner.playbook([...rollout, '-e', app('fleet-app-broken'), '-e', '{"tunekit_health_gate_timeout": 8}']);
    assert.notEqual(r.code, 0, 'the rollout went on past a broken release');
    const deployed = await sh(first, `cat ${releaseFile}`);
    const message = r.out.replace(/\s+/g, ' ');
    assert.match(message, new RegExp(`Health gate failed on ${first.name}: expected 5 2xx answers in a row from http://127\\.0\\.0\\.1:${port}/healthz \\(Host: localhost\\) with X-Tunekit-Release: ${deployed} within 8 s`));
    assert.match(message, new RegExp(`status 200, X-Tunekit-Release: ${before[0].release}`), 'the release seen is not named');
    assert.match(message, /The app still serves the previous release: the new code did not start/);
    assert.match(message, new RegExp(`Fix: look at .journalctl -u ${vars.tunekit_app_name}\\.service.`));
    assert.equal(r.recap[first.name]?.failed, 1, `recap: ${JSON.stringify(r.recap)}`);
    assert.ok(!r.recap[second.name] || r.recap[second.name].ok + r.recap[second.name].changed === 0, `${second.name} was touched: ${JSON.stringify(r.recap)}`);
    assert.deepEqual(readEvents(), [`drain ${first.name} ${first.ip}`], 'the failed host was put back, or the next one drained');
    // The second host: same code on disk, same release served.
    assert.equal(await sh(second, `sha256sum ${vars.tunekit_app_install_dir}/current/server.js`), codeBefore);
    const still = await served(second);
    assert.deepEqual([still.body.app, still.release], [before[1].body.app, before[1].release], `${second.name} changed`);
    // The first host: its old workers kept serving (the runner's reload keeps them
    // when a new one fails to load), which is why the release had to be checked.
    assert.equal((await served(first)).release, before[0].release);
    assert.match(await sh(first, `journalctl -u ${vars.tunekit_app_name}.service --no-pager -n 50`), /fails at load, on purpose/);
  });
}

module.exports = { rolloutSteps, startLoad };
