'use strict';
// The host side on a booted systemd host (Debian 13 in systemd-nspawn, from
// test/lib/nspawn.js): the rendered app unit starts as its own user; the socket
// is tunekit:tunekit 0660 in a 0750 directory; /proc/<pid>/limits shows
// LimitNOFILE; `systemctl reload` (and `tunekit reload`) of the app and of nginx under GETs and POSTs
// of 0..64 KB (test/faults/bodies.js against the hash app) fail no request and
// lose, corrupt or repeat no body; with the .socket unit, `systemctl restart` under load loses no
// connection attempt; `tunekit sysctl apply` in the container sets what its
// network namespace allows and reports the rest; the unit starts the app from
// every place render accepts (/srv, /opt, a folder of a 0700 home opened
// read-only; render refuses /root, where ProtectHome=tmpfs keeps the folder out
// of the app user's reach); a crash storm (a route that kills its worker, twice a
// second beside a steady load) leaves the unit active, never restarted by
// systemd, with the error in its journal once.
//
// The kit is copied into the container's root (/opt/tunekit-app), the render
// tree onto its /. The load runs INSIDE the container (test/fixtures/host/load.js,
// autocannon) against the container's own loopback: no traffic leaves it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const { render } = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { record } = require('../faults/report');
const bodies = require('../faults/bodies');

let nspawn = null;
try {
  nspawn = require('../lib/nspawn');
} catch {
  // reported by skip below
}
const skip = process.getuid() !== 0 ? 'needs root (systemd-nspawn)'
  : !nspawn ? 'test/lib/nspawn.js is missing'
    : spawnSync('which', ['systemd-nspawn']).status !== 0 ? 'systemd-nspawn is not installed (apt-get install systemd-container)'
      : false;

const { until: untilEvery } = require('../lib/util');

const until = (what, fn, timeoutMs = 60000) => untilEvery(what, fn, timeoutMs, 250);

// Client-side keep-alive limit out of the way: autocannon ignores nginx's
// "Connection: close" on the last request of a client connection and writes the next
// request at once, so each time a connection reaches keepalive_requests it may see an
// ECONNRESET from nginx that has nothing to do with the app (measured on a local stack
// with keepalive_requests=2: 56 errors in 51,620 requests). The app-side reload is what
// these tests measure.
// The files are copied straight onto a host that serves nothing else: a
// dedicated host (a shared one would keep Debian's welcome site, default_server on :80).
const SET = ['tunekit_app_workers=2', 'tunekit_nginx_keepalive_requests=10000000', 'tunekit_nginx_host_mode=dedicated'];
const LOAD_S = 20;
const HASH_APP = '/opt/tunekit-app/test/fixtures/faults/hash-app.js';
const CRASH_APP = '/opt/tunekit-app/test/fixtures/runner/crash-route.js';
const { CRASH_MESSAGE } = require('../fixtures/runner/crash-route');
const CRASH_STORM_S = 30;

async function sh(host, cmd, timeoutMs = 120000) {
  const r = await host.ssh(cmd, { timeoutMs });
  assert.equal(r.code, 0, `\`${cmd}\` in ${host.name} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout.trim();
}

// Render the host tree (app settings, systemd, sysctl, nginx) and put it onto
// the container's / (its root is an overlay mount seen from here), file by file.
function install(host, set) {
  const vars = config.resolve({ set: [...SET, ...set] });
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-e2e-'));
  try {
    const { files } = render(vars, out, { layers: ['app', 'systemd', 'sysctl', 'nginx'] });
    for (const f of files) nspawn.copyInto(host, f, path.relative(out, f));
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
  return vars;
}

// The workers of the app: children of the unit's main process.
async function appPids(host, unit) {
  const main = Number(await sh(host, `systemctl show -p MainPID --value ${unit}`));
  const kids = (await host.ssh(`pgrep -P ${main}`)).stdout.trim().split('\n').filter(Boolean).map(Number).sort();
  return { main, workers: kids };
}

// The runner keeps a spare worker besides the serving ones: at least N children.
async function waitServing(host, vars, expectWorkers) {
  const unit = `${vars.tunekit_app_name}.service`;
  return until(`${unit} with ${expectWorkers} workers answering on ${vars.tunekit_socket_path}`, async () => {
    const p = await appPids(host, unit);
    if (p.workers.length < expectWorkers) return false;
    const code = (await host.ssh(`curl -s -o /dev/null -w '%{http_code}' --unix-socket ${vars.tunekit_socket_path} http://app/`)).stdout;
    return code === '200' ? p : false;
  });
}

