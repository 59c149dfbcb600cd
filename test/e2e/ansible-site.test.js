'use strict';
// ansible-playbook site.yml onto two booted Debian 13 systemd hosts
// (systemd-nspawn containers, test/lib/nspawn.js), over SSH on private veths,
// both in one run. Then, on each host, what an operator would check: services
// active, HTTP 200 through nginx to the app's Unix socket, >= 2 workers, the
// socket's owner and mode, process limits, sysctl values, and the app's
// keepAliveTimeout above nginx's upstream keepalive_timeout as deployed. The
// same release run again changes nothing; check mode on a fresh host completes; a broken
// nginx variable fails at validation while the old configuration keeps serving.
// The fleet rollout (test/lib/rollout.js): a good release rolls through the two
// hosts one at a time under client load with no failed request; a release that
// fails to load stops at the first host while the second keeps the old one.
// Teardown leaves no process, mount, veth or route. The other runs deploy both
// hosts at once (tunekit_serial=100%): they test the deploy, not the rollout.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { runCommand, until } = require('../lib/util');
const { bootHosts, stopHosts, copyInto, leftoversOf } = require('../lib/nspawn');
const ansible = require('../lib/ansible');
const { rolloutSteps } = require('../lib/rollout');
const { resolve } = require('../../lib/config');

const { ROOT, tailOf, sh } = ansible;
const FIXTURES = path.join(ROOT, 'test/fixtures/ansible');
const vars = resolve();
const STEPS = 12; // the steps of the first test below

let hosts = [];
let runner;
let tmp;

function run(cmd, args, { cwd = ROOT, env = {}, timeoutMs = 600000 } = {}) {
  return runCommand(cmd, args, { cwd, env, timeoutMs });
}

const playbook = (...args) => runner.playbook(...args);
const get = (ip, urlPath) => ansible.get(ip, vars.tunekit_nginx_listen_port, urlPath);

function limitOf(limitsText, name) {
  const line = limitsText.split('\n').find((l) => l.startsWith(name));
  assert.ok(line, `no "${name}" in /proc/PID/limits`);
  const [soft, hard] = line.slice(name.length).trim().split(/\s+/);
  return { soft: Number(soft), hard: Number(hard) };
}

const scrape = (h, port) => sh(h, `curl -sf http://127.0.0.1:${port}/metrics`);

