'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nginxconf = require('../../lib/nginxconf');
const doctor = require('../../lib/doctor');

const DUMP = `nginx: the configuration file /x/nginx.conf syntax is ok
# configuration file /x/nginx.conf:
user www-data;
worker_rlimit_nofile 1000;
events { worker_connections 4096; }
http {
    include /x/conf.d/*.conf;
}

# configuration file /x/conf.d/app.conf:
map $http_upgrade $conn { default close; "~." upgrade; }
upstream app {
    server unix:/run/app/app.sock;   # the app
    keepalive 32;
    keepalive_timeout 75s;
}
server {
    listen 127.0.0.1:8080 backlog=8192 reuseport;
    location / {
        proxy_pass http://app;
        proxy_set_header Host "$host";
    }
}
`;

test('nginx -T output is parsed with includes expanded', () => {
  const d = doctor.describeNginx(nginxconf.parseDump(DUMP));
  assert.equal(d.user, 'www-data');
  assert.equal(d.workerConnections, 4096);
  assert.equal(d.workerRlimitNofile, 1000);
  assert.deepEqual(d.upstreams, [{ name: 'app', servers: ['unix:/run/app/app.sock'], keepalive: 32, keepaliveByDefault: false, keepaliveTimeoutS: 75,
    keepaliveTimeoutAt: 'keepalive_timeout 75s at /x/conf.d/app.conf:5' }]);
  // Each proxied location with its line and the address it reaches (its upstream block's first server).
  assert.deepEqual(d.proxies, [{ location: '/', at: '/x/conf.d/app.conf:9', proxyPass: 'http://app', target: 'unix:/run/app/app.sock', httpVersion: '1.0', connectionHeader: null }]);
  assert.deepEqual(d.listens, [{ address: '127.0.0.1:8080', backlog: 8192, quic: false }]);
});

test("a location's target: proxy_pass's own address when it names no upstream block (TCP, or nginx's unix: form)", () => {
  const { appTarget } = require('../../lib/live/nginx');
  assert.equal(appTarget('http://127.0.0.1:3000/api/'), '127.0.0.1:3000');
  assert.equal(appTarget('http://unix:/run/app/app.sock:/api/'), 'unix:/run/app/app.sock');
  assert.equal(appTarget('http://[::1]:3000'), '[::1]:3000');
});

test('nginx times convert to seconds', () => {
  assert.equal(nginxconf.seconds('60s'), 60);
  assert.equal(nginxconf.seconds('1m 30s'), 90);
  assert.equal(nginxconf.seconds('75'), 75);
  assert.equal(nginxconf.seconds('500ms'), 0.5);
  assert.throws(() => nginxconf.seconds('soon'), /not an nginx time/);
});

function facts(over = {}) {
  const nginx = doctor.describeNginx(nginxconf.parseDump(DUMP));
  return {
    kernel: { somaxconn: 4096, nrOpen: 1048576 },
    nginx,
    app: { settings: { keepAliveTimeoutMs: 5000, headersTimeoutMs: 60000, backlog: 511 }, healthz: null },
    sockets: [],
    listeners: [],
    errors: [],
    ...over,
  };
}

const ids = (findings, level) => findings.filter((f) => f.level === level).map((f) => f.id).sort();

test('the common mistakes are each reported with a fix', () => {
  const found = doctor.analyze(facts());
  // HTTP/1.0 upstream, a "close" map with a pool, backlog above somaxconn, rlimit < 2 x connections.
  assert.deepEqual(ids(found, 'fail'), ['keepalive-http', 'keepalive-race', 'nofile', 'upgrade-map']);
  assert.deepEqual(ids(found, 'warn'), ['backlog']);
  const race = found.find((f) => f.id === 'keepalive-race');
  // Where the values were read, then the rule's refusal (roles/tunekit/vars/rules.yml).
  assert.match(race.what, /^app keepAliveTimeout 5000 ms \(app\.json\), nginx upstream app keepalive_timeout 75s: tunekit_app_keepalive_timeout_ms=5000 must be greater than tunekit_nginx_upstream_keepalive_timeout_s=75 /);
  assert.match(race.fix, /above 75000 ms/);
  for (const f of found.filter((x) => x.level !== 'ok')) assert.ok(f.fix, `${f.id} says how to fix it`);
});

