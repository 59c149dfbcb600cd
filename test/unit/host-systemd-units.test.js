'use strict';
// The rendered systemd units: `systemd-analyze verify` loads them without a
// single warning (verify exits 0 on unknown keys, so stderr must be empty), and
// `systemd-analyze security --offline=true` rates the app unit 2.0 or lower.
// Rendered through lib/render.js from the manifest, as `tunekit render` does.
// Note: verify does not resolve User=/Group= (the tunekit user need not exist
// here); the booted-container test (test/e2e/host-systemd.test.js) starts them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const { render } = require('../../lib/render');

const ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => fs.existsSync(p));
const skip = ANALYZE ? false : 'systemd-analyze is not installed (apt-get install systemd)';

function renderUnits(t, set) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-units-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const vars = config.resolve({ set });
  render(vars, out, { layers: ['systemd'] });
  return { vars, unitDir: path.join(out, 'etc/systemd/system') };
}

function analyze(args, unitDir) {
  // SYSTEMD_UNIT_PATH: units and drop-ins (nginx.service.d/) are looked up in
  // the render tree first, then in the system's directories (trailing ":").
  const r = spawnSync(ANALYZE, args, {
    encoding: 'utf8',
    cwd: unitDir,
    env: { ...process.env, SYSTEMD_UNIT_PATH: `${unitDir}:`, SYSTEMD_LOG_COLOR: '0' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr.trim() };
}

function exposure(unitFile, unitDir) {
  const r = analyze(['security', '--offline=true', '--no-pager', unitFile], unitDir);
  const m = /Overall exposure level for \S+: (\d+\.\d+)/.exec(r.stdout);
  assert.ok(m, `no exposure figure in:\n${r.stdout}\n${r.stderr}`);
  return Number(m[1]);
}

for (const activation of [false, true]) {
  const label = activation ? 'with socket activation' : 'without socket activation';

  test(`every rendered unit passes systemd-analyze verify without a warning (${label})`, { skip }, (t) => {
    const { vars, unitDir } = renderUnits(t, [`tunekit_systemd_socket_activation=${activation}`]);
    const name = vars.tunekit_app_name;
    const units = [`${name}.service`];
    if (activation) units.push(`${name}.socket`);
    assert.deepEqual(fs.readdirSync(unitDir).sort(), [...units, 'nginx.service.d'].sort());
    const r = analyze(['verify', ...units.map((u) => path.join(unitDir, u))], unitDir);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '', 'no warnings (unknown keys, bad values) from verify');
  });

  test(`the app unit's exposure is 2.0 or lower (${label})`, { skip }, (t) => {
    const { vars, unitDir } = renderUnits(t, [`tunekit_systemd_socket_activation=${activation}`]);
    const score = exposure(path.join(unitDir, `${vars.tunekit_app_name}.service`), unitDir);
    t.diagnostic(`systemd-analyze security --offline=true: exposure ${score}`);
    assert.ok(score <= 2.0, `exposure ${score} is above 2.0`);
  });
}

// An app in a home directory (tunekit_app_read_only_paths): the homes become an
// empty read-only tmpfs with the app's folder bound into it. verify loads both
// directives without a word, and systemd-analyze security rates the unit as the
// default one (252: 1.2; ProtectHome=tmpfs counts 0.1 of the home item, yes 0).
test('an app in a home: ProtectHome=tmpfs and BindReadOnlyPaths= pass verify, exposure 2.0 or lower', { skip }, (t) => {
  const { vars, unitDir } = renderUnits(t, ['tunekit_app_module=/home/me/myapp/app.js', 'tunekit_app_read_only_paths=[/home/me/myapp, /home/me/lib]']);
  const file = path.join(unitDir, `${vars.tunekit_app_name}.service`);
  const unit = fs.readFileSync(file, 'utf8');
  assert.match(unit, /^ProtectHome=tmpfs\nBindReadOnlyPaths=\/home\/me\/myapp \/home\/me\/lib$/m);
  const r = analyze(['verify', file], unitDir);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '', 'no warnings from verify');
  const score = exposure(file, unitDir);
  t.diagnostic(`systemd-analyze security --offline=true: exposure ${score}`);
  assert.ok(score <= 2.0, `exposure ${score} is above 2.0`);
  const home = analyze(['security', '--offline=true', '--no-pager', file], unitDir).stdout.split('\n').find((l) => /ProtectHome=/.test(l));
  assert.match(home, /fake empty home directories/, 'systemd reads it as empty homes, not read-only ones');
});

