'use strict';
// `tunekit doctor`: a cross-layer audit of a live host. It reads what is actually
// running — nginx's effective config (`nginx -T`), the kernel's limits, the
// listening sockets' real accept queues (`ss`), process limits (/proc), the
// socket's owner, mode and directories, and the app's live timeouts (GET /healthz
// of the example app, else the runner's app.json) — and checks that the layers
// agree. The rules that variables state (roles/tunekit/vars/rules.yml,
// which `tunekit render` and the Ansible role refuse sets by) are evaluated over
// the live values mapped onto their variables; a directive that is not set counts
// at its upstream default, read from the definition. Fix texts read the kit's
// definition (lib/config), so they name the values tunekit would render.
//
// gather(options) -> facts (I/O only, lib/live/); audit(facts) -> { findings,
// rules: which rules it evaluated live and why not the others } (pure);
// analyze(facts) -> findings.
// Each finding: { id, level: 'ok'|'warn'|'fail'|'skip', what, fix? }.

const config = require('./config');
const rules = require('./config/rules');
const { createEnv } = require('./template');
const { gather, DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG } = require('./live');
const { nofile, isRoot } = require('./live/host');
const { listeners, access } = require('./live/sockets');
const { errorLogAlerts, nginxUpstreamDefaults, describeNginx, proxied } = require('./live/nginx');
const { appTimeouts } = require('./live/app');
const { liveVariables, appViews, inUserWords } = require('./live/variables');
const { evaluate } = require('./live/evaluate');
const { readDefinition } = require('./config/definition');
// The checks, by what they look at (CHECKS below lists them in the order doctor reports).
const {
  poolVars, keepalivePool, keepaliveRaceCases, measuredHeadersCases, keepaliveRaceUnknown, upgradeMapCases, upgradeMapUnpooled,
} = require('./checks/keepalive');
const { listenBacklogCases, listenBacklogIdle, altSvcServed, appSocketBacklog, nginxNofile, nginxLimitEvidence } = require('./checks/listen');
const { octal, existing, socketDir, socketAccess, appNofile, acceptQueue, socketDeleted, socketListener } = require('./checks/socket');
const { workerConnectionsAlert, nginxRlimitAlert, nginxEmfileAlert } = require('./checks/errorlog');

// The checks. Each entry is one check: its id, what it reads from the facts, and
// either `rule` — a cross-layer rule of roles/tunekit/vars/rules.yml
// (the table `tunekit render` and the Ansible role refuse sets by), evaluated
// over the live values mapped onto the rule's variables by `cases` — or `run`,
// a check of the live host alone (no variable states it). A rule's finding says
// where the values were read, then the rule's own refusal text.
//
// cases(facts, ctx) -> [{ vars, where, fix, ok?, note? }]: broken, a finding at
//                      the rule's level; else the ok finding, if any. No case: the
//                      rule does not apply here, unless orLive: then the live
//                      set's values judge it (lib/live/variables.js)
// run(facts, ctx)   -> findings

