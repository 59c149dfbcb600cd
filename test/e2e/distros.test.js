'use strict';
// site.yml onto the distributions operators run, each a booted systemd host with
// its own nginx and Node from Debian (Ubuntu's archive is not reachable here;
// the Debian release with the same nginx and Node stands in). Every run here
// uses the Ansible collection tunekit.stack as an operator installs it: built
// from the checkout, installed from the tarball into a collections path outside
// the repository, its playbook imported by a playbook of the operator's own
// (test/lib/collection.js; nothing of the checkout on any Ansible path), so the
// refusals below are also the collection's, ahead of Ansible's argument specs:
// - Debian 11 (nginx 1.18, Node 12, as Ubuntu 22.04): the play refuses Debian's
//   Node 12 before it deploys anything, naming the version and both ways out;
//   then, with a supported Node copied onto the host (this machine's) and
//   tunekit_node_bin pointing at it, site.yml deploys and the stack serves.
// - Debian 12 (nginx 1.22, Node 18, as Ubuntu 24.04): HTTP/3 is refused by
//   name before anything is deployed (its nginx has no ngx_http_v3_module);
//   then it deploys with the distribution's packages; a second run changes
//   nothing.
// - sid (the newest nginx and Node Debian has): deploys the HTTPS front with
//   HTTP/3 on; HTTP/2 responses advertise h3 (Alt-Svc) and sid's own curl gets
//   the app's answer over HTTP/3 alone; and the pool holds: during a burst over
//   HTTPS the app accepts no more connections than there are clients, within
//   keepalive x nginx workers (a test app counts them).
// A distribution is one entry of MATRIX below (its suite, what it checks before,
// at and after the one deploy); test/lib/nspawn.js builds any Debian suite.
// Each host is checked over HTTP (HTTPS where the entry has `tls`) through nginx
// to the app on its UDS, with the
// socket's owner and mode. The full idempotence, check-mode and failure suite
// runs on Debian 13 in ansible-site.test.js; here each release deploys,
// verifies and (Debian 12) re-runs once.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');
const { bootHosts, stopAllHosts } = require('../lib/nspawn');
const ansible = require('../lib/ansible');
const { installCollection } = require('../lib/collection');
const { resolve } = require('../../lib/config');
const { MIN_NODE } = require('../../app/node-version');
const { makeCA, makeLeaf } = require('../../lib/tls');

const { ROOT, tailOf, sh } = ansible;
const vars = resolve();
const NODE_ON_HOST = '/opt/tunekit-node/bin/node';
const COUNTING_APP = path.join(ROOT, 'test/fixtures/ansible/counting-app');
const CLIENTS = 16;
const REQUESTS = 2000;
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// The HTTPS front of an entry with `tls`: a throwaway CA's leaf for localhost in
// certbot's layout on the host, and the CA beside it for the host's own curl.
const TLS_NAME = 'localhost';
const TLS_VARS = { tunekit_nginx_tls: true, tunekit_nginx_server_name: TLS_NAME };
const CA_ON_HOST = '/etc/tunekit-e2e/ca.pem';

/**
 * A play limited to host h that must fail before anything is deployed: timed
 * into times[key], refused (`deployed` says what a success would mean), and none
 * of the kit's files on the host. Resolves the play's result for its message.
 */
async function refusedPlay({ h, runner, times }, key, args, deployed) {
  const t0 = Date.now();
  const r = await runner.playbook(args, { limit: h.name });
  times[key] = Math.round((Date.now() - t0) / 1000);
  assert.notEqual(r.code, 0, deployed);
  for (const p of [vars.tunekit_nginx_include_dir, `/etc/systemd/system/${vars.tunekit_app_name}.service`, `/etc/sysctl.d/${vars.tunekit_sysctl_file}`, vars.tunekit_app_install_dir]) {
    assert.equal((await h.ssh(`test -e ${p}`)).code, 1, `${p} exists after the refusal`);
  }
  return r;
}

