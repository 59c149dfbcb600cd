'use strict';
// The kit on the nginx and Node versions operators run, using the real binaries
// of each Debian release (its cached rootfs, chrooted in a private mount
// namespace; test/lib/nspawn.js runInRootfs):
// - every render (uds, tcp, per-worker, stock) for each release's own nginx
//   passes that nginx's `nginx -t` (1.18 on bullseye, as Ubuntu 22.04; 1.22 on
//   bookworm; 1.26 on trixie; the newest on sid); stock's no-pool is `keepalive 0;`
//   on sid (1.29.7+ pools a block by default) and no line before (0 is refused there);
// - the TLS render offers the key-exchange groups each release's OpenSSL has:
//   X25519MLKEM768 first from OpenSSL 3.5 (trixie, sid), where a client of the
//   same release negotiates it, and X25519 first before (bullseye, bookworm);
// - a render for an nginx below the floor is refused, writing nothing;
// - on Node 12 (bullseye, as Ubuntu 22.04) the CLI and the runner print one line
//   and exit 1; on bookworm's Node 18 and sid's newest Node the runner serves.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT, compareVersions } = require('../../lib/template');
const { MIN_NODE } = require('../../app/node-version');
const { opensslOf } = require('../../lib/nginx');
const { freePorts } = require('../../lib/proc');
const { ensureRootfsAll, runInRootfs } = require('../lib/nspawn');

const SUITES = ['bullseye', 'bookworm', 'trixie', 'sid'];
const CLI = path.join(ROOT, 'bin/tunekit.js');
const profile = (p) => path.join(ROOT, 'ansible/profiles', p);
const RENDERS = [
  { name: 'uds (default)', varsFiles: [], set: [] },
  { name: 'tcp', varsFiles: [], set: ['tunekit_upstream_kind=tcp'] },
  { name: 'per-worker', varsFiles: [], set: ['tunekit_upstream_kind=per-worker', 'tunekit_app_workers=2'] },
  { name: 'stock', varsFiles: [profile('stock.yml')], set: [] },
];
const { features } = config.loadDefaults().tunekit_nginx_versions;
const { mlkem_hybrid: mlkem } = config.loadDefaults().tunekit_openssl_versions.features;
const versions = {}; // suite -> { nginx, node, openssl }

function tmpdir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test.before(async () => {
  await ensureRootfsAll(SUITES);
  await Promise.all(SUITES.map(async (suite) => {
    const r = await runInRootfs(suite, 'nginx -V 2>&1; node --version');
    assert.equal(r.code, 0, `${suite}: ${r.stderr}`);
    versions[suite] = {
      nginx: /nginx\/(\d+\.\d+\.\d+)/.exec(r.stdout)[1],
      node: /v(\d+\.\d+\.\d+)/.exec(r.stdout)[1],
      openssl: opensslOf(r.stdout),
    };
  }));
  process.stderr.write(`versions: ${JSON.stringify(versions)}\n`);
});

for (const suite of SUITES) {
  test(`${suite}: its own nginx accepts every render made for its version`, async (t) => {
    const { nginx } = versions[suite];
    for (const r of RENDERS) {
      const dir = tmpdir(t, `tunekit-versions-${suite}-`);
      const vars = config.resolve({ varsFiles: r.varsFiles, set: [...r.set, `tunekit_nginx_version=${nginx}`] });
      renderer.render(vars, dir, { prefix: true });
      const upstream = path.join(dir, 'etc/nginx/tunekit/upstream.conf');
      if (fs.existsSync(upstream)) {
        // keepalive_time is rendered exactly when this nginx has it.
        const has = compareVersions(nginx, features.keepalive_time.since) >= 0;
        assert.equal(/^\s*keepalive_time /m.test(fs.readFileSync(upstream, 'utf8')), has,
          `${suite} ${r.name}: keepalive_time ${has ? 'present' : 'left out'} for nginx ${nginx}`);
        // No pool (stock: tunekit_nginx_upstream_keepalive 0) is `keepalive 0;` where a block
        // pools by default (1.29.7+), and no keepalive line before, where nginx refuses 0.
        if (vars.tunekit_nginx_upstream_keepalive === 0) {
          const pooledByDefault = compareVersions(nginx, features.upstream_keepalive_default.since) >= 0;
          assert.equal(/^\s*keepalive 0;$/m.test(fs.readFileSync(upstream, 'utf8')), pooledByDefault,
            `${suite} ${r.name}: keepalive 0 ${pooledByDefault ? 'written' : 'left out'} for nginx ${nginx}`);
        }
      }
      const check = await runInRootfs(suite, `nginx -t -c ${dir}/etc/nginx/nginx.conf`, { binds: { [dir]: dir } });
      assert.equal(check.code, 0, `${suite} nginx ${nginx}, ${r.name}: nginx -t failed:\n${check.stderr}`);
      assert.match(check.stderr, /test is successful/);
    }
  });
}