const CHECKS = [
  {
    id: 'read', reads: 'the files and commands that failed',
    run: (facts, ctx) => (facts.errors || []).map((e) => ({ id: 'read', level: 'fail', what: e,
      fix: /permission denied|EACCES/i.test(e) && !ctx.root
        ? `${/^nginx -T/.test(e) ? "nginx -T needs root (it opens nginx's pid file and logs)" : 'reading it needs root'}; run: ${ctx.asRoot || 'sudo tunekit doctor'}`
        : 'point --nginx-conf / --app-config at the live files' })),
  },
  {
    id: 'skipped', reads: 'the layers left out',
    run: (facts) => (facts.skipped || []).map((s) => ({ id: 'skipped', level: 'skip', what: `${s.layer}: ${s.why}` })),
  },
  {
    id: 'keepalive-pool', reads: "nginx's proxied locations and their upstream blocks",
    run: keepalivePool,
  },
  {
    id: 'keepalive-http', rule: 'keepalive-http', reads: 'proxy_http_version of each location proxying to an upstream block',
    cases: (facts, ctx) => (facts.nginx ? proxied(facts.nginx) : []).filter(({ up }) => up).map(({ p, up }) => ({
      vars: poolVars(p, up, ctx),
      where: `location ${p.location}: proxy_http_version ${p.httpVersion}, upstream ${up.name} keepalive ${up.keepalive}`,
      fix: 'set `proxy_http_version 1.1;`',
    })),
  },
  {
    id: 'keepalive-connection', rule: 'keepalive-connection', reads: 'the Connection header each location sends upstream',
    // Reported once the location speaks HTTP/1.1 (keepalive-http first).
    cases: (facts, ctx) => (facts.nginx ? proxied(facts.nginx) : [])
      .filter(({ p, up }) => up && !ctx.broken('keepalive-http', poolVars(p, up, ctx)))
      .map(({ p, up }) => ({
        vars: poolVars(p, up, ctx),
        where: p.connectionHeader == null ? `location ${p.location}: the Connection header is not set, so nginx sends its default, "${ctx.connectionDefault}"`
          : `location ${p.location}: Connection "${p.connectionHeader}"`,
        fix: p.connectionHeader == null ? 'set `proxy_set_header Connection $connection_upgrade_or_empty;` from a map ($http_upgrade -> "upgrade", else "")'
          : 'send "" (or "upgrade" for WebSockets, from a map)',
      })),
  },
  {
    id: 'keepalive-race', rule: 'keepalive-race', reads: "each pooled upstream's keepalive_timeout (nginx's default pool from 1.29.7); the app's keepAliveTimeout and keepAliveTimeoutBuffer (live /healthz, else app.json)",
    cases: keepaliveRaceCases,
  },
  { id: 'keepalive-race', reads: "each pooled upstream, when the app's keepAliveTimeout is not known", run: keepaliveRaceUnknown },
  {
    id: 'headers-timeout', rule: 'headers-timeout', reads: "the app's headersTimeout and keepAliveTimeout",
    // Each app nginx proxies to (facts.apps), named when there are several.
    cases: (facts, ctx) => {
      if (!facts.nginx) return [];
      const apps = facts.apps && facts.apps.length ? facts.apps : [facts.app];
      return apps.flatMap((app) => {
        const t = appTimeouts(app);
        if (!t || t.headersMs == null || t.closesEachResponse) return [];
        const on = `app on ${app.target}: `;
        const named = (c) => (apps.length > 1 ? { ...c, where: on + c.where, ...(c.ok && { ok: on + c.ok }) } : c);
        if (t.measured) return measuredHeadersCases(t).map(named);
        return [named({
          vars: { tunekit_app_headers_timeout_ms: t.headersMs, tunekit_app_keepalive_timeout_ms: t.keepAliveMs },
          where: `app headersTimeout ${t.headersMs} ms, keepAliveTimeout ${t.keepAliveMs} ms (${t.from})`,
          fix: `set headersTimeout = keepAliveTimeout + ${Number(ctx.def.tunekit_app_headers_timeout_ms) - Number(ctx.def.tunekit_app_keepalive_timeout_ms)} ms (as tunekit_app_headers_timeout_ms)`,
        })];
      });
    },
  },
  {
    id: 'upgrade-map', rule: 'keepalive-connection', reads: 'the map from $http_upgrade that sets the Connection header, with a keepalive pool',
    cases: upgradeMapCases,
  },
  { id: 'upgrade-map', reads: 'the same map, with no keepalive pool', run: upgradeMapUnpooled },
  { id: 'http3-advertised', reads: "Alt-Svc headers nginx adds (h3 on a UDP port) and its quic listens", run: altSvcServed },
  {
    id: 'keepalive-pool-size', rule: 'keepalive-pool-size', reads: "each upstream's keepalive; worker_connections",
    cases: (facts) => (facts.nginx ? facts.nginx.upstreams : []).filter((u) => u.keepalive).map((u) => ({
      vars: { tunekit_nginx_upstream_keepalive: u.keepalive, tunekit_nginx_worker_connections: facts.nginx.workerConnections },
      where: `upstream ${u.name} keepalive ${u.keepalive}, worker_connections ${facts.nginx.workerConnections}`,
      fix: `lower keepalive in upstream ${u.name} well below worker_connections`,
    })),
  },
  {
    id: 'backlog', rule: 'backlog', reads: "nginx's listen backlogs (unset: nginx's default); net.core.somaxconn",
    cases: listenBacklogCases,
  },
  { id: 'backlog', reads: "nginx's listens that keep nginx's default backlog; net.core.somaxconn", run: listenBacklogIdle },
  {
    id: 'backlog', reads: "the app socket's live accept queue (ss)",
    run: appSocketBacklog,
  },
  {
    id: 'app-backlog', rule: 'app-backlog', reads: "app.json's backlog; net.core.somaxconn", orLive: true,
    cases: (facts) => {
      const asked = facts.app && facts.app.settings ? facts.app.settings.backlog : null;
      if (asked == null || facts.kernel.somaxconn == null) return [];
      return [{
        vars: { tunekit_app_backlog: asked, tunekit_sysctl_net_core_somaxconn: facts.kernel.somaxconn },
        where: `app.json backlog ${asked}, net.core.somaxconn ${facts.kernel.somaxconn}`,
        fix: `raise net.core.somaxconn to ${asked} (tunekit's sysctl drop-in sets them together), or lower the app's backlog`,
      }];
    },
  },
  {
    id: 'nofile', reads: "nginx's worker_rlimit_nofile and worker_connections; the running workers' limits (/proc)",
    run: nginxNofile,
  },
  {
    id: 'nofile', rule: 'nofile', reads: 'worker_rlimit_nofile and worker_connections', orLive: true,
    cases: (facts) => {
      const n = facts.nginx;
      if (!n || n.workerRlimitNofile == null) return [];
      const need = n.workerConnections * 2;
      return [{
        vars: { tunekit_nginx_worker_rlimit_nofile: n.workerRlimitNofile, tunekit_nginx_worker_connections: n.workerConnections },
        where: `nginx worker_rlimit_nofile ${n.workerRlimitNofile}, worker_connections ${n.workerConnections}`,
        fix: `set worker_rlimit_nofile ${need}`,
        ok: `worker_rlimit_nofile ${n.workerRlimitNofile} >= 2 x worker_connections ${n.workerConnections}`,
      }];
    },
  },
  {
    id: 'socket', reads: "the socket files nginx's upstreams name (stat)",
    run: (facts) => facts.sockets.filter((s) => !(s.exists && s.isSocket)).map((s) => (s.exists
      ? { id: 'socket', level: 'fail', what: `${s.path} is not a socket`, fix: 'remove the file that is in the way, then restart the app' }
      : { id: 'socket', level: 'fail', what: `socket ${s.path} does not exist${s.error ? ` (${s.error})` : ''}`, fix: 'start the app; check `journalctl -u tunekit-app`' })),
  },
  {
    id: 'socket-mode', rule: 'socket-mode', reads: "the socket's mode and group",
    cases: (facts) => existing(facts).map((s) => ({
      vars: { tunekit_socket_mode: octal(s.mode), tunekit_socket_group: s.group },
      where: `socket ${s.path} is mode ${octal(s.mode)}, group ${s.group}${s.mode & 0o007 ? ': any local user may connect' : ''}`,
      fix: 'use mode 0660 with a group nginx is in',
      ok: `socket ${s.path} mode ${octal(s.mode)} group ${s.group}`,
    })),
  },
  { id: 'socket-dir', reads: "the socket directory's mode", run: socketDir },
  { id: 'socket-access', reads: "whether nginx's user may connect() to the socket", run: socketAccess },
  { id: 'app-nofile', reads: "the app processes' open-files limits (/proc)", run: appNofile },
  { id: 'worker-connections', reads: "nginx's error log", run: workerConnectionsAlert },
  { id: 'nginx-rlimit', reads: "nginx's error log", run: nginxRlimitAlert },
  { id: 'nginx-emfile', reads: "nginx's error log", run: nginxEmfileAlert },
  { id: 'accept-queue', reads: "the app socket's queue (ss) and its processes' state", run: acceptQueue },
  { id: 'socket-deleted', reads: 'sockets listening on a path whose file is gone', run: socketDeleted },
  { id: 'socket-listener', reads: 'GET /healthz on the socket', run: socketListener },
  {
    id: 'app', reads: 'GET /healthz on the socket',
    run: (facts) => (facts.app && facts.app.healthzError
      ? [{ id: 'app', level: 'skip', what: `GET /healthz on the socket: ${facts.app.healthzError}; timeouts taken from app.json where available` }] : []),
  },
];