test('the nginx drop-in loads onto nginx.service and sets LimitNOFILE', { skip }, (t) => {
  const { vars, unitDir } = renderUnits(t, []);
  const dropIn = fs.readFileSync(path.join(unitDir, 'nginx.service.d/tunekit.conf'), 'utf8');
  assert.match(dropIn, new RegExp(`^\\[Service\\]\\nLimitNOFILE=${vars.tunekit_nginx_limit_nofile}$`, 'm'));
  // Debian's nginx.service, copied next to the drop-in, so verify loads both.
  const pkgUnit = ['/lib/systemd/system/nginx.service', '/usr/lib/systemd/system/nginx.service'].find((p) => fs.existsSync(p));
  if (!pkgUnit) {
    t.skip('no nginx.service on this machine (apt-get install nginx) to load the drop-in onto');
    return;
  }
  fs.copyFileSync(pkgUnit, path.join(unitDir, 'nginx.service'));
  // A key systemd does not know would show up as a warning here.
  const r = analyze(['verify', path.join(unitDir, 'nginx.service')], unitDir);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /tunekit\.conf/, 'no warning about the drop-in');
});

test('the app unit keeps the socket directory for nginx and matches stop timeouts to the drain', (t) => {
  const { vars, unitDir } = renderUnits(t, []);
  const unit = fs.readFileSync(path.join(unitDir, `${vars.tunekit_app_name}.service`), 'utf8');
  const directive = (k) => unit.split('\n').filter((l) => l.startsWith(`${k}=`)).map((l) => l.slice(k.length + 1));
  assert.deepEqual(directive('RuntimeDirectory'), [vars.tunekit_socket_dir.replace(/^\/run\//, '')]);
  assert.deepEqual(directive('RuntimeDirectoryMode'), ['0750']);
  assert.deepEqual(directive('RuntimeDirectoryPreserve'), ['restart']);
  assert.deepEqual(directive('Group'), [vars.tunekit_socket_group]);
  assert.deepEqual(directive('LimitNOFILE'), [String(vars.tunekit_app_limit_nofile)]);
  assert.ok(Number(directive('TimeoutStopSec')[0]) > vars.tunekit_app_drain_timeout_s, 'systemd waits longer than the drain');
  assert.deepEqual(directive('ExecReload'), ['/bin/kill -HUP $MAINPID']);
  assert.deepEqual(directive('MemoryDenyWriteExecute'), [], 'V8 needs W+X memory');
  assert.match(unit, /^# No MemoryDenyWriteExecute=: V8/m, 'and the unit says why');

  const sa = renderUnits(t, ['tunekit_systemd_socket_activation=true']);
  const saUnit = fs.readFileSync(path.join(sa.unitDir, `${vars.tunekit_app_name}.service`), 'utf8');
  assert.doesNotMatch(saUnit, /^RuntimeDirectory=/m, 'stopping the service must not delete the socket unit\'s directory');
  assert.match(saUnit, new RegExp(`^Requires=${vars.tunekit_app_name}\\.socket$`, 'm'));
  const socket = fs.readFileSync(path.join(sa.unitDir, `${vars.tunekit_app_name}.socket`), 'utf8');
  assert.match(socket, new RegExp(`^ListenStream=${vars.tunekit_socket_path}$`, 'm'));
  assert.match(socket, /^SocketMode=0660$/m);
  assert.match(socket, new RegExp(`^SocketGroup=${vars.tunekit_socket_group}$`, 'm'));
  assert.match(socket, new RegExp(`^Backlog=${vars.tunekit_app_backlog}$`, 'm'));
});

/**
 * The delay before each automatic restart as systemd computes it
 * (service_restart_usec_next in src/core/service.c): RestartSec for the first;
 * with RestartSteps=n and RestartMaxDelaySec=max, restart k waits
 * RestartSec x (max / RestartSec)^((k - 1) / n), and max from k = n + 1 on.
 */
function restartDelays(sec, steps, max, count) {
  return Array.from({ length: count }, (_, i) => (steps === 0 || sec === 0 || max <= sec || i === 0 ? sec
    : i >= steps ? max : sec * (max / sec) ** (i / steps)));
}

test('the restart policy: a fixed delay for a systemd before 254 or not known; from 254 the stepped delays, which never start more than StartLimitBurst times within StartLimitIntervalSec', (t) => {
  const directive = (unit, k) => unit.split('\n').filter((l) => l.startsWith(`${k}=`)).map((l) => l.slice(k.length + 1));
  const unitFor = (version) => {
    const { vars, unitDir } = renderUnits(t, [`tunekit_systemd_version=${version}`]);
    return { vars, unit: fs.readFileSync(path.join(unitDir, `${vars.tunekit_app_name}.service`), 'utf8') };
  };
  for (const version of [0, 247, 252, 253]) {
    const { vars, unit } = unitFor(version);
    assert.deepEqual(directive(unit, 'Restart'), ['on-failure']);
    assert.deepEqual(directive(unit, 'RestartSec'), [String(vars.tunekit_systemd_restart_sec)]);
    assert.deepEqual([...directive(unit, 'RestartSteps'), ...directive(unit, 'RestartMaxDelaySec')], [], `systemd ${version} has no RestartSteps=`);
    assert.match(unit, /a broken deploy ends failed after StartLimitBurst starts/);
  }
  for (const version of [254, 257]) {
    const { vars, unit } = unitFor(version);
    assert.deepEqual(directive(unit, 'RestartSteps'), [String(vars.tunekit_systemd_restart_steps)]);
    assert.deepEqual(directive(unit, 'RestartMaxDelaySec'), [String(vars.tunekit_systemd_restart_max_delay_s)]);
    // A runner that exits at once on every start (the worst case): the start after the
    // burst comes only once the start limit's window has passed.
    const burst = Number(directive(unit, 'StartLimitBurst')[0]);
    const interval = Number(directive(unit, 'StartLimitIntervalSec')[0]);
    const delays = restartDelays(Number(directive(unit, 'RestartSec')[0]), Number(directive(unit, 'RestartSteps')[0]),
      Number(directive(unit, 'RestartMaxDelaySec')[0]), burst);
    const nextStart = delays.reduce((a, b) => a + b, 0);
    t.diagnostic(`systemd ${version}: restarts after ${delays.map((d) => d.toFixed(1)).join(', ')} s; start ${burst + 1} at ${nextStart.toFixed(1)} s, the window ${interval} s`);
    assert.ok(nextStart > interval, `start ${burst + 1} at ${nextStart.toFixed(1)} s falls inside StartLimitIntervalSec=${interval}: a broken deploy would end failed`);
    assert.match(unit, /a broken deploy is\n# retried for ever/);
  }
});

test('the PM2 drop-in loads onto the unit `pm2 startup systemd` writes, without a warning', { skip }, (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-pm2unit-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const vars = config.resolve({ set: ['tunekit_process_manager=pm2'] });
  render(vars, out, { layers: ['systemd', 'pm2'] });
  const unitDir = path.join(out, 'etc/systemd/system');
  const name = `pm2-${vars.tunekit_app_user}.service`;
  assert.ok(fs.existsSync(path.join(unitDir, `${name}.d/tunekit.conf`)));
  assert.ok(!fs.existsSync(path.join(unitDir, `${vars.tunekit_app_name}.service`)), 'no runner unit under PM2');
  // PM2's own template, filled in the way `pm2 startup systemd` fills it.
  const pm2Bin = require.resolve('pm2/bin/pm2');
  const tpl = fs.readFileSync(path.join(path.dirname(pm2Bin), '../lib/templates/init-scripts/systemd.tpl'), 'utf8');
  fs.writeFileSync(path.join(unitDir, name), tpl
    .replace(/%USER%/g, vars.tunekit_app_user)
    .replace(/%HOME_PATH%/g, '/var/lib/tunekit/.pm2')
    .replace(/%NODE_PATH%/g, path.dirname(process.execPath))
    .replace(/%PM2_PATH%/g, pm2Bin));
  const r = analyze(['verify', path.join(unitDir, name)], unitDir);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '', 'no warnings about the unit or the drop-in');
  const dropIn = fs.readFileSync(path.join(unitDir, `${name}.d/tunekit.conf`), 'utf8');
  assert.match(dropIn, new RegExp(`^LimitNOFILE=${vars.tunekit_app_limit_nofile}$`, 'm'));
  assert.match(dropIn, /^UMask=0117$/m);
  assert.match(dropIn, new RegExp(`^Group=${vars.tunekit_socket_group}$`, 'm'));
});

test('the ecosystem file is valid JS describing PM2 cluster mode on the rendered settings', (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-eco-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const vars = config.resolve({ set: ['tunekit_process_manager=pm2', 'tunekit_app_workers=3'] });
  render(vars, out, { layers: ['pm2'] });
  const file = path.join(out, vars.tunekit_app_install_dir, 'ecosystem.config.js');
  // Loaded the way the PM2 CLI loads it; argv has no "start", so no checks run.
  const { apps } = require(file);
  assert.equal(apps.length, 1);
  const [app] = apps;
  assert.equal(app.name, vars.tunekit_app_name);
  assert.equal(app.exec_mode, 'cluster');
  assert.equal(app.instances, 3);
  assert.equal(app.script, path.join(vars.tunekit_app_install_dir, 'app/worker.js'));
  assert.equal(app.env.TUNEKIT_CONFIG, vars.tunekit_app_config_path);
  assert.equal(app.wait_ready, true);
  assert.ok(app.kill_timeout > vars.tunekit_app_drain_timeout_s * 1000, 'PM2 kills only after the drain');
  const zero = config.resolve({ set: ['tunekit_process_manager=pm2', 'tunekit_app_workers=0'] });
  const out0 = path.join(out, 'zero');
  render(zero, out0, { layers: ['pm2'] });
  assert.equal(require(path.join(out0, zero.tunekit_app_install_dir, 'ecosystem.config.js')).apps[0].instances, 'max');
});

// tunekit_metrics_exporters: the sampler's unit and the drop-ins on Debian's
// exporter units. A package unit found on this machine is copied next to its
// drop-in so verify loads both; one not installed here is skipped by name.
const PKG_UNITS = ['prometheus-nginx-exporter', 'prometheus-node-exporter', 'mtail'];

test('the metrics units pass systemd-analyze verify and each drop-in replaces ExecStart with the listen address', { skip }, (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-host-metrics-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));
  const vars = config.resolve({ set: ['tunekit_metrics_exporters=true', 'tunekit_metrics_exporters_address=::1', 'tunekit_metrics_mtail_port=13903'] });
  render(vars, out, { layers: ['metrics'] });
  const unitDir = path.join(out, 'etc/systemd/system');
  const sampler = `${vars.tunekit_app_name}-queue-sampler.service`;
  assert.deepEqual(fs.readdirSync(unitDir).sort(), [...PKG_UNITS.map((u) => `${u}.service.d`), sampler].sort());
  const units = [path.join(unitDir, sampler)];
  const expected = {
    'prometheus-nginx-exporter': `--web.listen-address=[::1]:${vars.tunekit_metrics_nginx_exporter_port} `,
    'prometheus-node-exporter': `--web.listen-address=[::1]:${vars.tunekit_metrics_node_exporter_port} `,
    mtail: '--address ::1 --port 13903 ',
  };
  for (const name of PKG_UNITS) {
    const dropIn = fs.readFileSync(path.join(unitDir, `${name}.service.d/tunekit.conf`), 'utf8');
    const exec = dropIn.split('\n').filter((l) => l.startsWith('ExecStart='));
    assert.equal(exec[0], 'ExecStart=', `${name}: the package's ExecStart is cleared first`);
    assert.equal(exec.length, 2);
    assert.ok(exec[1].includes(expected[name]), `${name}: ${exec[1]}`);
    const pkgUnit = [`/lib/systemd/system/${name}.service`, `/usr/lib/systemd/system/${name}.service`].find((p) => fs.existsSync(p));
    if (!pkgUnit) {
      t.diagnostic(`${name}.service is not installed here (apt-get install ${name}): its drop-in is not loaded`);
      continue;
    }
    fs.copyFileSync(pkgUnit, path.join(unitDir, `${name}.service`));
    units.push(path.join(unitDir, `${name}.service`));
  }
  const r = analyze(['verify', ...units], unitDir);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '', 'no warnings (unknown keys, bad values) from verify');
  t.diagnostic(`systemd-analyze security --offline=true: sampler exposure ${exposure(path.join(unitDir, sampler), unitDir)}`);
  const unit = fs.readFileSync(path.join(unitDir, sampler), 'utf8');
  // It writes the textfile directory; nginx -T (doctor's reader) opens nginx's pid file and logs.
  assert.match(unit, new RegExp(`^ReadWritePaths=${vars.tunekit_metrics_textfile_dir} /run /var/log/nginx$`, 'm'));
  assert.match(unit, /^CapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_NET_BIND_SERVICE$/m);
});