// tunekit_metrics_exporters on a deployed host: each exporter answers on the
// host's loopback (the default address) and not on its network address; the
// runner's endpoint has a series per worker; the sampler's textfile reaches
// node_exporter; the rules file passes promtool; file_sd lists the targets.
async function checkMetrics(h, workers) {
  const units = ['prometheus-nginx-exporter', 'prometheus-node-exporter', 'mtail', `${vars.tunekit_app_name}-queue-sampler`];
  assert.equal(await sh(h, `systemctl is-active ${units.map((u) => `${u}.service`).join(' ')}`), units.map(() => 'active').join('\n'));
  assert.match(await scrape(h, vars.tunekit_metrics_nginx_exporter_port), /^nginx_up 1$/m, 'the nginx exporter does not reach stub_status');
  // mtail reads nginx's access log: the 2xx answers this step got through nginx
  // (the log is buffered; nginx writes it out within tunekit_nginx_access_log_flush).
  await until(`mtail counting nginx's 2xx on ${h.name}`, async () => /^tunekit_nginx_responses_total\{[^}]*status_class="2xx"[^}]*\} [1-9]/m.test(
    await scrape(h, vars.tunekit_metrics_mtail_port)), 60000, 500);
  // The sampler writes its first sample at start; node_exporter serves it.
  await until(`the sampler's queues in node_exporter on ${h.name}`, async () => /^tunekit_listen_queue_limit\{/m.test(
    await scrape(h, vars.tunekit_metrics_node_exporter_port)), 60000, 500);
  // In its sandbox it read every source doctor reads (nginx -T, app.json, /healthz, /proc):
  // doctor's evaluation, each rule it evaluated holding on the kit's own files.
  assert.doesNotMatch(await sh(h, `journalctl -u ${vars.tunekit_app_name}-queue-sampler.service --no-pager -o cat`), /cannot read|failed/,
    `the sampler on ${h.name} could not read a source`);
  const verdicts = [...(await scrape(h, vars.tunekit_metrics_node_exporter_port))
    .matchAll(/^tunekit_rule_broken\{[^}]*rule="([^"]+)"[^}]*\} (\S+)$/gm)].map((m) => [m[1], Number(m[2])]);
  for (const rule of ['keepalive-race', 'headers-timeout', 'nofile', 'app-backlog']) {
    assert.ok(verdicts.some(([r]) => r === rule), `the sampler on ${h.name} evaluated ${rule}: ${verdicts.map(([r]) => r).join(', ')}`);
  }
  assert.deepEqual(verdicts.filter(([, v]) => v !== 0), [], `no rule is broken on ${h.name}`);
  // The runner's endpoint: worker="N" per slot (the warm spare is worker="spare").
  const slots = async () => new Set([...(await scrape(h, vars.tunekit_metrics_listen.split(':').pop()))
    .matchAll(/^tunekit_app_connections_active\{[^}]*worker="(\d+)"/gm)].map((m) => m[1])).size;
  await until(`a series per worker (${workers}) at the runner's endpoint on ${h.name}`, async () => (await slots()) === workers, 60000, 500);
  for (const port of [vars.tunekit_metrics_node_exporter_port, vars.tunekit_metrics_nginx_exporter_port, vars.tunekit_metrics_mtail_port]) {
    await assert.rejects(ansible.get(h.ip, port, '/metrics'), { code: 'ECONNREFUSED' }, `port ${port} answers on ${h.ip}`);
  }
  const rules = path.join(h.root, vars.tunekit_metrics_prometheus_dir, 'tunekit.rules.yml');
  const check = await run('promtool', ['check', 'rules', rules], { timeoutMs: 60000 });
  assert.equal(check.code, 0, `promtool check rules ${rules}:\n${check.out}`);
  const sd = JSON.parse(fs.readFileSync(path.join(h.root, vars.tunekit_metrics_prometheus_dir, 'file_sd/tunekit.json'), 'utf8'));
  const a = vars.tunekit_metrics_exporters_address;
  assert.deepEqual(sd.map((g) => [g.labels.job, g.targets]), [
    ['tunekit_app', [vars.tunekit_metrics_listen.replace(/^tcp:/, '')]],
    ['tunekit_nginx', [`${a}:${vars.tunekit_metrics_nginx_exporter_port}`]],
    ['tunekit_mtail', [`${a}:${vars.tunekit_metrics_mtail_port}`]],
    ['tunekit_node', [`${a}:${vars.tunekit_metrics_node_exporter_port}`]],
  ]);
  // `tunekit status` on the host, as an operator runs it there (a copy of the kit
  // with its npm packages, docs/observability.md): it reads the same endpoints, so
  // it sees a row per worker slot, nginx's counters and the app socket's queue.
  for (const d of ['app', 'bin', 'lib', 'roles', 'ansible', 'node_modules', 'package.json']) copyInto(h, path.join(ROOT, d), path.join('opt/tunekit-kit', d));
  const st = await h.ssh(`node /opt/tunekit-kit/bin/tunekit.js status --json --app-config ${vars.tunekit_app_config_path}`);
  assert.equal(st.code, 0, `tunekit status on ${h.name} (exit ${st.code}):\n${st.stdout}\n${st.stderr}`);
  const d = JSON.parse(st.stdout);
  assert.equal(d.workers.filter((w) => w.worker !== 'spare').length, workers, `tunekit status rows on ${h.name}: ${st.stdout}`);
  assert.ok(d.nginx.accepted > 0 && d.nginx.accepted === d.nginx.handled, `nginx in tunekit status on ${h.name}: ${JSON.stringify(d.nginx)}`);
  assert.deepEqual(d.acceptQueue.sockets.map((s) => s.limit), [vars.tunekit_app_backlog], `the socket's queue in tunekit status on ${h.name}`);
}