function startLoad(host, seconds = LOAD_S, connections = 16) {
  return host.ssh(`node /opt/tunekit-app/test/fixtures/host/load.js http://127.0.0.1/ ${seconds} ${connections}`, { timeoutMs: (seconds + 60) * 1000 })
    .then((r) => {
      assert.equal(r.code, 0, `load.js failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop());
    });
}

function assertNoLoss(t, label, result) {
  t.diagnostic(`${label}: ${JSON.stringify(result)}`);
  assert.ok(result.ok2xx > 100, `${label}: the load ran`);
  assert.equal(result.errors, 0, `${label}: no connection errors ${JSON.stringify(result.errorCodes)}`);
  assert.equal(result.timeouts, 0, `${label}: no timeouts`);
  assert.equal(result.non2xx, 0, `${label}: no non-2xx (nginx 502) ${JSON.stringify(result.statuses)}`);
}

test('the hardened unit on a booted systemd host: owner, mode, limits, reload and socket-activated restart under load', { skip, timeout: 30 * 60 * 1000 }, async (t) => {
  const hosts = await nspawn.bootHosts(1, { name: 'tkhost' });
  t.after(() => nspawn.stopHosts(hosts));
  const [host] = hosts;

  // The kit (runner, CLI and the defaults it reads, load generators with their node_modules) in /opt/tunekit-app.
  for (const d of ['app', 'bin', 'lib', 'roles', 'ansible', 'node_modules', 'test/fixtures/host', 'test/fixtures/faults', 'test/fixtures/runner', 'test/faults', 'package.json']) {
    nspawn.copyInto(host, path.join(ROOT, d), path.join('opt/tunekit-app', d));
  }
  await sh(host, [
    'useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin tunekit',
    'usermod -a -G tunekit www-data',
  ].join(' && '));

  // systemd cannot raise a limit above the hard limit it was given itself
  // without CAP_SYS_RESOURCE, which nspawn drops. Where the container's hard
  // limit is below the kit's 65536 (this sandbox: 20000), use values under it,
  // so what /proc shows is the unit's value and not a clamp.
  const hard = Number(await sh(host, "awk '/^Max open files/ {print $5}' /proc/1/limits"));
  const limits = hard >= 65536 ? [] : ['tunekit_app_limit_nofile=16384', 'tunekit_nginx_limit_nofile=12288'];
  if (limits.length) t.diagnostic(`container hard RLIMIT_NOFILE is ${hard} (< 65536): testing with ${limits.join(' ')}`);
  // The Ansible role installs app.json as root:<app group> 0640, like this.
  const installed = async (set) => {
    const v = install(host, [...limits, ...set]);
    await sh(host, `chown root:${v.tunekit_app_group} ${v.tunekit_app_config_path}`);
    return v;
  };

  // ---- the unit without socket activation -----------------------------------
  // The app is the hash app (test/fixtures/faults/hash-app.js), writing what it
  // saw under its RuntimeDirectory (a drop-in gives it the place).
  const vars = await installed(['tunekit_systemd_socket_activation=false', `tunekit_app_module=${HASH_APP}`]);
  const unit = `${vars.tunekit_app_name}.service`;
  const sock = vars.tunekit_socket_path;
  const seenDir = `${vars.tunekit_socket_dir}/seen`;
  fs.mkdirSync(path.join(host.root, `etc/systemd/system/${unit}.d`), { recursive: true });
  fs.writeFileSync(path.join(host.root, `etc/systemd/system/${unit}.d/faults.conf`), `[Service]\nEnvironment=FAULTS_SEEN_DIR=${seenDir}\n`);
  await sh(host, `systemctl daemon-reload && systemd-analyze verify ${unit} && systemctl start ${unit} && systemctl restart nginx`);
  const first = await waitServing(host, vars, 2);

  await t.test('the socket belongs to the app user and the shared group, 0660, in a 0750 directory', async () => {
    assert.equal(await sh(host, `stat -c '%U:%G %a %F' ${sock}`), 'tunekit:tunekit 660 socket');
    assert.equal(await sh(host, `stat -c '%U:%G %a' ${path.dirname(sock)}`), 'tunekit:tunekit 750');
    assert.equal(await sh(host, `ps -o user= -p ${first.main}`), 'tunekit');
    // nginx's user (in the group) may connect; a user outside it may not.
    assert.equal(await sh(host, `runuser -u www-data -- curl -s -o /dev/null -w '%{http_code}' --unix-socket ${sock} http://app/`), '200');
    const nobody = await host.ssh(`runuser -u nobody -- curl -s -o /dev/null --unix-socket ${sock} http://app/`);
    assert.notEqual(nobody.code, 0, 'a user outside the group cannot connect');
    assert.equal(await sh(host, 'curl -s -o /dev/null -w \'%{http_code}\' http://127.0.0.1/'), '200', 'nginx reaches the app');
  });

  await t.test('the hardened unit serves the runner\'s metrics on its loopback endpoint, a series set per worker', async () => {
    const url = `http://${vars.tunekit_metrics_listen.replace(/^tcp:/, '')}/metrics`;
    // Every worker process of the unit (the spare too, once it has booted) in one scrape.
    const text = await until(`every worker of ${unit} in ${url}`, async () => {
      const p = await appPids(host, unit);
      const body = await sh(host, `curl -s --fail ${url}`);
      return p.workers.every((pid) => new RegExp(`^tunekit_app_info\\{worker="[^"]+",pid="${pid}"`, 'm').test(body)) ? body : false;
    });
    assert.match(text, new RegExp(`^tunekit_app_info\\{worker="1",pid="\\d+",strategy="${vars.tunekit_app_strategy}",listen="unix:${sock}",`, 'm'));
    assert.match(text, /^tunekit_app_worker_restarts_total\{reason="crash"\} 0$/m, 'the primary\'s counters');
    assert.match(text, new RegExp(`^process_max_fds\\{worker="1",pid="\\d+"\\} ${vars.tunekit_app_limit_nofile}$`, 'm'), 'the unit\'s LimitNOFILE as the soft limit');
  });

  await t.test('/proc/<pid>/limits shows LimitNOFILE for the primary, every worker and nginx', async () => {
    const want = new RegExp(`^Max open files\\s+${vars.tunekit_app_limit_nofile}\\s+${vars.tunekit_app_limit_nofile}\\s+files`, 'm');
    for (const pid of [first.main, ...first.workers]) {
      assert.match(await sh(host, `cat /proc/${pid}/limits`), want, `pid ${pid}`);
    }
    const nginxMain = await sh(host, 'systemctl show -p MainPID --value nginx');
    assert.match(await sh(host, `cat /proc/${nginxMain}/limits`),
      new RegExp(`^Max open files\\s+${vars.tunekit_nginx_limit_nofile}\\s+${vars.tunekit_nginx_limit_nofile}`, 'm'));
  });

  await t.test('systemctl reload of the app (twice) and of nginx (twice) under GETs and POSTs of 0..64 KB: every worker rolled, 0 failed, every body whole and once', async (st) => {
    // The load runs in the container against its own loopback until the stop file appears (at most 120 s).
    const stopFile = '/run/tunekit-bodies.stop';
    const errorLogPath = vars.tunekit_nginx_error_log_path;
    await sh(host, `: > ${errorLogPath}`);
    const started = Date.now();
    const load = sh(host, `node /opt/tunekit-app/test/faults/bodies.js http://127.0.0.1/ 120 12 ${seenDir} ${stopFile}`, 180_000);
    let workers = first.workers;
    // The second app reload is `tunekit reload`, as an operator runs it: it finds
    // the unit from the runner's cgroup and runs systemctl reload.
    const reloadApp = async (n, { viaTunekit = false } = {}) => {
      if (viaTunekit) {
        const out = await sh(host, `node /opt/tunekit-app/bin/tunekit.js reload --app-config ${vars.tunekit_app_config_path}`);
        assert.match(out, new RegExp(`^tunekit reload: systemd unit ${unit.replace(/\./g, '\\.')} \\(main pid ${first.main}\\) reloaded: `));
      } else {
        await sh(host, `systemctl reload ${unit}`);
      }
      const rolled = await until(`every worker to be replaced (reload ${n})`, async () => {
        const p = await appPids(host, unit);
        return p.workers.length >= 2 && p.workers.every((w) => !workers.includes(w)) ? p : false;
      });
      assert.equal(rolled.main, first.main, 'reload keeps the primary');
      workers = rolled.workers;
    };
    // Each reload goes out once the load flows: 12 more requests (one a connection)
    // in the app's record than before, whatever the machine's speed.
    const seen = async () => Number(await sh(host, `cat ${seenDir}/*.log 2>/dev/null | wc -l`));
    const flowing = async (what) => {
      const from = await seen();
      await until(`12 more requests of the load to reach the app ${what}`, async () => (await seen()) >= from + 12);
    };
    try {
      await flowing('before the first reload');
      await reloadApp(1);
      await flowing('after app reload 1');
      await sh(host, 'systemctl reload nginx');
      await flowing('after nginx reload 1');
      await sh(host, 'systemctl reload nginx');
      await flowing('after nginx reload 2');
      await reloadApp(2, { viaTunekit: true });
      await flowing('after app reload 2');
    } finally {
      await sh(host, `touch ${stopFile}`);
    }
    const c = JSON.parse((await load).split('\n').pop());
    const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
    st.diagnostic(`${seconds} s: ${JSON.stringify(c)}`);
    const errorLog = await sh(host, `cat ${errorLogPath}`);
    bodies.assertWhole(c, 'systemctl reload', errorLog);
    assert.equal(await sh(host, `systemctl is-active ${unit}`), 'active');
    // `tunekit logs` reads the unit's journal: the runner's reload-done line is there.
    assert.match(await sh(host, `node /opt/tunekit-app/bin/tunekit.js logs -n 200 --app-config ${vars.tunekit_app_config_path}`), /"event":"reload-done"/);
    const { buffered, other } = bodies.errorLines(errorLog);
    assert.deepEqual(other, [], 'nginx logged nothing about the reloads');
    // tunekit doctor on the host, as an operator runs it after a deploy.
    const dr = await host.ssh(`node /opt/tunekit-app/bin/tunekit.js doctor --json --app-config ${vars.tunekit_app_config_path}`);
    assert.ok(dr.stdout.trim().startsWith('{'), `tunekit doctor printed no JSON (exit ${dr.code}):\n${dr.stdout}\n${dr.stderr}`);
    const found = JSON.parse(dr.stdout).findings;
    const fails = found.filter((f) => f.level === 'fail').map((f) => f.id);
    record('restart-bodies-systemd', {
      command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/e2e/host-systemd.test.js',
      restarts: '2 x systemctl reload of the app and 2 x systemctl reload nginx, on a booted systemd host (Debian 13 in systemd-nspawn, the kit\'s hardened unit)',
      connections: 12,
      seconds,
      ...bodies.figures(c),
      errorLogLevel: vars.tunekit_nginx_error_log_level,
      errorLogBuffered: buffered,
      errorLogOther: other.length,
      doctorFails: fails,
    });
  });

  await t.test('tunekit sysctl apply in the container sets per-netns keys and reports the global ones', async () => {
    const proc = (key) => sh(host, `cat /proc/sys/${key.replace(/\./g, '/')}`).then(Number);
    const desired = {
      'net.core.somaxconn': vars.tunekit_sysctl_net_core_somaxconn,
      'fs.file-max': vars.tunekit_sysctl_fs_file_max,
      'fs.nr_open': vars.tunekit_sysctl_fs_nr_open,
    };
    const before = {};
    for (const k of Object.keys(desired)) before[k] = await proc(k);
    const out = await sh(host, `node /opt/tunekit-app/bin/tunekit.js sysctl apply /etc/sysctl.d/${vars.tunekit_sysctl_file} --json`);
    const keys = Object.fromEntries(JSON.parse(out).keys.map((k) => [k.key, k]));
    // Which action is right depends on the value the container starts with (the
    // kernel's per-netns default for somaxconn, the host's fs.* values), read above:
    // below the kit's value it is raised, equal it is left, above it is kept.
    const expected = (k) => (before[k] < desired[k] ? 'raise' : before[k] === desired[k] ? 'same' : 'keep');
    // somaxconn is per network namespace: the container's own copy is writable.
    assert.equal(keys['net.core.somaxconn'].action, expected('net.core.somaxconn'));
    assert.equal(await proc('net.core.somaxconn'), Math.max(before['net.core.somaxconn'], desired['net.core.somaxconn']));
    // nspawn mounts /proc/sys read-only except net/: an fs.* raise cannot be
    // written here and is reported as not-settable (EROFS), never fatal.
    for (const k of ['fs.file-max', 'fs.nr_open']) {
      const want = expected(k) === 'raise' ? 'not-settable' : expected(k);
      assert.equal(keys[k].action, want, `${k} (live ${before[k]}, kit ${desired[k]}): ${JSON.stringify(keys[k])}`);
      if (want === 'not-settable') assert.equal(keys[k].error, 'EROFS');
      assert.equal(await proc(k), before[k], `${k} is unchanged`);
    }
    // What the apply step wrote is what the next boot applies: systemd-sysctl
    // accepts it in the container ("-" keys it cannot set, equal values skipped).
    await sh(host, `/usr/lib/systemd/systemd-sysctl /etc/sysctl.d/${vars.tunekit_sysctl_file}`);
  });

  // ---- where the app lives ----------------------------------------------------
  // Every place render accepts a module, with the directives it renders for it:
  // the unit starts the app from each (ProtectHome=yes hides /home and /root;
  // tunekit_app_read_only_paths opens one folder read-only through
  // ProtectHome=tmpfs + BindReadOnlyPaths=, even inside a 0700 home).
  await t.test('the unit starts the app from every place render accepts: /srv, /opt, and a folder of a 0700 home opened read-only', async (st) => {
    await sh(host, 'useradd --create-home --home-dir /home/me --shell /usr/sbin/nologin me && chmod 0700 /home/me');
    const places = [
      { module: '/srv/myapp/app.js', set: [], protectHome: 'yes' },
      { module: '/opt/myapp/server.js', set: [], protectHome: 'yes' },
      { module: '/home/me/myapp/dist/app.js', set: ['tunekit_app_read_only_paths=[/home/me/myapp]'], protectHome: 'tmpfs', bind: '/home/me/myapp' },
    ];
    for (const p of places) {
      // An app that says where it was loaded from, owned by the home's user
      // where there is one, readable by others as files copied there are.
      const owner = p.module.startsWith('/home/me/') ? 'me:me' : 'root:root';
      await sh(host, `mkdir -p ${path.dirname(p.module)} && printf '%s\\n' ${JSON.stringify("module.exports = (req, res) => res.end(JSON.stringify({ from: __filename }));")} > ${p.module} && chown -R ${owner} ${path.dirname(p.module)}`);
      const v = await installed(['tunekit_systemd_socket_activation=false', `tunekit_app_module=${p.module}`, ...p.set]);
      await sh(host, `systemctl daemon-reload && systemd-analyze verify ${unit} && systemctl restart ${unit}`);
      assert.equal(await sh(host, `systemctl show -p ProtectHome --value ${unit}`), p.protectHome, p.module);
      if (p.bind) assert.match(await sh(host, `systemctl show -p BindReadOnlyPaths --value ${unit}`), new RegExp(`^${p.bind}(:|$)`), p.module);
      const body = await until(`${unit} to answer from ${p.module}`, async () => {
        const r = await host.ssh(`curl -s --max-time 5 --unix-socket ${v.tunekit_socket_path} http://app/`);
        return r.code === 0 && r.stdout.includes('"from"') ? r.stdout : false;
      });
      assert.equal(JSON.parse(body).from, p.module);
      st.diagnostic(`${p.module}: ProtectHome=${p.protectHome}${p.bind ? ` BindReadOnlyPaths=${p.bind}` : ''}, served`);
    }
  });

  // ---- a crash storm under the unit -------------------------------------------
  // An app whose /crash route kills its worker (test/fixtures/runner/crash-route.js),
  // two crash requests a second beside a steady load of good ones, both through
  // nginx inside the container: the runner replaces each worker and never exits,
  // so systemd never restarts the unit and it ends active with the same main pid;
  // the journal has the error in full once.
  await t.test('a crash storm under the unit: the good requests answered, the unit active with the same main pid, 0 restarts, the error logged once', async (st) => {
    const cv = await installed(['tunekit_systemd_socket_activation=false', `tunekit_app_module=${CRASH_APP}`]);
    const since = await sh(host, 'date +%s');
    await sh(host, `systemctl daemon-reload && systemctl restart ${unit}`);
    const started = await waitServing(host, cv, 2);
    const journal = () => sh(host, `journalctl -u ${unit} -o cat --since @${since}`);
    await until('the runner to log "stable" (a worker stayed up: crashes from now on are crashes under traffic)', async () => /"event":"stable"/.test(await journal()));
    const load = startLoad(host, CRASH_STORM_S + 5, 4);
    // The storm's pace: two a second, each on a new connection, bounded in count.
    const storm = sh(host, `for i in $(seq 1 ${CRASH_STORM_S * 2}); do curl -s -o /dev/null -m 5 http://127.0.0.1/crash; sleep 0.5; done`, (CRASH_STORM_S + 120) * 1000);
    const [result] = await Promise.all([load, storm]);
    st.diagnostic(`good load beside ${CRASH_STORM_S * 2} crash requests: ${JSON.stringify(result)}`);
    assert.ok(result.ok2xx >= 0.99 * result.requests, `${result.ok2xx} of ${result.requests} good requests answered 2xx`);
    assert.equal(await sh(host, `systemctl is-active ${unit}`), 'active');
    assert.equal(await sh(host, `systemctl show -p NRestarts --value ${unit}`), '0', 'systemd restarted the unit');
    assert.equal(Number(await sh(host, `systemctl show -p MainPID --value ${unit}`)), started.main, 'the runner was replaced');
    const log = await journal();
    const crashLines = log.split('\n').filter((l) => /"event":"worker-crash"/.test(l));
    assert.equal(crashLines.length, 1, `the error logged in full ${crashLines.length} times:\n${crashLines.join('\n')}`);
    assert.match(crashLines[0], new RegExp(CRASH_MESSAGE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.equal(await sh(host, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/`), '200');
  });

  // ---- socket activation ----------------------------------------------------
  await sh(host, `systemctl stop ${unit}`);
  // Leave a stale socket file at the path, as a crashed process would: the
  // socket unit must replace it, not fail with EADDRINUSE.
  await sh(host, `mkdir -p ${path.dirname(sock)} && python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' ${sock} && test -S ${sock}`);
  // With the held queue on: the socket unit creates the directory where the
  // runner tells nginx what share to refuse, and the sandboxed service may write it.
  const sa = await installed(['tunekit_systemd_socket_activation=true', 'tunekit_app_sustained_after_s=3']);
  const socketUnit = `${sa.tunekit_app_name}.socket`;
  await sh(host, `systemctl daemon-reload && systemd-analyze verify ${unit} ${socketUnit} && systemctl start ${socketUnit} && systemctl start ${unit}`);
  const before = await waitServing(host, sa, 2);
  const inode = await sh(host, `stat -c %i ${sock}`);

  await t.test('the .socket unit creates the socket tunekit:tunekit 0660 in a root:tunekit 0750 directory', async () => {
    assert.equal(await sh(host, `stat -c '%U:%G %a %F' ${sock}`), 'tunekit:tunekit 660 socket');
    assert.equal(await sh(host, `stat -c '%U:%G %a' ${path.dirname(sock)}`), 'root:tunekit 750');
    assert.equal(await sh(host, `systemctl show -p Triggers --value ${socketUnit}`), unit);
  });

  await t.test('the shed directory: the app user\'s, 0750, in the sandboxed service\'s ReadWritePaths; nginx tests it on every request', async () => {
    const shedDir = sa.tunekit_nginx_shed_dir;
    assert.equal(await sh(host, `stat -c '%U:%G %a' ${shedDir}`), 'tunekit:tunekit 750');
    assert.match(await sh(host, `systemctl show -p ReadWritePaths --value ${unit}`), new RegExp(`(^| )-?${shedDir}( |$)`));
    assert.doesNotMatch(await sh(host, `journalctl -u ${unit} -o cat --no-pager`), /"event":"shed-dir"/, 'the runner opened it');
    // nginx with the site.conf of this install (the runner's was enough so far).
    await sh(host, 'nginx -t -q && systemctl restart nginx');
    assert.match(await sh(host, `cat ${sa.tunekit_nginx_include_dir}/site.conf`), new RegExp(`if \\(-f "${shedDir}/\\$tunekit_shed_bucket"\\)`));
    // A share file the runner did not write: nginx refuses the requests whose id
    // ends in its name (1 in 256), so with all 256 every request, at once, 503.
    await sh(host, `cd ${shedDir} && for i in $(seq 0 255); do touch $(printf %02x $i); done`);
    const refused = await sh(host, 'curl -s -D - -o /dev/null --max-time 30 http://127.0.0.1/');
    assert.match(refused, /^HTTP\/1\.1 503 /, refused);
    assert.match(refused, new RegExp(`^Retry-After: ${sa.tunekit_nginx_overload_retry_after_s}\\s*$`, 'mi'));
    await sh(host, `rm -f ${shedDir}/[0-9a-f][0-9a-f]`);
    assert.equal(await sh(host, `curl -s -o /dev/null -w '%{http_code}' --max-time 30 http://127.0.0.1/`), '200');
  });

  await t.test('systemctl restart under load loses no connection attempt', async (st) => {
    const logged = async () => Number(await sh(host, `wc -l < ${sa.tunekit_nginx_access_log_path}`));
    const from = await logged();
    const load = startLoad(host);
    // The restart goes out once the load flows: 100 more requests in nginx's access
    // log (buffered, flushed every tunekit_nginx_access_log_flush), whatever the machine's speed.
    await until('100 requests of the load in nginx\'s access log', async () => (await logged()) >= from + 100);
    await sh(host, `systemctl restart ${unit}`);
    const after = await waitServing(host, sa, 2);
    assert.notEqual(after.main, before.main, 'a new primary');
    assertNoLoss(st, 'restart with socket activation', await load);
    assert.equal(await sh(host, `stat -c %i ${sock}`), inode, 'the socket file survived the restart');
  });

  await t.test('stopping the service keeps the socket; the next connection starts it again', async () => {
    await sh(host, `systemctl stop ${unit}`);
    assert.equal(await sh(host, `stat -c %i ${sock}`), inode);
    assert.equal(await sh(host, `curl -s -o /dev/null -w '%{http_code}' --max-time 30 --unix-socket ${sock} http://app/`), '200');
    assert.equal(await sh(host, `systemctl is-active ${unit}`), 'active');
    // `tunekit logs` reads the unit's journal: the runner's reload-done line is there.
    assert.match(await sh(host, `node /opt/tunekit-app/bin/tunekit.js logs -n 5000 --app-config ${vars.tunekit_app_config_path}`), /"event":"reload-done"/);
  });
});
