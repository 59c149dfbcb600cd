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
const textfile = require('../../lib/textfile');
const doctor = require('../../lib/doctor');
const rules = require('../../lib/config/rules');
const { nginxBinary } = require('../../lib/nginx');
const { raceByHand } = require('../lib/race-by-hand');

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
const promRules = () => YAML.parse(fs.readFileSync(RULES, 'utf8')).groups.flatMap((g) => g.rules);
const alerts = () => promRules().filter((r) => r.alert);

/** The anchors GitHub gives docs/observability.md's headings. */
function anchors() {
  return new Set([...fs.readFileSync(OBSERVABILITY, 'utf8').matchAll(/^#{1,4} (.+)$/gm)]
    .map((m) => m[1].trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')));
}

test('promtool check rules accepts the rules file', async () => {
  assert.ok(fs.existsSync(PROMTOOL), `promtool is not installed; ${SETUP}`);
  const r = await promtool(['check', 'rules', RULES]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, new RegExp(`SUCCESS: ${promRules().length} rules found`));
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
    // TunekitRuleBroken's severity is its rule's level (the textfile's label).
    const severity = a.labels.severity === '{{ if eq $labels.level "fail" }}critical{{ else }}warning{{ end }}' ? 'by level' : a.labels.severity;
    assert.ok(['warning', 'critical', 'by level'].includes(severity), `${a.alert}: severity`);
  }
});

test('TunekitRuleBroken links each rule of the table to its row in docs/variables.md', () => {
  const a = alerts().find((x) => x.alert === 'TunekitRuleBroken');
  assert.equal(a.annotations.runbook, 'docs/variables.md#rule-{{ $labels.rule }}');
  const doc = fs.readFileSync(path.join(ROOT, 'docs/variables.md'), 'utf8');
  for (const r of rules.load()) assert.ok(doc.includes(`<a id="rule-${r.id}"></a>`), `docs/variables.md has no anchor rule-${r.id} (npm run generate)`);
});

test('every metric the rules read from nginx\'s logs or the sampler is one they write', () => {
  const mtail = new Set([...fs.readFileSync(MTAIL_PROG, 'utf8').matchAll(/^(?:counter|histogram|gauge) (\w+)/gm)].map((m) => m[1]));
  const written = textfile.format([{ kind: 'unix', socket: '/s', sockets: 1, queued: 0, limit: 1 }],
    { verdicts: [{ id: 'x', level: 'fail', broken: true, says: 'x', values: { tunekit_x: 1 } }], notEvaluated: [{ id: 'y', missing: [{ variable: 'tunekit_y', why: 'y' }] }] });
  const sampled = new Set([...written.matchAll(/^# TYPE (\w+)/gm)].map((m) => m[1]));
  const exprs = [...promRules().map((r) => r.expr), ...JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')).panels.flatMap((p) => (p.targets || []).map((x) => x.expr))];
  for (const e of exprs) {
    for (const [name] of e.matchAll(/\btunekit_(?:nginx|listen|rule)_\w*/g)) {
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

test('the sampler\'s queues: per socket asked for, from doctor\'s listeners; with reuseport the fullest; after a re-bind the one at the path', () => {
  // lib/live/sockets.js listeners(): Recv-Q is `queued`, Send-Q the `backlog`.
  const tcp = [
    { kind: 'tcp', local: '0.0.0.0:80', queued: 0, backlog: 4096 },
    { kind: 'tcp', local: '0.0.0.0:80', queued: 7, backlog: 4096 },
    { kind: 'tcp', local: '127.0.0.1:8080', queued: 1, backlog: 511 },
  ];
  const q = textfile.queues([{ kind: 'tcp', socket: '80' }, { kind: 'tcp', socket: '127.0.0.1:8080' }, { kind: 'unix', socket: '/gone.sock' }], tcp, () => null);
  assert.deepEqual(q, [
    { kind: 'tcp', socket: '80', sockets: 2, queued: 7, limit: 4096 },
    { kind: 'tcp', socket: '127.0.0.1:8080', sockets: 1, queued: 1, limit: 511 },
    { kind: 'unix', socket: '/gone.sock', sockets: 0, queued: null, limit: null },
  ]);
  // A re-bind leaves the old socket listening under the same name, its file gone:
  // the one bound to the inode at the path counts.
  const unix = [
    { kind: 'unix', local: '/run/x/app.sock', queued: 0, backlog: 4096, ino: 77 },
    { kind: 'unix', local: '/run/x/app.sock', queued: 5, backlog: 4096, ino: 78 },
  ];
  assert.deepEqual(textfile.queues([{ kind: 'unix', socket: '/run/x/app.sock' }], unix, () => 77),
    [{ kind: 'unix', socket: '/run/x/app.sock', sockets: 1, queued: 0, limit: 4096 }]);
});

/**
 * The kit's nginx and app files rendered under dir (a prefix tree nginx -T reads
 * as any user), edited by `edit(vars)`; the sampler's options over them.
 */
function renderedHost(dir, edit = () => {}) {
  const { vars } = renderer.render(config.resolve(), dir, { prefix: true, layers: ['nginx', 'app'] });
  edit(vars);
  return { vars, opts: { nginxConf: path.join(vars.tunekit_nginx_conf_dir, 'nginx.conf'), nginxBin: nginxBinary(), appConfig: vars.tunekit_app_config_path } };
}

/** The sample's tunekit_rule_broken lines: { rule: { level, says, value } }. */
function verdicts(text) {
  const out = {};
  for (const m of text.matchAll(/^tunekit_rule_broken\{rule="([^"]+)",level="(\w+)",says="((?:[^"\\]|\\.)*)"\} ([01])$/gm)) {
    out[m[1]] = { level: m[2], says: m[3].replace(/\\"/g, '"').replace(/\\n/g, '\n').replace(/\\\\/g, '\\'), value: Number(m[4]) };
  }
  return out;
}

test('the sampler writes doctor\'s verdict on every rule doctor evaluates, and nothing for the rest; its file is valid text format', async (t) => {
  const dir = tmpdir(t);
  const { opts } = renderedHost(dir);
  const { text, coverage } = await textfile.sample(opts);
  const got = verdicts(text);
  assert.deepEqual(Object.keys(got).sort(), [...coverage.evaluated].sort(), 'one line per rule doctor evaluated');
  assert.ok(got['keepalive-race'] && got.nofile && got['headers-timeout'], `the rules of the kit's files are evaluated: ${Object.keys(got).join(', ')}`);
  assert.deepEqual(Object.entries(got).filter(([, v]) => v.value !== 0), [], 'the kit\'s own files break no rule');
  for (const r of coverage.notEvaluated) assert.match(text, new RegExp(`^tunekit_rule_not_evaluated\\{rule="${r.id}",why="[^"]+`, 'm'));
  // The same verdicts doctor's audit gives over the same host.
  const facts = await doctor.gather({ ...opts, probePath: false, askApp: false });
  assert.deepEqual(doctor.audit(facts).rules.evaluated, coverage.evaluated);
  assert.match(text, /^tunekit_rule_input\{rule="keepalive-race",variable="tunekit_nginx_upstream_keepalive_timeout_s"\} \d+$/m);
  const check = await promtool(['check', 'metrics'], { input: text });
  assert.equal(check.code, 0, check.out);
});

test('the keep-alive race by hand (no keepalive_timeout line, app at 5 s): the sampler writes keepalive-race broken with doctor\'s text', async (t) => {
  const dir = tmpdir(t);
  const { opts } = renderedHost(dir, raceByHand);
  const got = verdicts((await textfile.sample(opts)).text);
  assert.equal(got['keepalive-race'].value, 1);
  assert.equal(got['keepalive-race'].level, 'fail');
  const finding = doctor.audit(await doctor.gather({ ...opts, probePath: false, askApp: false })).findings.find((f) => f.id === 'keepalive-race' && f.level === 'fail');
  assert.ok(finding, 'doctor fails keepalive-race');
  // doctor's finding: where it read the values, then the rule's text (then a note of its own).
  assert.ok(finding.what.includes(`: ${got['keepalive-race'].says}`), `doctor's finding holds the sampler's text:\n${finding.what}\n${got['keepalive-race'].says}`);
  assert.match(got['keepalive-race'].says, /^tunekit_app_keepalive_timeout_ms=5000\b.* must be greater than tunekit_nginx_upstream_keepalive_timeout_s=60\b/);
});

test('a throwaway rule added to a copy of the table is written by the sampler with no code of its own', async (t) => {
  const dir = tmpdir(t);
  const { opts } = renderedHost(dir);
  const file = path.join(dir, 'rules.yml');
  const doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'roles/tunekit/vars/rules.yml'), 'utf8'));
  doc.tunekit_rules.push({ id: 'throwaway', level: 'warn', when: '{{ tunekit_nginx_worker_connections < 1000000 }}',
    says: 'throwaway: worker_connections {{ tunekit_nginx_worker_connections }} is below a million' });
  fs.writeFileSync(file, YAML.stringify(doc));
  const table = rules.load(file);
  const got = verdicts((await textfile.sample({ ...opts, table })).text);
  const wc = config.resolve().tunekit_nginx_worker_connections;
  assert.deepEqual(got.throwaway, { level: 'warn', says: `throwaway: worker_connections ${wc} is below a million`, value: 1 });
  // Holding, it is written 0 with no text.
  doc.tunekit_rules[doc.tunekit_rules.length - 1].when = '{{ tunekit_nginx_worker_connections > 1000000 }}';
  fs.writeFileSync(file, YAML.stringify(doc));
  assert.deepEqual(verdicts((await textfile.sample({ ...opts, table: rules.load(file) })).text).throwaway, { level: 'warn', says: '', value: 0 });
});

test('the sampler\'s command: --once writes the file; a path that does not exist is named, exit 1', (t) => {
  const dir = tmpdir(t);
  const { opts } = renderedHost(dir);
  const textfiles = fs.mkdtempSync(path.join(dir, 'tf-'));
  const run = (extra) => require('node:child_process').spawnSync(process.execPath, [require.resolve('../../metrics/queue-sampler'),
    '--textfile-dir', textfiles, '--app-config', opts.appConfig, '--nginx-bin', opts.nginxBin, '--once', ...extra], { encoding: 'utf8' });
  const ok = run(['--nginx-conf', opts.nginxConf]);
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(fs.readFileSync(path.join(textfiles, textfile.FILE_NAME), 'utf8'), /^tunekit_rule_broken\{rule="keepalive-race",level="fail",says=""\} 0$/m);
  const missing = run(['--nginx-conf', path.join(dir, 'no-such.conf')]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /^queue-sampler: --nginx-conf \S+no-such\.conf: no such file; pass the path of the live file$/m);
});
