'use strict';
// metrics/: the rules file passes `promtool check rules` and its unit tests
// (`promtool test rules`), and those tests fail when an alert breaks; every
// alert names a variable of the definition and a section of
// docs/observability.md that exists; every dashboard expression parses
// (promtool, as a recording rule); mtail's program counts nginx's lines by
// cause; the queue sampler reads ss and the kit's own files. Real promtool and
// mtail (Debian packages prometheus and mtail).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');
const { ROOT } = require('../../lib/template');
const { readDefinition } = require('../../lib/config/definition');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { runCommand } = require('../lib/util');
const sampler = require('../../metrics/queue-sampler');

const METRICS = path.join(ROOT, 'metrics');
const RULES = path.join(METRICS, 'tunekit.rules.yml');
const TESTS = path.join(METRICS, 'tests');
const DASHBOARD = path.join(METRICS, 'grafana-dashboard.json');
const MTAIL_PROG = path.join(METRICS, 'nginx.mtail');
const OBSERVABILITY = path.join(ROOT, 'docs/observability.md');
const PROMTOOL = '/usr/bin/promtool';
const MTAIL = '/usr/bin/mtail';
const SETUP = 'run: node bin/setup.js test (Debian packages prometheus and mtail)';

function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-metrics-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const promtool = (args, opts) => runCommand(PROMTOOL, args, { timeoutMs: 60_000, ...opts });
const rules = () => YAML.parse(fs.readFileSync(RULES, 'utf8')).groups.flatMap((g) => g.rules);
const alerts = () => rules().filter((r) => r.alert);