test('the live /healthz timeout wins over app.json', () => {
  const f = facts({ app: { settings: { keepAliveTimeoutMs: 5000, headersTimeoutMs: 6000 }, healthz: { keepAliveTimeout: 80000, headersTimeout: 81000 } } });
  const race = doctor.analyze(f).find((x) => x.id === 'keepalive-race');
  assert.equal(race.level, 'ok');
  assert.match(race.what, /80000 ms \(live \/healthz\)/);
});

test('a socket others may use, or nginx may not reach, fails', () => {
  const f = facts({
    sockets: [{ path: '/run/app/app.sock', exists: true, isSocket: true, mode: 0o666, group: 'app', dirMode: 0o755, nginxAccess: { ok: false, why: 'www-data cannot search /run/app (mode 700)' } }],
  });
  const found = doctor.analyze(f);
  assert.equal(found.find((x) => x.id === 'socket-mode').level, 'fail');
  assert.equal(found.find((x) => x.id === 'socket-dir').level, 'warn');
  const acc = found.find((x) => x.id === 'socket-access');
  assert.equal(acc.level, 'fail');
  assert.match(acc.what, /Permission denied/);
});

test('a socket whose mode or group changed after the bind: EACCES, named with the mode app.json binds, and the fix', () => {
  const why = 'www-data has no write permission on /run/app/app.sock (mode 600, owner app, group www-data; www-data\'s groups: www-data)';
  const f = facts({
    app: { settings: { socketMode: '0660', socketGroup: 'www-data' }, healthz: null },
    sockets: [{ path: '/run/app/app.sock', exists: true, isSocket: true, mode: 0o600, group: 'www-data', dirMode: 0o750, nginxAccess: { ok: false, file: '/run/app/app.sock', why } }],
  });
  const acc = doctor.analyze(f).find((x) => x.id === 'socket-access');
  assert.equal(acc.level, 'fail');
  assert.equal(acc.what, `EACCES: ${why}: nginx answers 502 with "(13: Permission denied)"; the socket has mode 0600 (app.json binds it 0660): changed after the runner bound it`);
  assert.match(acc.fix, /chmod 0660 \/run\/app\/app\.sock; chgrp www-data .*or restart the app/);
  // The group changed instead; the mode is the configured one.
  f.sockets[0] = { ...f.sockets[0], mode: 0o660, group: 'root' };
  assert.match(doctor.analyze(f).find((x) => x.id === 'socket-access').what, /the socket has group root \(app\.json: www-data\)/);
});

test('a full accept queue on the app socket fails, naming stopped app processes', () => {
  const sock = { path: '/run/app/app.sock', exists: true, isSocket: true, mode: 0o660, group: 'app', dirMode: 0o750, backlog: 2, queued: 3, pids: [10, 11, 12], stopped: [11, 12] };
  const q = doctor.analyze(facts({ sockets: [sock] })).find((x) => x.id === 'accept-queue');
  assert.equal(q.level, 'fail');
  assert.match(q.what, /full \(3 connections waiting, backlog 2\): app processes 11, 12 are stopped .*\(11: Resource temporarily unavailable\)/);
  assert.match(q.fix, /kill -CONT 11 12/);
  // Not full: no such finding.
  assert.equal(doctor.analyze(facts({ sockets: [{ ...sock, queued: 2 }] })).find((x) => x.id === 'accept-queue'), undefined);
});