test('site.yml onto two booted systemd hosts', { timeout: 45 * 60 * 1000 }, async (t) => {
  let passed = 0;
  t.after(async () => {
    await stopHosts(hosts);
    if (runner) runner.cleanup(passed === STEPS);
  });
  const step = (name, fn) => t.test(name, async (st) => {
    await fn(st);
    passed += 1;
  });

  hosts = await bootHosts(2, { name: 'tkans' });
  // These hosts serve nothing else: the kit may take :80 from Debian's welcome
  // page (a shared host's clashes have their own suite, shared-host.test.js).
  runner = ansible.createRunner(hosts, {
    name: 'tunekit-ansible-e2e',
    // The exporters too (tunekit_metrics_exporters), on loopback as by default:
    // checked over ssh on each host's loopback, and refused on its address.
    groupVars: { tunekit_nginx_disable_sites: ['default'], tunekit_metrics_exporters: true },
    extraArgs: ['-e', 'tunekit_serial=100%'],
  });
  tmp = runner.tmp;

  // Check mode on one host: the two hosts are the same release of the same
  // distribution with the same values (what needs two is the rollout), and each
  // play costs a minute of the suite's CPU per host. A second run that changes
  // nothing is the rollout's (test/lib/rollout.js: the same release again, with
  // the app's source, on one host); apps, distros and app-source check it too.
  await step('check mode (--check --diff) on a fresh host completes and changes nothing', async () => {
    const h = hosts[0];
    const before = await sh(h, 'ls /etc/systemd/system; cat /etc/nginx/nginx.conf | sha256sum');
    const r = await playbook(['--check', '--diff'], { limit: h.name });
    assert.equal(r.code, 0, `check mode failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.equal(r.recap[h.name]?.failed, 0, `check mode: ${h.name} failed`);
    assert.equal(await sh(h, 'ls /etc/systemd/system; cat /etc/nginx/nginx.conf | sha256sum'), before, 'check mode wrote to the host');
  });

  await step('one run provisions both hosts', async () => {
    const r = await playbook();
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
    for (const h of hosts) {
      assert.ok(r.recap[h.name], `no recap for ${h.name}`);
      assert.equal(r.recap[h.name].failed + r.recap[h.name].unreachable, 0, `${h.name} failed`);
      assert.ok(r.recap[h.name].changed > 0, `${h.name}: the first run changed nothing`);
    }
  });

  for (const i of [0, 1]) {
    await step(`host ${i + 1}: the deployed stack is what the one definition says`, async () => {
      const h = hosts[i];
      const app = `${vars.tunekit_app_name}.service`;
      assert.equal(await sh(h, `systemctl is-active ${app} nginx.service`), 'active\nactive');

      // HTTP 200 through nginx (from outside the host) to the app on the UDS.
      const health = await get(h.ip, '/healthz');
      assert.equal(health.status, 200, `GET /healthz through nginx on ${h.name}: ${health.body}`);
      const body = JSON.parse(health.body);
      assert.ok(body.workers >= 2, `the app reports ${body.workers} workers; expected >= 2`);
      // nginx really talks to the socket: its upstream names it.
      const upstream = await sh(h, `cat ${vars.tunekit_nginx_include_dir}/upstream.conf`);
      assert.match(upstream, new RegExp(`server unix:${vars.tunekit_socket_path}\\b`));

      // Socket: owner, group, mode; its directory searchable by the group only.
      assert.equal(await sh(h, `stat -c '%U %G %a %F' ${vars.tunekit_socket_path}`),
        `${vars.tunekit_app_user} ${vars.tunekit_socket_group} ${Number(vars.tunekit_socket_mode.replace(/^0/, ''))} socket`);
      assert.equal(await sh(h, `stat -c '%G %a' ${vars.tunekit_socket_dir}`), `${vars.tunekit_socket_group} 750`);
      assert.match(await sh(h, `id -nG ${vars.tunekit_nginx_user}`), new RegExp(`\\b${vars.tunekit_socket_group}\\b`));

      // nginx's stub_status (status.conf) answers the exporter on the host's loopback;
      // nothing listens on that port on the host's network address.
      const statusUrl = `${vars.tunekit_nginx_status_port}${vars.tunekit_nginx_status_path}`;
      assert.match(await sh(h, `curl -s http://127.0.0.1:${statusUrl}`), /^Active connections: \d+\s+server accepts handled requests/);
      await assert.rejects(ansible.get(h.ip, vars.tunekit_nginx_status_port, vars.tunekit_nginx_status_path), { code: 'ECONNREFUSED' });

      await checkMetrics(h, body.workers);

      // Profiling tools only on request (tunekit_install_profiling_tools, off by default).
      assert.equal(vars.tunekit_install_profiling_tools, false);
      assert.equal(await sh(h, 'command -v perf strace || true'), '', 'perf or strace installed without being asked for');

      // Process limits as systemd applied them. The units ask for the defined
      // values; a process gets min(asked, the hard ceiling its container inherited
      // from the machine running the test), since a container cannot raise its
      // own ceiling without CAP_SYS_RESOURCE.
      const ceiling = limitOf(await sh(h, 'cat /proc/1/limits'), 'Max open files').hard;
      const appPid = await sh(h, `systemctl show -P MainPID ${app}`);
      assert.equal(Number(await sh(h, `systemctl show -P LimitNOFILE ${app}`)), Number(vars.tunekit_app_limit_nofile));
      const appLimits = limitOf(await sh(h, `cat /proc/${appPid}/limits`), 'Max open files');
      assert.equal(appLimits.soft, Math.min(Number(vars.tunekit_app_limit_nofile), ceiling));
      const nginxPid = await sh(h, 'systemctl show -P MainPID nginx.service');
      assert.equal(Number(await sh(h, 'systemctl show -P LimitNOFILE nginx.service')), Number(vars.tunekit_nginx_limit_nofile));
      const nginxLimits = limitOf(await sh(h, `cat /proc/${nginxPid}/limits`), 'Max open files');
      assert.equal(nginxLimits.soft, Math.min(Number(vars.tunekit_nginx_limit_nofile), ceiling));
      const workerPid = (await sh(h, `pgrep -P ${nginxPid} | head -n1`));
      const workerLimits = limitOf(await sh(h, `cat /proc/${workerPid}/limits`), 'Max open files');
      assert.equal(workerLimits.soft, Math.min(Number(vars.tunekit_nginx_worker_rlimit_nofile), ceiling));

      // sysctl: per-netns keys are at least what the definition asks for (never
      // lowered); global fs.* keys cannot be set in a container: reported in the
      // drop-in with a leading "-" so boot skips them, not fatal.
      const wanted = {
        'net.core.somaxconn': vars.tunekit_sysctl_net_core_somaxconn,
        'net.ipv4.tcp_max_syn_backlog': vars.tunekit_sysctl_net_ipv4_tcp_max_syn_backlog,
      };
      for (const [key, want] of Object.entries(wanted)) {
        const live = Number(await sh(h, `sysctl -n ${key}`));
        assert.ok(live >= Number(want), `${key} = ${live} on ${h.name}; expected >= ${want}`);
      }
      const [low, high] = (await sh(h, 'sysctl -n net.ipv4.ip_local_port_range')).split(/\s+/).map(Number);
      const [wantLow, wantHigh] = String(vars.tunekit_sysctl_net_ipv4_ip_local_port_range).split(/\s+/).map(Number);
      assert.ok(low <= wantLow && high >= wantHigh, `ip_local_port_range ${low} ${high} does not cover ${wantLow} ${wantHigh}`);
      // Every key the drop-in says is set (no leading "-") is live with that value.
      const dropIn = await sh(h, `cat /etc/sysctl.d/${vars.tunekit_sysctl_file}`);
      const settable = [...dropIn.matchAll(/^([a-z][\w.]+) = (.+)$/gm)];
      assert.ok(settable.some((m) => m[1] === 'net.core.somaxconn'), `somaxconn is not in the drop-in:\n${dropIn}`);
      for (const [, key, value] of settable) {
        assert.equal((await sh(h, `sysctl -n ${key}`)).replace(/\s+/g, ' '), value.trim(), `${key} on ${h.name}`);
      }
      // Keys this container cannot set (global keys seen from its network
      // namespace) are kept with a leading "-" and a note saying why; the play
      // did not fail on them.
      const lines = dropIn.split('\n');
      const skipped = lines.map((l, n) => [l, lines[n - 1]]).filter(([l]) => l.startsWith('-'));
      assert.ok(skipped.length > 0, `no key reported as not settable in a container:\n${dropIn}`);
      for (const [l, note] of skipped) assert.match(note, /^# tunekit-apply: .*cannot be set here/, `no reason above "${l}"`);

      // keep-alive race: the app's live keepAliveTimeout exceeds nginx's upstream
      // keepalive_timeout as written on the host.
      const m = /^\s*keepalive_timeout\s+(\d+)s?;/m.exec(upstream);
      assert.ok(m, `no keepalive_timeout in the deployed upstream.conf:\n${upstream}`);
      assert.ok(body.keepAliveTimeout > Number(m[1]) * 1000,
        `app keepAliveTimeout ${body.keepAliveTimeout} ms is not above nginx's upstream keepalive_timeout ${m[1]} s`);
      assert.ok(body.headersTimeout > body.keepAliveTimeout);
    });
  }

  await step('a metrics port another process holds is refused by name before anything changes', async () => {
    const h = hosts[1];
    const files = '/etc/systemd/system/*.service.d/tunekit.conf /etc/systemd/system/*-queue-sampler.service';
    const before = await sh(h, `sha256sum ${files}`);
    // sshd holds port 22 on every host.
    const r = await playbook(['-e', JSON.stringify({ tunekit_metrics_mtail_port: 22 })], { limit: h.name });
    assert.notEqual(r.code, 0, 'the play succeeded with mtail on the port sshd holds');
    assert.match(r.out, /tunekit_metrics_mtail_port=22 is taken on \S+: \S+:22 is held by users:\(\("sshd"/);
    assert.equal(r.recap[h.name]?.changed, 0, 'something changed before the refusal');
    assert.equal(await sh(h, `sha256sum ${files}`), before, 'the exporters\' files changed');
    assert.equal(await sh(h, 'systemctl is-active mtail.service'), 'active');
  });

  await rolloutSteps({ step, hosts, runner, vars });

  await step('tunekit loadtest drives a deployed host over the veth', async () => {
    const out = path.join(tmp, 'loadtest.json');
    const r = await run(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'loadtest', '--upstream', 'uds',
      '--url', `http://${hosts[0].ip}/`, '--duration', '3', '--connections', '10', '--json', out], { timeoutMs: 120000 });
    assert.equal(r.code, 0, `loadtest failed:\n${tailOf(r.out)}`);
    assert.ok(fs.existsSync(out), 'loadtest wrote no JSON report');
  });

  await step('a broken nginx variable fails at validation; the old config stays live and serving', async () => {
    const h = hosts[1];
    const files = `${vars.tunekit_nginx_conf_dir}/nginx.conf ${vars.tunekit_nginx_include_dir}/*.conf`;
    const sumsBefore = await sh(h, `sha256sum ${files}`);
    const masterBefore = await sh(h, 'systemctl show -P MainPID nginx.service');
    const workersBefore = await sh(h, `pgrep -P ${masterBefore} | sort`);
    const r = await playbook(['-e', `@${path.join(FIXTURES, 'broken-nginx.yml')}`], { limit: h.name });
    assert.notEqual(r.code, 0, 'the play succeeded with a broken nginx variable');
    assert.match(r.out, /nginx -t rejected the new configuration/);
    assert.match(r.out, /"proxy_busy_buffers_size" must be less than the size of all "proxy_buffers" minus one buffer/, 'nginx\'s own message is not shown');
    assert.equal(await sh(h, `sha256sum ${files}`), sumsBefore, 'the live configuration files changed');
    assert.equal(await sh(h, 'systemctl show -P MainPID nginx.service'), masterBefore, 'nginx was restarted');
    assert.equal(await sh(h, `pgrep -P ${masterBefore} | sort`), workersBefore, 'nginx was reloaded');
    const res = await get(h.ip, '/');
    assert.equal(res.status, 200, 'nginx stopped serving');
    assert.equal(await sh(h, 'ls -d /tmp/*.tunekit-nginx 2>/dev/null | wc -l'), '0', 'the scratch copy was left behind');
  });

  await step('switching a host to PM2 (tunekit_process_manager=pm2): PM2 binds the socket, second run changes nothing', async () => {
    const h = hosts[0];
    // The containers have no registry: seed PM2 6 from the kit's own dev
    // dependencies, where the role's `npm install -g pm2` would put it (the role
    // skips that step when /usr/local/bin/pm2 exists).
    const lib = path.join(h.root, 'usr/local/lib/tunekit-pm2');
    fs.mkdirSync(lib, { recursive: true });
    fs.cpSync(path.join(ROOT, 'node_modules'), path.join(lib, 'node_modules'), { recursive: true, verbatimSymlinks: true });
    fs.symlinkSync('/usr/local/lib/tunekit-pm2/node_modules/pm2/bin/pm2', path.join(h.root, 'usr/local/bin/pm2'));
    const pm2 = ['-e', JSON.stringify({ tunekit_process_manager: 'pm2', tunekit_install_packages: false })];
    const r = await playbook(pm2, { limit: h.name });
    assert.equal(r.code, 0, `switching to PM2 failed (log ${r.log}):\n${tailOf(r.out)}`);
    const user = vars.tunekit_app_user;
    assert.equal(await sh(h, `systemctl is-active pm2-${user}.service`), 'active');
    assert.equal((await h.ssh(`systemctl is-active ${vars.tunekit_app_name}.service`)).stdout.trim(), 'inactive');
    const health = await get(h.ip, '/healthz');
    assert.equal(health.status, 200, `GET /healthz through nginx under PM2: ${health.body}`);
    assert.ok(JSON.parse(health.body).workers >= 2);
    assert.equal(await sh(h, `stat -c '%U %G %a' ${vars.tunekit_socket_path}`),
      `${user} ${vars.tunekit_socket_group} ${Number(vars.tunekit_socket_mode.replace(/^0/, ''))}`);
    const again = await playbook(pm2, { limit: h.name });
    assert.equal(again.code, 0, `second PM2 run failed (log ${again.log}):\n${tailOf(again.out)}`);
    assert.equal(again.recap[h.name]?.changed, 0, `second PM2 run changed something (log ${again.log})`);
  });

  await step('teardown leaves no process, mount, veth or route', async () => {
    const stopped = hosts;
    await stopHosts(stopped);
    for (const h of stopped) assert.deepEqual(leftoversOf(h), [], `left after stopping ${h.name}`);
  });
});

test('a test that dies mid-way still leaves nothing behind', { timeout: 5 * 60 * 1000 }, async () => {
  // A child boots a host, reports it, then throws: the exit hook must clean up,
  // the container's init too (a SIGKILL to nspawn alone leaves it booted).
  const script = `
    const { bootHosts } = require(${JSON.stringify(path.join(ROOT, 'test/lib/nspawn'))});
    bootHosts(1, { name: 'tkdie', log: () => {} }).then((h) => {
      const { name, pid, init, iface, dir, cidr } = h[0];
      console.log(JSON.stringify({ name, pid, init, iface, dir, cidr }));
      throw new Error('deliberate failure after boot');
    });`;
  const r = await run(process.execPath, ['-e', script], { timeoutMs: 240000 });
  assert.notEqual(r.code, 0, 'the child did not fail');
  assert.match(r.out, /deliberate failure after boot/);
  const line = r.out.split('\n').find((l) => l.startsWith('{'));
  assert.ok(line, `the child never booted its host:\n${r.out}`);
  const h = JSON.parse(line);
  assert.ok(h.init, `the child's host has no init recorded, so no check of the container's processes: ${line}`);
  // SIGKILLed processes take a moment to be reaped by init: wait, bounded.
  let left = leftoversOf(h);
  for (let i = 0; i < 60 && left.length; i++) {
    await new Promise((r) => setTimeout(r, 500));
    left = leftoversOf(h);
  }
  assert.deepEqual(left, [], `left after the child died with ${h.name} running`);
});