/** The anchors GitHub gives docs/observability.md's headings. */
function anchors() {
  return new Set([...fs.readFileSync(OBSERVABILITY, 'utf8').matchAll(/^#{1,4} (.+)$/gm)]
    .map((m) => m[1].trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')));
}

test('promtool check rules accepts the rules file', async () => {
  assert.ok(fs.existsSync(PROMTOOL), `promtool is not installed; ${SETUP}`);
  const r = await promtool(['check', 'rules', RULES]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, new RegExp(`SUCCESS: ${rules().length} rules found`));
});

test('promtool test rules: every alert fires on its failure\'s series, and a broken alert fails the tests', async (t) => {
  const files = fs.readdirSync(TESTS).filter((f) => f.endsWith('.test.yml'));
  assert.ok(files.length > 0, 'metrics/tests/ holds promtool test files');
  const r = await promtool(['test', 'rules', ...files], { cwd: TESTS });
  assert.equal(r.code, 0, r.out);
  // Every alert of the file is exercised by some test.
  const tested = new Set(files.flatMap((f) => [...fs.readFileSync(path.join(TESTS, f), 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1])));
  assert.deepEqual(alerts().map((a) => a.alert).filter((a) => !tested.has(a)), [], 'alerts without a promtool test');

  // The same tests against a rules file whose keep-alive alert reads the wrong cause: they fail.
  const dir = tmpdir(t);
  fs.mkdirSync(path.join(dir, 'tests'));
  fs.writeFileSync(path.join(dir, 'tunekit.rules.yml'), fs.readFileSync(RULES, 'utf8').replaceAll('cause="closed_early"', 'cause="refused"'));
  for (const f of files) fs.copyFileSync(path.join(TESTS, f), path.join(dir, 'tests', f));
  const broken = await promtool(['test', 'rules', ...files], { cwd: path.join(dir, 'tests') });
  assert.equal(broken.code, 1, broken.out);
  assert.match(broken.out, /alertname: TunekitKeepaliveRace/);
});

test('every alert names a variable of the definition and links a section of docs/observability.md that exists', () => {
  const defined = new Set(readDefinition().map((d) => d.key));
  const sections = anchors();
  for (const a of alerts()) {
    const { description, docs, summary } = a.annotations;
    assert.ok(summary && description, `${a.alert}: summary and description`);
    const named = [...description.matchAll(/\btunekit_[a-z0-9_]+\b/g)].map((m) => m[0]);
    assert.ok(named.length > 0, `${a.alert}: its description names no tunekit_ variable`);
    for (const v of named) assert.ok(defined.has(v), `${a.alert} names ${v}, which the definition does not define`);
    const m = /^docs\/observability\.md#([\w-]+)$/.exec(docs || '');
    assert.ok(m, `${a.alert}: annotation docs is docs/observability.md#SECTION (is ${docs})`);
    assert.ok(description.endsWith(`See ${docs}`), `${a.alert}: the description ends with its link`);
    assert.ok(sections.has(m[1]), `${a.alert}: docs/observability.md has no section #${m[1]}`);
    assert.match(description, /Confirm: tunekit (doctor|logs)/, `${a.alert}: says how to confirm it`);
    assert.ok(['warning', 'critical'].includes(a.labels.severity), `${a.alert}: severity`);
  }
});

test('every metric the rules read from nginx\'s logs or the sampler is one they write', () => {
  const mtail = new Set([...fs.readFileSync(MTAIL_PROG, 'utf8').matchAll(/^(?:counter|histogram|gauge) (\w+)/gm)].map((m) => m[1]));
  const written = sampler.format([{ kind: 'unix', socket: '/s', sockets: 1, queued: 0, limit: 1 }], [{ layer: 'app', name: 'x', value: 1 }]);
  const sampled = new Set([...written.matchAll(/^# TYPE (\w+)/gm)].map((m) => m[1]));
  const exprs = [...rules().map((r) => r.expr), ...JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')).panels.flatMap((p) => (p.targets || []).map((x) => x.expr))];
  for (const e of exprs) {
    for (const [name] of e.matchAll(/\btunekit_(?:nginx|listen|setting)\w*/g)) {
      const base = name.replace(/_(bucket|sum|count)$/, '');
      assert.ok(mtail.has(base) || sampled.has(base), `${name} (in ${e}) is written by neither metrics/nginx.mtail nor the sampler`);
    }
  }
});

test('every dashboard panel\'s expression parses: promtool check rules on them as recording rules', async (t) => {
  const dash = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
  const targets = dash.panels.filter((p) => p.type !== 'row').flatMap((p) => {
    assert.ok(p.targets && p.targets.length, `panel "${p.title}" has an expression`);
    assert.ok(p.description, `panel "${p.title}" says what it shows`);
    return p.targets.map((x) => ({ panel: p.title, expr: x.expr }));
  });
  // Grafana's variables, as Grafana would put them in: a range, a host regex.
  const promql = (e) => e.replaceAll('$__rate_interval', '5m').replaceAll('$host', '.*');
  const file = path.join(tmpdir(t), 'dashboard.rules.yml');
  fs.writeFileSync(file, YAML.stringify({ groups: [{ name: 'dashboard', rules: targets.map((x, i) => ({ record: `dashboard:panel_${i}`, expr: promql(x.expr) })) }] }));
  const r = await promtool(['check', 'rules', file]);
  assert.equal(r.code, 0, `${r.out}\n${targets.map((x, i) => `panel_${i}: ${x.panel}`).join('\n')}`);
  assert.match(r.out, new RegExp(`SUCCESS: ${targets.length} rules found`));
  // The check can fail: one broken expression is refused.
  fs.writeFileSync(file, YAML.stringify({ groups: [{ name: 'd', rules: [{ record: 'dashboard:bad', expr: 'sum(rate(x[5m])' }] }] }));
  assert.notEqual((await promtool(['check', 'rules', file])).code, 0);
});

// Lines as nginx 1.22 writes them (error log) and in the kit's log_format (access log).
const UPSTREAM = 'client: 127.0.0.1, server: _, request: "GET / HTTP/1.1", upstream: "http://unix:/run/tunekit-app/app.sock:/", host: "localhost"';
const ERROR_LINES = [
  `[error] 7#7: *1 upstream prematurely closed connection while reading response header from upstream, ${UPSTREAM}`,
  `[error] 7#7: *2 recv() failed (104: Connection reset by peer) while reading response header from upstream, ${UPSTREAM}`,
  `[error] 7#7: *3 connect() to unix:/run/tunekit-app/app.sock failed (11: Resource temporarily unavailable) while connecting to upstream, ${UPSTREAM}`,
  `[error] 7#7: *4 connect() to unix:/run/tunekit-app/app.sock failed (111: Connection refused) while connecting to upstream, ${UPSTREAM}`,
  `[crit] 7#7: *5 connect() to unix:/run/tunekit-app/app.sock failed (13: Permission denied) while connecting to upstream, ${UPSTREAM}`,
  `[crit] 7#7: *6 connect() to unix:/run/tunekit-app/app.sock failed (2: No such file or directory) while connecting to upstream, ${UPSTREAM}`,
  `[error] 7#7: *7 upstream timed out (110: Connection timed out) while reading response header from upstream, ${UPSTREAM}`,
  `[error] 7#7: *8 upstream sent too big header while reading response header from upstream, ${UPSTREAM}`,
  // Refused at max_conns (overload protection): nginx 1.22's line, $upstream_addr the upstream's name.
  '[error] 7#7: *11 no live upstreams while connecting to upstream, client: 127.0.0.1, server: _, request: "GET / HTTP/1.1", upstream: "http://tunekit_app/", host: "localhost"',
  // Not upstream failures: a response spilled to a temp file; nginx out of connection slots (counted apart).
  `[warn] 7#7: *9 an upstream response is buffered to a temporary file /var/lib/nginx/proxy/1/00/0000000001 while reading upstream, ${UPSTREAM}`,
  '[warn] 7#7: 32 worker_connections are not enough, reusing connections',
  `[alert] 7#7: *10 32 worker_connections are not enough while connecting to upstream, ${UPSTREAM}`,
].map((l) => `2026/11/27 06:00:00 ${l}`);
const access = (status, urt, tls, resumed, cr) => `127.0.0.1 - - [27/Nov/2026:06:00:00 +0000] "GET / HTTP/1.1" ${status} 5 "-" "curl/7.88.1" rt=0.002 uct=0.000 urt=${urt} tls=${tls} resumed=${resumed} cr=${cr}`;
const ACCESS_LINES = [
  access(200, '0.001', '-', '-', 1),
  access(200, '0.004', 'TLSv1.3', '.', 1),
  access(200, '0.003', 'TLSv1.3', '.', 2), // the same connection's second request: no handshake
  access(200, '0.002', 'TLSv1.3', 'r', 1),
  access(502, '0.000, 0.020', 'TLSv1.2', 'r', 1), // two attempts: the last one's time
  access(404, '-', '-', '-', 3),
];

test('mtail counts upstream failures by cause, responses by class, handshakes once per connection', async (t) => {
  assert.ok(fs.existsSync(MTAIL), `mtail is not installed; ${SETUP}`);
  const dir = tmpdir(t);
  const [errorLog, accessLog] = [path.join(dir, 'error.log'), path.join(dir, 'access.log')];
  fs.writeFileSync(errorLog, `${ERROR_LINES.join('\n')}\n`);
  fs.writeFileSync(accessLog, `${ACCESS_LINES.join('\n')}\n`);
  const r = await runCommand(MTAIL, ['-one_shot', '-one_shot_format', 'prometheus', '-emit_prog_label=false',
    '-progs', METRICS, '-logs', `${errorLog},${accessLog}`], { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  const value = (series) => {
    const line = r.stdout.split('\n').find((l) => l.startsWith(`${series} `));
    return line ? Number(line.split(' ')[1]) : undefined;
  };
  for (const cause of ['closed_early', 'eagain', 'refused', 'eacces', 'enoent', 'timeout', 'max_conns', 'other']) {
    assert.equal(value(`tunekit_nginx_upstream_errors_total{cause="${cause}"}`), cause === 'closed_early' ? 2 : 1, cause);
  }
  assert.equal(value('tunekit_nginx_worker_connections_exhausted_total'), 2);
  assert.equal(value('tunekit_nginx_responses_total{status_class="2xx"}'), 4);
  assert.equal(value('tunekit_nginx_responses_total{status_class="4xx"}'), 1);
  assert.equal(value('tunekit_nginx_responses_total{status_class="5xx"}'), 1);
  assert.equal(value('tunekit_nginx_tls_handshakes_total{reused="yes"}'), 2);
  assert.equal(value('tunekit_nginx_tls_handshakes_total{reused="no"}'), 1);
  assert.equal(value('tunekit_nginx_upstream_response_seconds_count'), 5);
  assert.equal(value('tunekit_nginx_upstream_response_seconds_sum'), 0.03);
  assert.equal(value('tunekit_nginx_upstream_response_seconds_bucket{le="0.0025"}'), 2);
});

test('the sampler reads ss\'s listening sockets: Recv-Q waiting, Send-Q the limit; with reuseport the fullest queue', () => {
  const unix = sampler.parseSs('unix', 'u_str LISTEN 3      5      /run/x/app.sock 1234 * 0\nu_str ESTAB 0 0 /run/x/app.sock 1235 * 1236\n');
  assert.deepEqual(unix, [{ kind: 'unix', local: '/run/x/app.sock', queued: 3, limit: 5 }]);
  const tcp = sampler.parseSs('tcp', 'LISTEN 0 4096 0.0.0.0:80 0.0.0.0:*\nLISTEN 7 4096 0.0.0.0:80 0.0.0.0:*\nLISTEN 1 511 127.0.0.1:8080 0.0.0.0:*\n');
  const q = sampler.queues([{ kind: 'tcp', socket: '80' }, { kind: 'tcp', socket: '127.0.0.1:8080' }, { kind: 'unix', socket: '/gone.sock' }], tcp);
  assert.deepEqual(q, [
    { kind: 'tcp', socket: '80', sockets: 2, queued: 7, limit: 4096 },
    { kind: 'tcp', socket: '127.0.0.1:8080', sockets: 1, queued: 1, limit: 511 },
    { kind: 'unix', socket: '/gone.sock', sockets: 0, queued: null, limit: null },
  ]);
});

test('the sampler reads the runner\'s socket by the name it was bound with (PATH~PID) and, after a re-bind, by the inode at the path', () => {
  // The runner binds under PATH~PID and renames the file to PATH (app/socket.js bindName); a
  // re-bind leaves the old socket listening under the same name, its file gone.
  const name = require('../../app/socket').bindName('/run/x/app.sock', 4242);
  assert.equal(name, '/run/x/app.sock~4242');
  const unix = sampler.parseSs('unix', [
    `u_str LISTEN 0 4096 ${name} 1234 * 0 users:(("node",pid=4242,fd=19)) <-> ino:77 dev:0/2049 peers:`,
    `u_str LISTEN 5 4096 ${name} 1240 * 0 users:(("node",pid=4242,fd=23)) <-> ino:78 dev:0/2049 peers:`,
  ].join('\n'));
  assert.deepEqual(unix.map((s) => [s.local, s.ino, s.queued]), [['/run/x/app.sock', 77, 0], ['/run/x/app.sock', 78, 5]]);
  const q = sampler.queues([{ kind: 'unix', socket: '/run/x/app.sock' }], unix, () => 78);
  assert.deepEqual(q, [{ kind: 'unix', socket: '/run/x/app.sock', sockets: 1, queued: 5, limit: 4096 }]);
});

test('the sampler counts a directive the nginx files leave out at nginx\'s default, and only upstream blocks that pool', (t) => {
  // The host the keep-alive race alert must see: an upstream block with `keepalive 8`
  // and no keepalive_timeout (nginx keeps idle connections 60 s) in front of an app
  // that closes them after Node's default 5 s.
  const dir = tmpdir(t);
  const app = path.join(dir, 'app.json');
  fs.writeFileSync(app, JSON.stringify({ listen: 'unix:/run/app/app.sock', keepAliveTimeoutMs: 5000, headersTimeoutMs: 60000, backlog: 511 }));
  const conf = (upstream) => {
    const file = path.join(dir, 'nginx.conf');
    fs.writeFileSync(file, `events { }\nhttp {\n  upstream app {\n    server unix:/run/app/app.sock;\n${upstream}  }\n}\n`);
    return file;
  };
  const defaults = sampler.readDefaults(sampler.DEFAULTS_FILE);
  const nginx = (version) => ({ defaults, version });
  const value = (upstream, version, name = 'upstream_keepalive_timeout_seconds') => {
    const got = sampler.settings({ appConfig: app, nginxConf: conf(upstream), nginx: version === null ? null : nginx(version) });
    return (got.find((s) => s.name === name) || {}).value;
  };
  const definition = readDefinition();
  const upstreamDefault = (key) => Number(/^\d+/.exec(definition.find((d) => d.key === key).upstream)[0]);
  assert.equal(defaults.upstreamKeepaliveTimeoutS, upstreamDefault('tunekit_nginx_upstream_keepalive_timeout_s'));
  assert.equal(value('    keepalive 8;\n', '1.22.1'), defaults.upstreamKeepaliveTimeoutS, 'a pool without keepalive_timeout keeps connections for nginx\'s default');
  assert.equal(value('    keepalive 8;\n    keepalive_timeout 4s;\n', '1.22.1'), 4);
  assert.equal(value('', '1.22.1'), undefined, 'before 1.29.7 a block without keepalive keeps no idle connection: no race');
  assert.equal(value('    keepalive_timeout 75s;\n', '1.22.1'), undefined, 'a keepalive_timeout without a pool is no race either');
  assert.equal(value('', '1.30.0'), defaults.upstreamKeepaliveTimeoutS, 'from 1.29.7 every upstream block pools by default');
  assert.equal(value('', '1.29.7'), defaults.upstreamKeepaliveTimeoutS);
  assert.equal(value('', '1.29.6'), undefined);
  assert.equal(value('    keepalive 8;\n', null), undefined, 'without nginx\'s defaults a value left out is not guessed');
  assert.equal(value('', '1.22.1', 'worker_connections'), upstreamDefault('tunekit_nginx_worker_connections'));
  // The app's idle close: keepAliveTimeout plus what its Node adds (this Node's, the host's).
  const buffer = sampler.nodeKeepaliveBufferMs(defaults.nodeKeepaliveBuffer);
  assert.equal(value('    keepalive 8;\n', '1.22.1', 'keepalive_close_seconds'), 5 + buffer / 1000);
  assert.equal(value('    keepalive 8;\n', null, 'keepalive_close_seconds'), undefined, 'without the facts, no close time is guessed');
  const nodeBuffer = (version) => sampler.nodeKeepaliveBufferMs(defaults.nodeKeepaliveBuffer, version, undefined);
  assert.deepEqual(['18.20.4', '20.17.0', '20.18.0', '20.20.2', '21.7.3', '22.8.0', '22.9.0', '24.22.2'].map(nodeBuffer),
    [0, 0, 1000, 1000, 0, 0, 1000, 1000]);
  assert.equal(sampler.nodeKeepaliveBufferMs(defaults.nodeKeepaliveBuffer, '24.22.2', 2500), 2500, 'server.keepAliveTimeoutBuffer where Node has it');
  assert.equal(value('', null, 'worker_connections'), undefined);

  // Through the command as its unit runs it: nginx's version asked of the binary.
  const textfiles = fs.mkdtempSync(path.join(dir, 'tf-'));
  conf('    keepalive 8;\n');
  const bin = path.join(dir, 'nginx');
  fs.writeFileSync(bin, '#!/bin/sh\necho "nginx version: nginx/1.22.1" >&2\n', { mode: 0o755 });
  const run = (extra) => require('node:child_process').spawnSync(process.execPath, [require.resolve('../../metrics/queue-sampler'),
    '--textfile-dir', textfiles, '--app-config', app, '--nginx-conf', path.join(dir, 'nginx.conf'), '--once', ...extra], { encoding: 'utf8' });
  const ok = run(['--nginx-bin', bin]);
  assert.equal(ok.status, 0, ok.stderr);
  const text = fs.readFileSync(path.join(textfiles, sampler.FILE_NAME), 'utf8');
  assert.match(text, new RegExp(`^tunekit_setting\\{layer="nginx",name="upstream_keepalive_timeout_seconds"\\} ${defaults.upstreamKeepaliveTimeoutS}$`, 'm'));
  const missing = run(['--nginx-bin', path.join(dir, 'no-such-nginx')]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /cannot read nginx's defaults: .*no-such-nginx -v` printed no version .*: pass --nginx-bin PATH/);
  assert.match(fs.readFileSync(path.join(textfiles, sampler.FILE_NAME), 'utf8'), /name="keepalive_timeout_seconds"\} 5$/m, 'the other values are still written');
});

test('the sampler reads the values the rules compare from a rendered app.json and nginx.conf (includes followed)', async (t) => {
  const dir = tmpdir(t);
  const vars = config.resolve({ set: ['tunekit_nginx_upstream_keepalive_timeout_s=30', 'tunekit_nginx_worker_connections=1000'] });
  const { vars: pv } = renderer.render(vars, dir, { prefix: true, layers: ['nginx', 'app'] });
  const got = sampler.settings({ appConfig: pv.tunekit_app_config_path, nginxConf: path.join(pv.tunekit_nginx_conf_dir, 'nginx.conf') });
  const of = (layer, name) => (got.find((s) => s.layer === layer && s.name === name) || {}).value;
  assert.equal(of('app', 'keepalive_timeout_seconds'), 35);
  assert.equal(of('app', 'headers_timeout_seconds'), 36);
  assert.equal(of('app', 'listen_backlog'), vars.tunekit_app_backlog);
  assert.equal(of('nginx', 'upstream_keepalive_timeout_seconds'), 30);
  assert.equal(of('nginx', 'worker_connections'), 1000);
  assert.equal(of('nginx', 'worker_rlimit_nofile'), 2000);
  assert.equal(of('kernel', 'somaxconn'), Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8')));

  // Another site's upstream on a shared host does not count: only blocks that name the app's socket.
  const shared = path.join(dir, 'shared.conf');
  fs.writeFileSync(shared, `events { worker_connections 512; }\nhttp {\n  include ${path.join(pv.tunekit_nginx_include_dir, 'upstream.conf')};\n`
    + '  upstream other { server 10.0.0.1:80; keepalive 8; keepalive_timeout 300s; } # a "quoted { brace" in a comment\n}\n');
  const of2 = (o, name) => (sampler.settings(o).find((s) => s.name === name) || {}).value;
  assert.equal(of2({ appConfig: pv.tunekit_app_config_path, nginxConf: shared }, 'upstream_keepalive_timeout_seconds'), 30);
  assert.equal(of2({ nginxConf: shared }, 'upstream_keepalive_timeout_seconds'), 300, 'without app.json, the longest of every upstream');
  // A source it cannot read is named; the others are still read.
  const broken = path.join(dir, 'app.json');
  fs.writeFileSync(broken, '{"keepAliveTimeoutMs": 65');
  const partial = sampler.settings({ appConfig: broken, nginxConf: shared });
  assert.equal(partial.errors.length, 1);
  assert.match(partial.errors[0], new RegExp(`^${broken}: `));
  assert.equal(partial.find((s) => s.name === 'worker_connections').value, 512);

  // What it writes is valid text format (promtool check metrics), label values escaped.
  const text = sampler.format([{ kind: 'unix', socket: '/run/a "b"\\c.sock', sockets: 1, queued: 2, limit: 5 }], got);
  assert.match(text, /^tunekit_listen_queue_length\{socket="\/run\/a \\"b\\"\\\\c\.sock",kind="unix"\} 2$/m);
  const check = await promtool(['check', 'metrics'], { input: text });
  assert.equal(check.code, 0, check.out);
});