// What a check of the live host shows of a rule's cause, folded into the rule's
// finding when it is broken (one cause, one finding): (facts) -> text | null.
const EVIDENCE = { 'nginx-limit-nofile': nginxLimitEvidence };

/**
 * The audit of gathered facts. Pure: facts in, { findings, rules } out.
 * Each rule of the table is evaluated once over the live host: by its check of
 * CHECKS where it has one (a case per upstream, location or listen, in the
 * host's own words), else by the one evaluator over the live set the `# Live:`
 * lines read (lib/live/evaluate.js). rules: { evaluated: [id], total,
 * notEvaluated: [{ id, missing: [{ variable, why }] }], verdicts: [{ id, level,
 * broken, says, values }] }: what doctor could not evaluate here and why, and
 * the verdict on each rule it evaluated (says: the rule's text, when broken; values:
 * the variables it was evaluated over, for a rule with several cases the first
 * broken one's) — what lib/textfile.js writes for Prometheus.
 * asRoot: the command line as root, the fix of a read only root may make.
 * table, definition: the rule table and the definition (a copy, in tests).
 */
function audit(facts, def = config.resolve(), { asRoot = null, table: list = rules.load(), definition = readDefinition() } = {}) {
  const table = new Map(list.map((r) => [r.id, r]));
  const env = createEnv();
  const ctx = {
    def,
    root: isRoot(),
    asRoot,
    upstream: (key) => rules.upstreamDefault(key),
    connectionDefault: facts.nginx && facts.nginx.defaults ? facts.nginx.defaults.connection : rules.upstreamDefault('tunekit_nginx_proxy_connection_default'),
    broken: (id, vars) => rules.broken(table.get(id), vars, env),
  };
  const { findings: out, cases } = runChecks(facts, ctx, table, env);
  const coverage = { evaluated: [], total: list.length, notEvaluated: [], verdicts: [] };
  // Every rule over each app's live set: one view per proxied location, its
  // upstream, the app at its address (lib/live/variables.js appViews).
  const views = appViews(facts).map((v) => {
    const live = liveVariables(v.facts, definition);
    return { name: v.name, live, results: evaluate(live, { table: list, env }) };
  });
  list.forEach((rule, i) => {
    const results = views.map((v) => ({ name: v.name, live: v.live, r: v.results[i] }));
    const done = results.filter(({ r }) => r.evaluated);
    const checks = CHECKS.filter((c) => c.rule === rule.id);
    // A rule with checks of its own is judged by them where they had a case:
    // their findings name the host's own lines.
    const c = checks.length && cases.get(rule.id);
    if (c) {
      coverage.evaluated.push(rule.id);
      coverage.verdicts.push({ id: rule.id, level: rule.level, broken: c.broken, says: c.says, values: c.values });
      return;
    }
    if (checks.length && !checks.some((k) => k.orLive)) {
      // No case: the rule does not apply here (a race needs a pool).
      coverage.notEvaluated.push({ id: rule.id, missing: done.length ? [{ variable: null, why: `nothing on this host to evaluate it over (${checks.map((k) => k.reads).join('; ')})` }] : results[0].r.missing });
      return;
    }
    if (!done.length) {
      coverage.notEvaluated.push({ id: rule.id, missing: results[0].r.missing });
      return;
    }
    coverage.evaluated.push(rule.id);
    // The verdict: the first app that breaks it, else the first evaluated.
    const v = done.find(({ r }) => r.broken) || done[0];
    coverage.verdicts.push({ id: rule.id, level: rule.level, broken: v.r.broken, says: v.r.says, values: Object.fromEntries(rules.reads(rule).map((k) => [k, v.live.values[k]])) });
    // Else the one evaluator's values (checks marked orLive with no case:
    // worker_rlimit_nofile unset is read as the soft limit nginx's workers inherit;
    // the app's backlog from its live accept queue with no app.json). A check of the live
    // host that already reported the rule's cause at the rule's level keeps it one
    // finding; a holding rule adds no line beside the checks'.
    const reported = out.some((f) => checks.some((k) => k.id === f.id) && f.level === rule.level);
    if (!checks.length) out.push(...genericFindings(rule, done, facts, definition));
    else if (v.r.broken && !reported) out.push(...genericFindings(rule, done.filter(({ r }) => r.broken), facts, definition));
  });
  return { findings: out, rules: coverage };
}