for (const suite of SUITES) {
  test(`${suite}: the TLS render offers the key-exchange groups its OpenSSL has, and its own client negotiates the first`, async (t) => {
    const { nginx, openssl } = versions[suite];
    const hybrid = compareVersions(openssl, mlkem.since) >= 0;
    const dir = tmpdir(t, `tunekit-groups-${suite}-`);
    const [port, tlsPort, statusPort] = await freePorts(3);
    const vars = config.resolve({ set: [`tunekit_nginx_version=${nginx}`, `tunekit_nginx_openssl_version=${openssl}`,
      'tunekit_nginx_tls=true', 'tunekit_nginx_listen_address=127.0.0.1', `tunekit_nginx_listen_port=${port}`, `tunekit_nginx_tls_port=${tlsPort}`,
      `tunekit_nginx_status_port=${statusPort}`] });
    renderer.render(vars, dir, { prefix: true });
    const curve = /^ssl_ecdh_curve (.+);$/m.exec(fs.readFileSync(path.join(dir, 'etc/nginx/tunekit/tls.conf'), 'utf8'));
    assert.equal(curve && curve[1], `${hybrid ? 'X25519MLKEM768:' : ''}X25519:prime256v1:secp384r1`, `${suite}: OpenSSL ${openssl}`);
    // nginx of that release serves it on loopback; that release's openssl
    // s_client, with its default groups, reports the group the server chose.
    const conf = `${dir}/etc/nginx/nginx.conf`;
    const script = [
      `nginx -c ${conf} || exit 3`,
      `echo | openssl s_client -connect 127.0.0.1:${tlsPort} -brief 2>&1 | grep -iE 'negotiated.*group|temp key'`,
      `nginx -c ${conf} -s quit`,
    ].join('\n');
    const r = await runInRootfs(suite, script, { binds: { [dir]: dir }, timeoutMs: 60000 });
    assert.equal(r.code, 0, `${suite} nginx ${nginx} / OpenSSL ${openssl}: ${r.stdout}\n${r.stderr}`);
    // OpenSSL 3.5 names the negotiated group; older ones the server's temporary key.
    assert.match(r.stdout, hybrid ? /Negotiated TLS1\.3 group: X25519MLKEM768/ : /(Server|Peer) Temp Key: X25519\b/,
      `${suite} (OpenSSL ${openssl}) negotiated:\n${r.stdout}`);
  });
}

test('trixie and sid carry OpenSSL 3.5 or later, bullseye and bookworm older: both branches of the groups are exercised', () => {
  for (const s of ['trixie', 'sid']) assert.ok(compareVersions(versions[s].openssl, mlkem.since) >= 0, `${s} OpenSSL ${versions[s].openssl}`);
  for (const s of ['bullseye', 'bookworm']) assert.ok(compareVersions(versions[s].openssl, mlkem.since) < 0, `${s} OpenSSL ${versions[s].openssl}`);
});

test('bullseye carries an nginx below 1.19.10, so the left-out branch is exercised', () => {
  assert.ok(compareVersions(versions.bullseye.nginx, features.keepalive_time.since) < 0, `bullseye nginx ${versions.bullseye.nginx}`);
});

test('a render for an nginx below the floor is refused with the version and the floor, and writes nothing', (t) => {
  const out = path.join(tmpdir(t, 'tunekit-versions-floor-'), 'tree');
  const r = spawnSync(process.execPath, [CLI, 'render', '--out', out, '--nginx-version', '1.16.1'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  const floor = config.loadDefaults().tunekit_nginx_versions.floor;
  assert.match(r.stderr, new RegExp(`tunekit_nginx_version=1\\.16\\.1 is below the kit's floor, nginx ${floor.replace(/\./g, '\\.')}`));
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  assert.equal(fs.existsSync(out), false);
});

test("Node 12 (bullseye): the CLI and the runner print one line naming the version and the minimum, exit 1", async () => {
  assert.ok(compareVersions(versions.bullseye.node, MIN_NODE) < 0, `bullseye Node ${versions.bullseye.node}`);
  for (const [program, argv] of [['tunekit', '/tmp/kit/bin/tunekit.js run'], ['tunekit-app', '/tmp/kit/app/cluster.js --config /tmp/none.json']]) {
    const r = await runInRootfs('bullseye', `node ${argv}`, { binds: { [ROOT]: '/tmp/kit' } });
    assert.equal(r.code, 1, `${program}: exit status (stderr: ${r.stderr})`);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr,
      `${program}: Node ${versions.bullseye.node} is too old; tunekit needs Node ${MIN_NODE} or newer ` +
      '(Debian 12 and Ubuntu 24.04 ship one; or install a newer Node and run it instead)\n');
  }
});

for (const suite of ['bookworm', 'sid']) {
  test(`${suite}'s Node: the runner starts two workers on a UDS and both serve (round-robin hands out connections in turn)`, async () => {
    assert.ok(compareVersions(versions[suite].node, MIN_NODE) >= 0);
    // Inside the private namespace: start the runner, wait for its socket, ask
    // it until both workers have answered (bounded), stop it with SIGTERM.
    const script = [
      'mkdir -p /tmp/s',
      'node /tmp/kit/bin/tunekit.js run --listen unix:/tmp/s/app.sock --workers 2 --strategy round-robin --socket-group root > /tmp/s/log 2>&1 &',
      'pid=$!',
      'i=0; while [ ! -S /tmp/s/app.sock ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done',
      'for n in $(seq 1 40); do curl -s --max-time 2 --unix-socket /tmp/s/app.sock http://localhost/; echo; done',
      'kill -TERM $pid; wait $pid; echo "exit=$?"',
      'cat /tmp/s/log >&2',
    ].join('\n');
    const r = await runInRootfs(suite, script, { binds: { [ROOT]: '/tmp/kit' }, timeoutMs: 90000 });
    const bodies = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    assert.equal(bodies.length, 40, `40 answers on Node ${versions[suite].node}; runner log:\n${r.stderr}`);
    assert.ok(bodies.every((b) => b.ok === true));
    assert.equal(new Set(bodies.map((b) => b.pid)).size, 2, 'both workers served');
    assert.match(r.stdout, /exit=0/, `a clean drain on SIGTERM; log:\n${r.stderr}`);
  });
}