test('a deleted socket file fails; the fix says whether the runner binds the path again', () => {
  const sock = { path: '/run/app/app.sock', exists: false, error: 'ENOENT', pids: [10, 11, 11] };
  const deleted = (settings) => doctor.analyze(facts({ app: settings && { settings, healthz: null }, sockets: [sock] })).find((x) => x.id === 'socket-deleted');
  const f = deleted({ strategy: 'shared', socketCheckMs: 1000 });
  assert.equal(f.level, 'fail');
  assert.match(f.what, /^socket file \/run\/app\/app\.sock was deleted while app processes \(pids 10, 11\) still listen on it: .*\(2: No such file or directory\)/);
  assert.match(f.fix, /^the runner binds the path again within socketCheckMs \(1000 ms\) and logs socket-rebound; if this persists, .*: restart the app/);
  assert.match(deleted({ strategy: 'shared', socketCheckMs: 0 }).fix, /^socketCheckMs is 0 in app\.json \(tunekit_app_socket_check_ms\): the runner's check is off; restart the app/);
  assert.match(deleted({ strategy: 'round-robin', socketCheckMs: 1000 }).fix, /^with strategy round-robin .* does not bind the path again; restart the app/);
  assert.match(deleted({ strategy: 'shared' }).fix, /^this app\.json has no socketCheckMs: its runner, older than this kit, does not bind the path again by itself; restart the app/);
  assert.match(deleted(null).fix, /within socketCheckMs \(1000 ms by default\); if this persists: restart the app/);
  // The file is there: no such finding.
  assert.equal(doctor.analyze(facts({ sockets: [{ ...sock, exists: true, isSocket: true, mode: 0o660, group: 'app', dirMode: 0o750 }] })).find((x) => x.id === 'socket-deleted'), undefined);
});

test('access() follows search permission on every parent directory', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-doc-'));
  try {
    fs.chmodSync(dir, 0o755);
    const file = path.join(dir, 'f');
    fs.writeFileSync(file, '');
    fs.chmodSync(file, 0o666);
    assert.equal(doctor.access(file, 'nobody').ok, true);
    fs.chmodSync(dir, 0o750);
    const r = doctor.access(file, 'nobody');
    assert.equal(r.ok, false);
    assert.match(r.why, /nobody cannot search .* \(mode 750, owner root, group root; nobody's groups: nogroup\)/);
    assert.equal(r.file, dir);
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(file, 0o644);
    assert.match(doctor.access(file, 'nobody').why, /no write permission/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("doctor's fix texts read the definition, so an override changes the advice", () => {
  const config = require('../../lib/config');
  const def = config.resolve({ set: ['tunekit_nginx_upstream_keepalive=48', 'tunekit_app_keepalive_margin_s=7', 'tunekit_app_limit_nofile=40000'] });
  const f = facts({
    nginx: { ...facts().nginx, upstreams: [{ name: 'app', servers: ['unix:/run/app/app.sock'], keepalive: 0, keepaliveTimeoutS: 60 }] },
    sockets: [{ path: '/run/app/app.sock', exists: true, isSocket: true, mode: 0o660, group: 'app', dirMode: 0o750, nofile: [1024] }],
  });
  const found = doctor.analyze(f, def);
  assert.match(found.find((x) => x.id === 'keepalive-pool').fix, /`keepalive 48;`/);
  assert.match(found.find((x) => x.id === 'app-nofile').fix, /LimitNOFILE=40000/);
  const race = doctor.analyze(facts(), def).find((x) => x.id === 'keepalive-race');
  assert.match(race.fix, /tunekit derives 82000/, '75 s + the 7 s margin');
});

test('skipped layers are findings of their own, and a read error names its cause', () => {
  const found = doctor.analyze(facts({ skipped: [{ layer: 'app.json', why: '/etc/x/app.json does not exist (pass --app-config PATH)' }], errors: ['nginx -T -c /x failed: open() "/x" failed (2: No such file or directory)'] }));
  const skip = found.find((x) => x.id === 'skipped');
  assert.equal(skip.level, 'skip');
  assert.equal(skip.what, 'app.json: /etc/x/app.json does not exist (pass --app-config PATH)');
  const read = found.find((x) => x.id === 'read');
  // Not a permission problem: no advice to become root.
  assert.doesNotMatch(read.fix, /root/);
});

test('nginx\'s error log: alerts of the last 24 hours are counted, older ones and other lines are not', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-doctor-log-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'error.log');
  const now = new Date(2026, 10, 23, 14, 0, 0).getTime();
  fs.writeFileSync(log, [
    '2026/11/21 09:00:00 [warn] 12#12: 768 worker_connections are not enough, reusing connections',
    '2026/11/23 13:10:00 [warn] 12#12: 768 worker_connections are not enough, reusing connections',
    '2026/11/23 13:50:00 [warn] 12#12: 768 worker_connections are not enough, reusing connections',
    '2026/11/23 13:51:00 [alert] 10#10: setrlimit(RLIMIT_NOFILE, 32768) failed (1: Operation not permitted)',
    '2026/11/23 13:52:00 [error] 12#12: *5 connect() to unix:/run/app.sock failed (11: Resource temporarily unavailable)',
    '',
  ].join('\n'));
  const alerts = doctor.errorLogAlerts(log, now);
  assert.deepEqual(Object.keys(alerts).sort(), ['nginx-rlimit', 'worker-connections']);
  assert.equal(alerts['worker-connections'].count, 2, 'the line of two days ago is not counted');
  assert.match(alerts['worker-connections'].last, /^2026\/11\/23 13:50:00 /);
  assert.equal(doctor.errorLogAlerts(path.join(dir, 'missing.log'), now), null);

  const findings = doctor.analyze({ kernel: { somaxconn: 4096 }, nginx: { ...doctor.describeNginx(nginxconf.parseDump(DUMP)), alerts }, app: null, sockets: [] });
  const wc = findings.find((f) => f.id === 'worker-connections');
  assert.equal(wc.level, 'fail');
  assert.match(wc.what, /2 time\(s\) in the last 24 h: "2026\/11\/23 13:50:00 .*"; .* worker_connections 4096 serve about 2048 requests at once/);
  assert.match(wc.fix, /tunekit_nginx_worker_connections/);
  assert.equal(findings.find((f) => f.id === 'nginx-rlimit').level, 'warn');
  assert.equal(findings.find((f) => f.id === 'nginx-emfile'), undefined);
});

test('HTTP/3: Alt-Svc advertised without a quic listen on that port fails; served, it passes; a quic listen has no backlog finding', () => {
  const dump = (listens, header) => `# configuration file /x/nginx.conf:
events { worker_connections 4096; }
http {
    server {
${listens.map((l) => `        listen ${l};`).join('\n')}
        add_header Alt-Svc '${header}' always;
        location / { return 204; }
    }
}
`;
  const findingsOf = (listens, header) => doctor.analyze({ kernel: { somaxconn: 4096 }, nginx: doctor.describeNginx(nginxconf.parseDump(dump(listens, header))), app: null, sockets: [] });
  const h3 = (f) => f.filter((x) => x.id === 'http3-advertised');
  const missing = h3(findingsOf(['443 ssl backlog=4096'], 'h3=":443"; ma=86400'));
  assert.equal(missing.length, 1);
  assert.equal(missing[0].level, 'fail');
  assert.match(missing[0].what, /Alt-Svc "h3=":443"; ma=86400" advertises HTTP\/3 on UDP port 443, but no `listen \.\.\. quic` serves it/);
  assert.match(missing[0].fix, /tunekit_nginx_http3: true/);
  // Served on another port than advertised is still a failure.
  assert.equal(h3(findingsOf(['443 ssl backlog=4096', '8443 quic reuseport'], 'h3=":443"'))[0].level, 'fail');
  const served = findingsOf(['127.0.0.1:443 ssl backlog=4096', '127.0.0.1:443 quic reuseport'], 'h3=":443"; ma=86400');
  assert.deepEqual(h3(served).map((f) => f.level), ['ok']);
  // The UDP listener is not reported for nginx's default accept queue.
  assert.deepEqual(served.filter((f) => f.id === 'backlog').map((f) => f.what), ['nginx listen 127.0.0.1:443: accept queue 4096']);
});