// The matrix: one entry per distribution. `hostVars` are the host's own
// variables from the start; `before` runs before the one deploy of every host
// (every entry's at once; it may add host variables); `deployed` checks what
// only this release shows;
// `after` runs once every host serves; `tls` gives the host the HTTPS front
// (TLS_VARS and a certificate). Each test gets
// { h, runner, version, versions, times, ca } (versions: this host's nginx and
// node; ca: the PEM the HTTPS fronts are signed by).
const MATRIX = [
  {
    suite: 'bullseye',
    name: 'tkd11',
    label: 'Debian 11',
    before: {
      title: "Debian 11: Debian's Node 12 is refused before anything is deployed",
      async run({ h, runner, version, times }) {
        const r = await refusedPlay({ h, runner, times }, 'bullseyeRefusalS', [], 'the play deployed onto Node 12');
        assert.match(r.out, new RegExp(`Node ${escape(version.node.slice(1))} \\(/usr/bin/node\\) on ${h.name} is too old;\\s+tunekit needs Node ${escape(MIN_NODE)} or newer`));
        assert.match(r.out, /point tunekit_node_bin at it and set\s+tunekit_install_node: false/);
        // A Node the user installed: this machine's, which runs on Debian 11's glibc.
        const dest = path.join(h.root, NODE_ON_HOST);
        fs.mkdirSync(path.dirname(dest), { recursive: true });
        fs.copyFileSync(process.execPath, dest);
        fs.chmodSync(dest, 0o755);
        return { tunekit_node_bin: NODE_ON_HOST, tunekit_install_node: false };
      },
    },
    async deployed({ h }) {
      assert.match(await sh(h, `systemctl show -P ExecStart ${vars.tunekit_app_name}.service`), new RegExp(NODE_ON_HOST));
      assert.match(await sh(h, `cat ${vars.tunekit_nginx_include_dir}/upstream.conf`), /keepalive_time: nginx 1\.18\.\d+ lacks it/);
    },
  },
  {
    suite: 'bookworm',
    name: 'tkd12',
    label: 'Debian 12',
    before: {
      title: 'Debian 12: HTTP/3 is refused by name before anything is deployed (nginx 1.22 has no ngx_http_v3_module)',
      async run({ h, runner, version, times }) {
        const r = await refusedPlay({ h, runner, times }, 'bookwormHttp3RefusalS', ['-e', JSON.stringify({ ...TLS_VARS, tunekit_nginx_http3: true })],
          'the play deployed HTTP/3 onto nginx 1.22');
        assert.match(r.out, new RegExp(`tunekit_nginx_http3=true needs nginx ${escape(vars.tunekit_nginx_versions.features.http3.since)} or later, and\\s+` +
          `tunekit_nginx_version=${escape(version.nginx)}: this nginx has no HTTP/3;.*\\s+.*set tunekit_nginx_http3: false`));
      },
    },
    after: {
      title: 'Debian 12: a second run changes nothing',
      async run({ h, runner, times }) {
        const t0 = Date.now();
        const r = await runner.playbook([], { limit: h.name });
        times.bookwormSecondRunS = Math.round((Date.now() - t0) / 1000);
        assert.equal(r.code, 0, `second run failed (log ${r.log}):\n${tailOf(r.out)}`);
        assert.equal(r.recap[h.name].changed, 0, `second run changed ${h.name}:\n${r.out.split('\n').filter((l) => l.startsWith('changed:') || l.startsWith('TASK')).join('\n')}`);
      },
    },
  },
  {
    suite: 'sid',
    name: 'tkdsid',
    label: 'sid',
    hostVars: { tunekit_app_source: COUNTING_APP, tunekit_app_module: '{{ tunekit_app_source_dir }}/server.js', tunekit_nginx_http3: true },
    tls: true,
    async deployed({ h, ca }) {
      const port = vars.tunekit_nginx_tls_port;
      const h2 = await ansible.getHttp2(h.ip, port, '/', { name: TLS_NAME, ca });
      assert.equal(h2.status, 200, h2.body);
      assert.equal(h2.headers['alt-svc'], `h3=":${port}"; ma=${vars.tunekit_nginx_http3_alt_svc_max_age}`);
      const h3 = await ansible.curlHttp3(h, port, '/', { name: TLS_NAME, caFile: CA_ON_HOST });
      assert.equal(h3.version, '3', `the response came over HTTP/${h3.version}`);
      assert.equal(h3.status, 200, h3.body);
      assert.ok(JSON.parse(h3.body).pid > 0, `the app's answer over HTTP/3: ${h3.body}`);
    },
    // The pool as nginx-keepalive.test.js pins it on a local stack: a client
    // connection carries one request at a time, so the upstream connections
    // opened during the burst are at most the clients, and within the pool.
    after: {
      title: 'sid: the pool holds — no more upstream connections than clients, within keepalive x nginx workers',
      async run({ h }) {
        // Each app worker's running count of accepted connections, one file each
        // (summed per file: the counts carry no newline to join on); the burst's
        // share is the difference.
        const accepted = async () => Number(await sh(h, `awk '{ s += $1 } END { print s + 0 }' ${vars.tunekit_socket_dir}/count.* 2>/dev/null || echo 0`));
        const before = await accepted();
        // Over HTTPS, the front this host serves (a TLS connection per client, kept alive).
        const result = await autocannon({ url: `https://${h.ip}:${vars.tunekit_nginx_tls_port}/`, servername: TLS_NAME, headers: { host: TLS_NAME },
          connections: CLIENTS, amount: REQUESTS, timeout: 30 });
        assert.equal(result.errors, 0);
        assert.equal(result['2xx'], REQUESTS);
        const opened = (await accepted()) - before;
        const nginxWorkers = Number(await sh(h, 'pgrep -c -P "$(cat /run/nginx.pid)"'));
        const pool = Number(vars.tunekit_nginx_upstream_keepalive) * nginxWorkers;
        process.stderr.write(`distros: sid app accepted ${opened} upstream connections for ${REQUESTS} requests over ${CLIENTS} clients (pool ${pool})\n`);
        assert.ok(opened >= 1, 'the app counted the connections nginx opened');
        assert.ok(CLIENTS <= Number(vars.tunekit_nginx_upstream_keepalive), `the check needs ${CLIENTS} clients within one worker's pool`);
        assert.ok(opened <= CLIENTS, `${opened} upstream connections opened for ${CLIENTS} clients`);
        assert.ok(opened <= pool, `${opened} upstream connections opened, pool ${pool}`);
      },
    },
  },
];

