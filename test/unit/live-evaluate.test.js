'use strict';
// The one evaluator of the rule table over a live host (lib/live/evaluate.js),
// the live set it reads (lib/live/variables.js: the definition's `# Live:` lines
// over gathered facts), and doctor's audit built on both: a rule broken, a rule
// holding, a rule that cannot be evaluated with the variable it lacks named; and
// a new rule added to a copy of the table is refused by render and reported by
// doctor with no code of its own.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');
const config = require('../../lib/config');
const rules = require('../../lib/config/rules');
const vartable = require('../../lib/config/vartable');
const nginxconf = require('../../lib/nginxconf');
const doctor = require('../../lib/doctor');
const { evaluate } = require('../../lib/live/evaluate');
const { liveVariables } = require('../../lib/live/variables');
const { describeNginx } = require('../../lib/live/nginx');

const table = rules.load();
const rule = (id) => table.find((r) => r.id === id);
const only = (id) => [rule(id)];
const from = (values) => ({ values, from: Object.fromEntries(Object.keys(values).map((k) => [k, `made up: ${k}`])), missing: {} });

test('a rule the live set breaks: evaluated, broken, with the values it read and the table\'s own text', () => {
  const [r] = evaluate(from({ tunekit_nginx_limit_nofile: 1024, tunekit_nginx_worker_rlimit_nofile: 8192 }), { table: only('nginx-limit-nofile') });
  assert.equal(r.evaluated, true);
  assert.equal(r.broken, true);
  assert.deepEqual(r.read, ['tunekit_nginx_limit_nofile=1024 (made up: tunekit_nginx_limit_nofile)', 'tunekit_nginx_worker_rlimit_nofile=8192 (made up: tunekit_nginx_worker_rlimit_nofile)']);
  assert.equal(r.says, rules.says(rule('nginx-limit-nofile'), { tunekit_nginx_limit_nofile: 1024, tunekit_nginx_worker_rlimit_nofile: 8192 }));
  assert.match(r.says, /^tunekit_nginx_limit_nofile=1024 must be at least\s+tunekit_nginx_worker_rlimit_nofile=8192/);
});

test('a rule the live set holds: evaluated, not broken, no text', () => {
  const [r] = evaluate(from({ tunekit_nginx_limit_nofile: 65536, tunekit_nginx_worker_rlimit_nofile: 8192 }), { table: only('nginx-limit-nofile') });
  assert.deepEqual([r.evaluated, r.broken, r.says], [true, false, null]);
});

test('a rule whose variable the host does not show: not evaluated, naming the variable and why', () => {
  const live = from({ tunekit_nginx_worker_rlimit_nofile: 8192 });
  live.missing.tunekit_nginx_limit_nofile = 'no running nginx master was found';
  const [r] = evaluate(live, { table: only('nginx-limit-nofile') });
  assert.equal(r.evaluated, false);
  assert.deepEqual(r.missing, [{ variable: 'tunekit_nginx_limit_nofile', why: 'no running nginx master was found' }]);
  // A variable with no # Live: line at all is named as such.
  const [u] = evaluate(from({}), { table: [{ id: 'x', level: 'fail', when: '{{ tunekit_nowhere > 1 }}', says: 'x' }] });
  assert.deepEqual(u.missing, [{ variable: 'tunekit_nowhere', why: 'the definition gives it no # Live: line' }]);
});

// A host nginx the kit did not write: worker_rlimit_nofile 8192 under a master
// whose hard limit is 4096, no keepalive_timeout (nginx's default), an upstream on TCP.
const CONF = `# configuration file /etc/nginx/nginx.conf:
worker_rlimit_nofile 8192;
events { worker_connections 2048; }
http {
    upstream backend {
        server 127.0.0.1:3000;
        keepalive 16;
    }
    server {
        listen 80;
        server_name example.com;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`;