/**
 * CHECKS over the facts: their findings, and per rule with checks of its own its
 * verdict ({ count, broken, says, values }: the first broken case's, else the
 * first case's), by rule id.
 */
function runChecks(facts, ctx, table, env) {
  const findings = [];
  const cases = new Map();
  for (const check of CHECKS) {
    if (check.run) {
      findings.push(...check.run(facts, ctx));
      continue;
    }
    const rule = table.get(check.rule);
    if (!rule) continue;
    for (const c of check.cases(facts, ctx)) {
      const seen = cases.get(rule.id);
      const broken = rules.broken(rule, c.vars, env);
      const says = broken ? rules.says(rule, c.vars, env) : null;
      if (!seen || (broken && !seen.broken)) cases.set(rule.id, { count: (seen ? seen.count : 0) + 1, broken, says, values: c.vars });
      else seen.count++;
      if (!broken) {
        if (c.ok) findings.push({ id: check.id, level: 'ok', what: c.ok });
      } else {
        findings.push({ id: check.id, level: rule.level, what: `${c.where}: ${says}${c.note ? `; ${c.note}` : ''}`, fix: c.fix });
      }
    }
  }
  return { findings, cases };
}

/**
 * The findings of a rule the one evaluator read for each app (done: [{ name,
 * live, r }]): apps that read the same values share one finding; where they
 * differ, each finding names its apps.
 */