test(`site.yml onto ${MATRIX.map((d) => d.label).join(', ')}`, { timeout: 45 * 60 * 1000, concurrency: MATRIX.length }, async (t) => {
  const hosts = {};
  let runner;
  let passed = false;
  const times = {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-distros-e2e-'));
  t.after(async () => {
    await stopAllHosts(); // every host booted here, whichever step failed
    if (runner) runner.cleanup(passed);
    fs.rmSync(dir, { recursive: true, force: true });
    process.stderr.write(`distros: ${JSON.stringify(times)}\n`);
  });
  const started = Date.now();
  // The collection is built and installed while the hosts boot: one call, so
  // a host that fails to boot stops the others with it.
  const [booted, collection] = await Promise.all([
    bootHosts(MATRIX.map((d) => ({ name: d.name, suite: d.suite }))),
    installCollection(path.join(dir, 'operator')),
  ]);
  MATRIX.forEach((d, i) => { hosts[d.suite] = booted[i]; });
  times.bootS = Math.round((Date.now() - started) / 1000);
  const versions = {};
  for (const [suite, h] of Object.entries(hosts)) {
    versions[suite] = { nginx: (await sh(h, 'nginx -v 2>&1')).replace(/.*\//, ''), node: await sh(h, 'node --version') };
  }
  process.stderr.write(`distros: versions ${JSON.stringify(versions)}\n`);
  const ca = makeCA(path.join(dir, 'ca'));
  const leaf = makeLeaf(path.join(dir, 'leaf'), ca);
  for (const d of MATRIX.filter((e) => e.tls)) {
    const put = (rel, from, mode) => {
      const to = path.join(hosts[d.suite].root, rel);
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
      fs.chmodSync(to, mode);
    };
    put(`/etc/letsencrypt/live/${TLS_NAME}/fullchain.pem`, leaf.cert, 0o644);
    put(`/etc/letsencrypt/live/${TLS_NAME}/privkey.pem`, leaf.key, 0o600);
    put(CA_ON_HOST, ca.cert, 0o644);
  }
  const hostVarsOf = (d) => ({ ...(d.tls ? TLS_VARS : {}), ...d.hostVars });
  runner = ansible.createRunner(Object.values(hosts), {
    name: 'tunekit-distros-e2e',
    collection,
    groupVars: { tunekit_nginx_disable_sites: ['default'] },
    extraArgs: ['-e', 'tunekit_serial=100%'], // every host at once, as before the rollout
    hostVars: Object.fromEntries(MATRIX.filter((d) => d.hostVars || d.tls).map((d) => [hosts[d.suite].name, hostVarsOf(d)])),
  });
  const caPem = fs.readFileSync(ca.cert);
  const ctx = (d) => ({ h: hosts[d.suite], runner, version: versions[d.suite], versions, times, ca: caPem });

  async function servesThroughNginx(h, d) {
    assert.equal(await sh(h, `systemctl is-active ${vars.tunekit_app_name}.service nginx.service`), 'active\nactive');
    const res = d.tls
      ? await ansible.get(h.ip, vars.tunekit_nginx_tls_port, '/healthz', { host: TLS_NAME, ca: caPem })
      : await ansible.get(h.ip, vars.tunekit_nginx_listen_port, '/healthz');
    assert.equal(res.status, 200, `GET /healthz through nginx on ${h.name}: ${res.body}`);
    assert.match(await sh(h, `cat ${vars.tunekit_nginx_include_dir}/upstream.conf`), new RegExp(`server unix:${vars.tunekit_socket_path}\\b`));
    assert.equal(await sh(h, `stat -c '%U %G %a %F' ${vars.tunekit_socket_path}`),
      `${vars.tunekit_app_user} ${vars.tunekit_socket_group} ${Number(vars.tunekit_socket_mode.replace(/^0/, ''))} socket`);
    return res;
  }

  // The checks before the deploy run at once: each is a short play limited to
  // its own host (most of it Ansible waiting on SSH).
  await Promise.all(MATRIX.filter((e) => e.before).map((d) => t.test(d.before.title, async () => {
    const added = await d.before.run(ctx(d));
    if (added) runner.setHostVars(hosts[d.suite].name, { ...hostVarsOf(d), ...added });
  })));

  await t.test(`all ${MATRIX.length} deploy in one run and serve through nginx, rendered for their own nginx`, async () => {
    const t0 = Date.now();
    const r = await runner.playbook();
    times.deployAllS = Math.round((Date.now() - t0) / 1000);
    assert.equal(r.code, 0, `site.yml failed (log ${r.log}):\n${tailOf(r.out)}`);
    assert.match(r.out, /^TASK \[tunekit\.stack\.tunekit_nginx : /m, "the play did not run the installed collection's roles");
    for (const h of Object.values(hosts)) assert.equal(r.recap[h.name].failed + r.recap[h.name].unreachable, 0, `${h.name} failed`);
    for (const d of MATRIX) {
      const h = hosts[d.suite];
      await servesThroughNginx(h, d);
      assert.match(await sh(h, `head -n 12 ${vars.tunekit_nginx_conf_dir}/nginx.conf`), new RegExp(`for nginx ${escape(versions[d.suite].nginx)}\\.`));
      if (d.deployed) await d.deployed(ctx(d));
    }
  });

  for (const d of MATRIX.filter((e) => e.after)) {
    await t.test(d.after.title, () => d.after.run(ctx(d)));
  }
  passed = true;
});