function hostFacts() {
  return {
    kernel: { somaxconn: 4096, nrOpen: 1048576, sysctl: { 'net.core.somaxconn': 4096, 'fs.nr_open': 1048576 } },
    nginx: { ...describeNginx(nginxconf.parseDump(CONF), '1.22.1'), tree: nginxconf.parseDump(CONF).tree, alerts: {} },
    limits: { nginx: { 'Max open files': { soft: 1024, hard: 4096, pids: [100] } }, app: {} },
    app: { settings: null, healthz: null, probe: null },
    sockets: [],
    listeners: [],
    errors: [],
    skipped: [],
  };
}

test("the live set reads each variable where its # Live: line says: the directive's file:line, nginx's default when it is absent, /proc limits", () => {
  const live = liveVariables(hostFacts());
  assert.equal(live.values.tunekit_nginx_worker_rlimit_nofile, 8192);
  assert.equal(live.from.tunekit_nginx_worker_rlimit_nofile, 'worker_rlimit_nofile 8192 at /etc/nginx/nginx.conf:1');
  assert.equal(live.values.tunekit_nginx_worker_connections, 2048);
  // No keepalive_timeout in the upstream block: nginx's default, from the definition.
  assert.equal(live.values.tunekit_nginx_upstream_keepalive_timeout_s, rules.upstreamDefault('tunekit_nginx_upstream_keepalive_timeout_s'));
  assert.match(live.from.tunekit_nginx_upstream_keepalive_timeout_s, /^no keepalive_timeout in upstream at \/etc\/nginx\/nginx.conf:4: nginx's default/);
  assert.equal(live.values.tunekit_upstream_kind, 'tcp');
  assert.equal(live.values.tunekit_nginx_limit_nofile, 4096);
  assert.equal(live.values.tunekit_nginx_proxy_connection_default, '');
  assert.equal(live.values.tunekit_nginx_default_server, true, 'the only server for port 80 is its default');
  // What this host does not show, and why.
  assert.match(live.missing.tunekit_app_limit_nofile, /the app's processes were not found/);
  assert.match(live.missing.tunekit_profile, /^not read on a live host: /);
});

test('doctor over a host the kit did not deploy: the broken rule in the host\'s words, each rule evaluated or named with what it lacks', () => {
  const { findings, rules: coverage } = doctor.audit(hostFacts(), config.resolve());
  const f = findings.find((x) => x.id === 'nginx-limit-nofile');
  assert.equal(f.level, 'fail');
  // The user's words first (the /proc field, the directive and its line), the kit's names only in parentheses.
  assert.equal(f.what, '"Max open files" hard 4096 in /proc/100/limits (nginx\'s master), worker_rlimit_nofile 8192 at /etc/nginx/nginx.conf:1: ' +
    'the hard "Max open files" limit of nginx\'s master 4096 (the kit\'s tunekit_nginx_limit_nofile) must be at least worker_rlimit_nofile 8192 (the kit\'s tunekit_nginx_worker_rlimit_nofile): ' +
    'systemd caps what nginx workers may raise to');
  assert.match(f.fix, /worker_rlimit_nofile 8192 at \/etc\/nginx\/nginx.conf:1/);
  assert.equal(coverage.total, table.length);
  assert.equal(coverage.evaluated.length + coverage.notEvaluated.length, table.length, 'every rule is counted once');
  assert.ok(coverage.evaluated.includes('nginx-limit-nofile'));
  const stock = coverage.notEvaluated.find((r) => r.id === 'stock-tcp');
  assert.deepEqual(stock.missing.map((m) => m.variable), ['tunekit_profile']);
  // nr-open needs the app's processes, which this host did not show.
  assert.ok(coverage.notEvaluated.find((r) => r.id === 'nr-open').missing.some((m) => m.variable === 'tunekit_app_limit_nofile'));
});

test("one cause, one finding: nginx's master under a hard open-files limit below worker_rlimit_nofile, its workers left at the limit they inherited", () => {
  // setrlimit(RLIMIT_NOFILE, 8192) fails in each worker (over the master's hard 4096):
  // they keep the soft limit they inherited, 1024, under 2 x worker_connections.
  const facts = hostFacts();
  facts.nginx.workerNofile = [1024, 1024];
  const said = '2026/12/05 06:36:26 [alert] 23840#23840: setrlimit(RLIMIT_NOFILE, 8192) failed (1: Operation not permitted)';
  facts.nginx.alerts = { 'nginx-rlimit': { count: 1, last: said } };
  const { findings } = doctor.audit(facts, config.resolve());
  const fails = findings.filter((f) => f.level === 'fail');
  assert.deepEqual(fails.map((f) => f.id), ['nginx-limit-nofile'], JSON.stringify(fails));
  assert.ok(fails[0].what.endsWith(`; nginx's running workers show it: their open-files limit is 1024 (/proc of its workers), under 2 x worker_connections 2048; its error log: "${said}"`), fails[0].what);
  // nginx's alert is the same cause: no warning of its own beside it.
  assert.deepEqual(findings.filter((f) => f.id === 'nginx-rlimit'), []);
  // A worker limit the master's hard limit does not explain is a finding of its own.
  facts.limits.nginx['Max open files'].hard = 65536;
  facts.nginx.workerNofile = [1024];
  assert.deepEqual(doctor.audit(facts, config.resolve()).findings.filter((f) => f.level === 'fail').map((f) => f.id), ['nofile']);
});

test('adding a rule is a row in the table: render refuses it and doctor reports it, with no code of its own', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-rule-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const doc = YAML.parse(fs.readFileSync(path.join(__dirname, '../../', rules.RULES_FILE), 'utf8'));
  doc.tunekit_rules.push({
    id: 'pool-timeout-floor',
    level: 'warn',
    when: '{{ tunekit_nginx_upstream_keepalive_timeout_s < 30 and tunekit_nginx_worker_connections > 1024 }}',
    says: 'tunekit_nginx_upstream_keepalive_timeout_s={{ tunekit_nginx_upstream_keepalive_timeout_s }} is under 30 with worker_connections {{ tunekit_nginx_worker_connections }}: a throwaway rule of this test',
  });
  const file = path.join(dir, 'rules.yml');
  fs.writeFileSync(file, YAML.stringify(doc));
  const copy = rules.load(file);
  // Render: the set that breaks it is refused with its text.
  const vars = config.resolve({ set: ['tunekit_nginx_upstream_keepalive_timeout_s=10', 'tunekit_app_keepalive_timeout_ms=70000'], check: false });
  assert.ok(rules.refusals(vars, undefined, copy).some((l) => l.includes('a throwaway rule of this test')), 'render refuses it');
  assert.deepEqual(rules.refusals(config.resolve(), undefined, copy), [], 'the definition passes it');
  // Doctor: a host whose upstream keeps idle connections 10 s.
  const facts = hostFacts();
  const conf = CONF.replace('keepalive 16;', 'keepalive 16;\n        keepalive_timeout 10s;');
  facts.nginx = { ...describeNginx(nginxconf.parseDump(conf), '1.22.1'), tree: nginxconf.parseDump(conf).tree, alerts: {} };
  const { findings, rules: coverage } = doctor.audit(facts, config.resolve(), { table: copy });
  const f = findings.find((x) => x.id === 'pool-timeout-floor');
  assert.equal(f.level, 'warn');
  assert.match(f.what, /^keepalive_timeout 10s at \/etc\/nginx\/nginx.conf:\d+, .*: keepalive_timeout 10 \(the kit's tunekit_nginx_upstream_keepalive_timeout_s\) is under 30 with worker_connections 2048/);
  assert.ok(coverage.evaluated.includes('pool-timeout-floor'));
  assert.equal(coverage.total, table.length + 1);
  // The docs' table (npm run generate) lists it as evaluated live.
  assert.match(vartable.liveTable(undefined, copy), /\| <a id="rule-pool-timeout-floor"><\/a>`pool-timeout-floor` \| `tunekit_nginx_upstream_keepalive_timeout_s`, `tunekit_nginx_worker_connections` \| yes \|/);
});

test("the app's service's stop timeout (systemctl show) and Node's keep-alive buffer derived from its live version", () => {
  const facts = hostFacts();
  facts.app.healthz = { keepAliveTimeout: 5000, headersTimeout: 60000, requestTimeout: 300000, node: '20.20.2', keepAliveTimeoutBuffer: null };
  facts.app.settings = { drainTimeoutMs: 10000, killGraceMs: 2000 };
  facts.systemd = { unit: 'api.service', properties: { TimeoutStopUSec: '1min 30s' } };
  const live = liveVariables(facts);
  assert.equal(live.values.tunekit_systemd_timeout_stop_s, 90);
  assert.equal(live.from.tunekit_systemd_timeout_stop_s, 'TimeoutStopUSec=1min 30s (systemctl show api.service)');
  assert.equal(live.values.tunekit_app_drain_timeout_s, 10);
  // /healthz gives no buffer (Node before 22.19): what Node 20.20.2 adds, by the definition's own expression.
  assert.equal(live.values.tunekit_app_keepalive_buffer_ms, 1000);
  assert.equal(live.from.tunekit_app_keepalive_buffer_ms, 'derived: tunekit_node_version=20.20.2');
  const [stop] = evaluate(live, { table: only('stop-timeout') });
  assert.deepEqual([stop.evaluated, stop.broken], [true, false]);
  facts.systemd.properties.TimeoutStopUSec = '5s';
  const [short] = evaluate(liveVariables(facts), { table: only('stop-timeout') });
  assert.equal(short.broken, true);
  assert.match(short.says, /^tunekit_systemd_timeout_stop_s=5 must exceed tunekit_app_drain_timeout_s=10/);
});

test('a rule whose own check has no case is evaluated over the live set: worker_rlimit_nofile unset is the soft limit the workers inherit, one finding per cause', () => {
  const facts = hostFacts();
  const conf = CONF.replace('worker_rlimit_nofile 8192;\n', '');
  facts.nginx = { ...describeNginx(nginxconf.parseDump(conf), '1.22.1'), tree: nginxconf.parseDump(conf).tree, alerts: {} };
  const nofileOf = (soft, workers) => {
    facts.limits.nginx['Max open files'] = { soft, hard: 65536, pids: [100] };
    facts.nginx.workerNofile = workers;
    const { findings, rules: coverage } = doctor.audit(facts, config.resolve());
    return { findings: findings.filter((f) => f.id === 'nofile'), coverage, verdict: coverage.verdicts.find((v) => v.id === 'nofile') };
  };
  // Enough: evaluated, holds, no line beyond the check's own.
  let r = nofileOf(8192, [8192]);
  assert.ok(r.coverage.evaluated.includes('nofile'), JSON.stringify(r.coverage.notEvaluated.find((x) => x.id === 'nofile')));
  assert.equal(r.verdict.broken, false);
  assert.deepEqual(r.findings.map((f) => f.level), ['warn', 'ok'], JSON.stringify(r.findings));
  // Too low, the workers' live limit seen: broken, and the check's finding is the one failure.
  r = nofileOf(1024, [1024]);
  assert.equal(r.verdict.broken, true);
  assert.match(r.verdict.says, /tunekit_nginx_worker_rlimit_nofile=1024 must be at least 2 x\s+tunekit_nginx_worker_connections=2048/);
  assert.deepEqual(r.findings.filter((f) => f.level === 'fail').map((f) => f.what), ['a running nginx worker has an open-files limit of 1024 < 4096']);
  // Too low, the workers' limits unread: the rule's own finding, in the host's words.
  r = nofileOf(1024, []);
  const fails = r.findings.filter((f) => f.level === 'fail');
  assert.equal(fails.length, 1, JSON.stringify(r.findings));
  assert.match(fails[0].what, /^"Max open files" soft 1024 in \/proc\/100\/limits \(nginx's master\), worker_connections 2048 at \/etc\/nginx\/nginx.conf:\d+: /);
});