function genericFindings(rule, done, facts, definition) {
  const groups = new Map();
  for (const d of done) {
    const key = JSON.stringify([d.r.broken, d.r.read]);
    if (!groups.has(key)) groups.set(key, { r: d.r, live: d.live, names: [] });
    groups.get(key).names.push(d.name);
  }
  return [...groups.values()].map(({ r, live, names }) => {
    const f = generic(r, live, definition);
    const seen = r.broken && EVIDENCE[rule.id] && EVIDENCE[rule.id](facts);
    if (seen) f.what += `; ${seen}`;
    return groups.size > 1 ? { ...f, what: `${names.join('; ')}: ${f.what}` } : f;
  });
}

/**
 * A rule evaluated over one app's live set, as a finding. Broken: where the host
 * shows each value (the file and line of its own config, the sysctl, the /proc
 * limits field, the probe), then the rule's text in the host's own terms, the
 * kit's names only as "(the kit's tunekit_...)".
 */
function generic(r, live, definition) {
  const host = r.from.filter((f) => f !== "the kit's own table");
  return r.broken
    ? { id: r.id, level: r.rule.level, what: `${host.join(', ')}: ${inUserWords(r.says, live, definition)}`, fix: `change it where doctor read it: ${host.join('; ')}` }
    : { id: r.id, level: 'ok', what: `holds: ${r.read.filter((x, i) => r.from[i] !== "the kit's own table").join(', ')}` };
}

/** The findings of audit(). */
function analyze(facts, def = config.resolve(), options = {}) {
  return audit(facts, def, options).findings;
}

function summarize(findings) {
  const count = (l) => findings.filter((f) => f.level === l).length;
  return { ok: count('ok'), warn: count('warn'), fail: count('fail'), skip: count('skip') };
}

module.exports = {
  nginxUpstreamDefaults, CHECKS, DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG, gather, analyze, audit, describeNginx, summarize, access, errorLogAlerts, nofile, listeners };
