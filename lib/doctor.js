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

const path = require('node:path');
const config = require('./config');
const rules = require('./config/rules');
const { createEnv } = require('./template');
const { gather, DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG } = require('./live');
const { nofile, isRoot } = require('./live/host');
const { listeners, access } = require('./live/sockets');
const { ERROR_LOG_HOURS, errorLogAlerts, nginxUpstreamDefaults, describeNginx, proxied, pooled } = require('./live/nginx');
const { appTimeouts, closeTime } = require('./live/app');
const { liveVariables } = require('./live/variables');
const { evaluate } = require('./live/evaluate');
const { readDefinition } = require('./config/definition');

/**
 * nginx's user may not connect() to the socket (EACCES): [what, fix]. When the
 * socket's mode or group differs from what app.json binds it with, it was changed
 * after the runner bound it, and restoring them (or restarting the app) is the fix.
 */
function accessFailure(s, settings) {
  const octal = (m) => m.toString(8).padStart(4, '0');
  const what = `EACCES: ${s.nginxAccess.why}: nginx answers 502 with "(13: Permission denied)"`;
  const wantMode = settings && settings.socketMode != null ? parseInt(String(settings.socketMode), 8) : null;
  const wantGroup = settings && settings.socketGroup && !/^\d+$/.test(String(settings.socketGroup)) ? String(settings.socketGroup) : null;
  const changed = [];
  if (wantMode != null && wantMode !== s.mode) changed.push(`mode ${octal(s.mode)} (app.json binds it ${octal(wantMode)})`);
  if (wantGroup && wantGroup !== s.group) changed.push(`group ${s.group} (app.json: ${wantGroup})`);
  if (s.nginxAccess.file === s.path && changed.length) {
    return [`${what}; the socket has ${changed.join(' and ')}: changed after the runner bound it`,
      `restore them (chmod ${octal(wantMode ?? s.mode)} ${s.path}${wantGroup ? `; chgrp ${wantGroup} ${s.path}` : ''}), or restart the app (systemctl restart tunekit-app): its runner binds the socket with mode ${octal(wantMode ?? s.mode)}${wantGroup ? ` and group ${wantGroup}` : ''}`];
  }
  if (s.nginxAccess.file && s.nginxAccess.file !== s.path) {
    return [what, `give ${s.nginxAccess.file} search permission for nginx's user (on a host the app's RuntimeDirectory= with RuntimeDirectoryMode=0750 and group ${wantGroup || s.dirGroup}; restarting the app recreates it)`];
  }
  return [what, `add nginx's user to group ${s.group} and make the directory group-searchable`];
}

// The checks. Each entry is one check: its id, what it reads from the facts, and
// either `rule` — a cross-layer rule of roles/tunekit/vars/rules.yml
// (the table `tunekit render` and the Ansible role refuse sets by), evaluated
// over the live values mapped onto the rule's variables by `cases` — or `run`,
// a check of the live host alone (no variable states it). A rule's finding says
// where the values were read, then the rule's own refusal text.
//
// cases(facts, ctx) -> [{ vars, where, fix, ok?, note? }]: broken, a finding at
//                      the rule's level; else the ok finding, if any
// run(facts, ctx)   -> findings

const octal = (m) => m.toString(8).padStart(4, '0');
const existing = (facts) => facts.sockets.filter((s) => s.exists && s.isSocket);

/** A location's keep-alive settings as the rules' variables (unset: nginx's default, from the definition). */
function poolVars(p, up, ctx) {
  return {
    tunekit_nginx_upstream_keepalive: up.keepalive,
    tunekit_nginx_proxy_http_version: p.httpVersion,
    tunekit_nginx_proxy_connection_default: p.connectionHeader ?? ctx.connectionDefault,
  };
}

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
    cases: (facts, ctx) => {
      const t = appTimeouts(facts.app);
      if (!facts.nginx || !t || t.headersMs == null || t.closesEachResponse) return [];
      if (t.measured) return measuredHeadersCases(t);
      return [{
        vars: { tunekit_app_headers_timeout_ms: t.headersMs, tunekit_app_keepalive_timeout_ms: t.keepAliveMs },
        where: `app headersTimeout ${t.headersMs} ms, keepAliveTimeout ${t.keepAliveMs} ms (${t.from})`,
        fix: `set headersTimeout = keepAliveTimeout + ${Number(ctx.def.tunekit_app_headers_timeout_ms) - Number(ctx.def.tunekit_app_keepalive_timeout_ms)} ms (as tunekit_app_headers_timeout_ms)`,
      }];
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
    id: 'app-backlog', rule: 'app-backlog', reads: "app.json's backlog; net.core.somaxconn",
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
    id: 'nofile', rule: 'nofile', reads: 'worker_rlimit_nofile and worker_connections',
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

/**
 * The audit of gathered facts. Pure: facts in, { findings, rules } out.
 * Each rule of the table is evaluated once over the live host: by its check of
 * CHECKS where it has one (a case per upstream, location or listen, in the
 * host's own words), else by the one evaluator over the live set the `# Live:`
 * lines read (lib/live/evaluate.js). rules: { evaluated: [id], total,
 * notEvaluated: [{ id, missing: [{ variable, why }] }] }, what doctor could not
 * evaluate here and why.
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
  const out = [];
  const cases = new Map();
  for (const check of CHECKS) {
    if (check.run) {
      out.push(...check.run(facts, ctx));
      continue;
    }
    const rule = table.get(check.rule);
    if (!rule) continue;
    for (const c of check.cases(facts, ctx)) {
      cases.set(rule.id, (cases.get(rule.id) || 0) + 1);
      if (!rules.broken(rule, c.vars, env)) {
        if (c.ok) out.push({ id: check.id, level: 'ok', what: c.ok });
      } else {
        out.push({ id: check.id, level: rule.level, what: `${c.where}: ${rules.says(rule, c.vars, env)}${c.note ? `; ${c.note}` : ''}`, fix: c.fix });
      }
    }
  }
  const coverage = { evaluated: [], total: list.length, notEvaluated: [] };
  for (const r of evaluate(liveVariables(facts, definition), { table: list, env })) {
    const checks = CHECKS.filter((c) => c.rule === r.id);
    if (checks.length) {
      // A rule with checks of its own counts where they had a case to evaluate.
      if (cases.get(r.id)) coverage.evaluated.push(r.id);
      else coverage.notEvaluated.push({ id: r.id, missing: r.evaluated ? [{ variable: null, why: `nothing on this host to evaluate it over (${checks.map((c) => c.reads).join('; ')})` }] : r.missing });
      continue;
    }
    if (!r.evaluated) {
      coverage.notEvaluated.push({ id: r.id, missing: r.missing });
      continue;
    }
    coverage.evaluated.push(r.id);
    out.push(r.broken
      ? { id: r.id, level: r.rule.level, what: `${r.read.join(', ')}: ${r.says}`, fix: `change it where doctor read it: ${r.from.filter((f) => f !== "the kit's own table").join('; ')}` }
      : { id: r.id, level: 'ok', what: `holds: ${r.read.filter((x, i) => r.from[i] !== "the kit's own table").join(', ')}` });
  }
  return { findings: out, rules: coverage };
}

/** The findings of audit(). */
function analyze(facts, def = config.resolve(), options = {}) {
  return audit(facts, def, options).findings;
}

function keepalivePool(facts, ctx) {
  if (!facts.nginx) return [];
  const d = facts.nginx.defaults || nginxUpstreamDefaults(null);
  return proxied(facts.nginx).flatMap(({ p, up }) => {
    if (!up) {
      // An implicit upstream (proxy_pass to an address) never pools, on any
      // version; from 1.29.7 it is the one way left to have no pool by accident.
      const why = d.pooledByDefault
        ? `nginx ${d.version} pools only upstream{} blocks by default (from ${d.since}), so this location gets none of it`
        : `from nginx ${d.since} (stable 1.30) an upstream{} block pools by default, an implicit upstream still does not`;
      return [{ id: 'keepalive-pool', level: 'warn', what: `location ${p.location} proxies to ${p.proxyPass} directly (an implicit upstream, no upstream{} block): no keep-alive pool on any nginx version, every request opens a new connection to the app; ${why}`,
        fix: `proxy_pass to an upstream block with \`keepalive ${ctx.def.tunekit_nginx_upstream_keepalive};\` and a keepalive_timeout under the app's keepAliveTimeout (tunekit render does)` }];
    }
    if (!up.keepalive) {
      return [{ id: 'keepalive-pool', level: 'warn', what: `upstream ${up.name} has no keepalive directive: nginx${d.version ? ` ${d.version}` : ''} opens a connection per request (from ${d.since} a block pools by default)`,
        fix: `add \`keepalive ${ctx.def.tunekit_nginx_upstream_keepalive};\` to the upstream block (tunekit_nginx_upstream_keepalive)` }];
    }
    const vars = poolVars(p, up, ctx);
    if (ctx.broken('keepalive-http', vars) || ctx.broken('keepalive-connection', vars)) return [];
    const how = up.keepaliveByDefault ? `nginx ${d.version}'s default pool: no keepalive line, keepalive ${up.keepalive} local` : `keepalive ${up.keepalive}`;
    return [{ id: 'keepalive-pool', level: 'ok', what: `location ${p.location} reuses upstream ${up.name} connections (${how}, HTTP/1.1, Connection ${JSON.stringify(p.connectionHeader ?? ctx.connectionDefault)})` }];
  });
}

/** "nginx 1.30.6 made this race the default: ...", where the pool is nginx's default one. */
function defaultPoolNote(facts, up) {
  const d = facts.nginx.defaults;
  if (!up.keepaliveByDefault || !d) return '';
  return `nginx ${d.version} keeps upstream ${up.name}'s connections with no keepalive line (from ${d.since}, stable 1.30: keepalive ${up.keepalive}, ` +
    `keepalive_timeout ${up.keepaliveTimeoutS}s): nginx 1.30 made this race the default in front of a Node app left at its defaults; `;
}

function keepaliveRaceCases(facts, ctx) {
  const t = appTimeouts(facts.app);
  if (!facts.nginx || !t || t.closesEachResponse) return [];
  // A lower bound (the probe's budget ended first) decides only when it is already past nginx's.
  return pooled(facts.nginx).filter((up) => !t.atLeast || t.keepAliveMs > up.keepaliveTimeoutS * 1000).map((up) => {
    const nginxMs = up.keepaliveTimeoutS * 1000;
    if (t.measured) return measuredRaceCase(facts, up, t);
    return {
      vars: {
        tunekit_app_keepalive_timeout_ms: t.keepAliveMs,
        tunekit_app_keepalive_buffer_ms: t.bufferMs,
        tunekit_nginx_upstream_keepalive_timeout_s: up.keepaliveTimeoutS,
      },
      where: `${defaultPoolNote(facts, up)}app keepAliveTimeout ${closeTime(t)} (${t.from}), nginx upstream ${up.name} keepalive_timeout ${up.keepaliveTimeoutS}s`,
      note: 'nginx answers 502 to the requests it does not retry (POST); on a Unix socket it logs "recv() failed (104: Connection reset by peer)"',
      fix: `set the app's keepAliveTimeout above ${nginxMs} ms (tunekit derives ${nginxMs + ctx.def.tunekit_app_keepalive_margin_s * 1000}: + tunekit_app_keepalive_margin_s), or lower nginx's keepalive_timeout`,
      ok: `app closes idle connections at ${closeTime(t)} (${t.from}) > nginx upstream ${up.name} keepalive_timeout ${up.keepaliveTimeoutS}s`,
    };
  });
}

/**
 * headers-timeout for a measured app: a wait still going when the probe stopped
 * decides only when it is already past the idle close (it then holds).
 */
function measuredHeadersCases(t) {
  if ((t.headersAtLeast && t.headersMs <= t.keepAliveMs) || t.atLeast) return [];
  return [{
    vars: { tunekit_app_headers_timeout_ms: t.headersMs, tunekit_app_keepalive_timeout_ms: t.keepAliveMs },
    where: `the app's headers wait ${t.headersAtLeast ? 'at least ' : ''}${t.headersMs} ms (${t.headersFrom}), its idle close ${t.keepAliveMs} ms`,
    fix: 'in the app, set server.headersTimeout above server.keepAliveTimeout (the kit\'s tunekit_app_headers_timeout_ms)',
    ok: `the app's headers wait ${t.headersAtLeast ? 'at least ' : ''}${t.headersMs} ms (${t.headersFrom}) > its idle close ${t.keepAliveMs} ms`,
  }];
}

/** The race, for an app the kit did not deploy: in its own terms (server.keepAliveTimeout, the nginx line). */
function measuredRaceCase(facts, up, t) {
  const nginxMs = up.keepaliveTimeoutS * 1000;
  return {
    vars: {
      tunekit_app_keepalive_timeout_ms: t.keepAliveMs,
      tunekit_app_keepalive_buffer_ms: 0,
      tunekit_nginx_upstream_keepalive_timeout_s: up.keepaliveTimeoutS,
    },
    where: `${defaultPoolNote(facts, up)}the app closes idle connections at ${t.keepAliveMs} ms (${t.from}); nginx upstream ${up.name} keeps them ${up.keepaliveTimeoutS}s (${up.keepaliveTimeoutAt})`,
    note: 'nginx answers 502 to the requests it does not retry (POST); on a Unix socket it logs "recv() failed (104: Connection reset by peer)"',
    fix: `in the app, set server.keepAliveTimeout above ${nginxMs} ms (Node closes at keepAliveTimeout + its 1 s buffer from 20.18 / 22.9), ` +
      `or lower keepalive_timeout in upstream ${up.name} below ${Math.floor(t.keepAliveMs / 1000)}s (the kit's tunekit_nginx_upstream_keepalive_timeout_s / tunekit_app_keepalive_timeout_ms)`,
    ok: `the app closes idle connections at ${t.keepAliveMs} ms (${t.from}) > nginx upstream ${up.name} keepalive_timeout ${up.keepaliveTimeoutS}s (${up.keepaliveTimeoutAt})`,
  };
}

/**
 * A pool and no word of the app's keepAliveTimeout (no app.json, no /healthz
 * that reports it: any app but the kit's): Node's default is what an app left
 * alone has, and it is far under nginx's. A warning, not the rule's failure:
 * the app may set its own.
 */
function keepaliveRaceUnknown(facts, ctx) {
  const t = appTimeouts(facts.app);
  if (facts.nginx && t && t.atLeast) {
    return pooled(facts.nginx).filter((up) => t.keepAliveMs <= up.keepaliveTimeoutS * 1000).map((up) => ({
      id: 'keepalive-race', level: 'warn',
      what: `nginx upstream ${up.name} keeps idle connections ${up.keepaliveTimeoutS}s (${up.keepaliveTimeoutAt}); the app (${t.from}) may close them first or not: not known`,
      fix: `make sure the app's server.keepAliveTimeout is above ${up.keepaliveTimeoutS * 1000} ms, or point doctor at its app.json (--app-config)`,
    }));
  }
  if (!facts.nginx || t) return [];
  const nodeDefault = ctx.upstream('tunekit_app_keepalive_timeout_ms');
  return pooled(facts.nginx).filter((up) => up.keepaliveTimeoutS * 1000 >= nodeDefault).map((up) => ({
    id: 'keepalive-race', level: 'warn',
    what: `${defaultPoolNote(facts, up)}nginx upstream ${up.name} keeps idle connections ${up.keepaliveTimeoutS}s; the app's keepAliveTimeout is not known here ` +
      `(no app.json, and GET /healthz did not report it): Node's default is ${nodeDefault} ms (+ 1000 ms keepAliveTimeoutBuffer from Node 20.18 and 22.9; ` +
      '65 s only from a future major, https://github.com/nodejs/node/pull/62782), so an app left at it closes first and POSTs nginx sends on a closing connection get 502',
    fix: `set the app's server.keepAliveTimeout above ${up.keepaliveTimeoutS * 1000} ms (tunekit's runner does: ${ctx.def.tunekit_app_keepalive_timeout_ms} ms), or \`keepalive_timeout\` in upstream ${up.name} under the app's; point doctor at its app.json (--app-config)`,
  }));
}

// The map's value for plain requests is what tunekit_nginx_proxy_connection_default renders.
function upgradeMap(facts) {
  const wsMap = facts.nginx && facts.nginx.maps.find((m) => m.source === '$http_upgrade');
  if (!wsMap) return null;
  return {
    wsMap,
    closes: wsMap.entries.some((e) => /^close$/i.test(e[e.length - 1])),
    pool: Math.max(0, ...facts.nginx.upstreams.map((u) => u.keepalive)),
  };
}

function upgradeMapCases(facts) {
  const m = upgradeMap(facts);
  if (!m || (m.closes && !m.pool)) return [];
  return [{
    vars: { tunekit_nginx_upstream_keepalive: m.pool, tunekit_nginx_proxy_connection_default: m.closes ? 'close' : '' },
    where: `map $http_upgrade ${m.wsMap.variable} sends "close" for plain requests`,
    fix: 'map the default to "" instead of close',
    ok: `map $http_upgrade ${m.wsMap.variable} sends "upgrade" only when asked`,
  }];
}

function upgradeMapUnpooled(facts) {
  const m = upgradeMap(facts);
  if (!m || !m.closes || m.pool) return [];
  return [{ id: 'upgrade-map', level: 'warn', what: `map $http_upgrade ${m.wsMap.variable} sends "close" for plain requests (harmless only while there is no keepalive pool)`,
    fix: 'map the default to "" instead of close' }];
}

/** nginx's TCP listen backlogs (a quic listen has no accept queue), unset ones at nginx's default (from the definition). */
function listens(facts, ctx) {
  const nginxDefault = ctx.upstream('tunekit_listen_backlog');
  return (facts.nginx ? facts.nginx.listens : []).filter((l) => !l.quic).map((l) => ({
    ...l, asked: l.backlog ?? nginxDefault, idle: (l.backlog ?? nginxDefault) === nginxDefault && facts.kernel.somaxconn > nginxDefault,
  }));
}

function listenBacklogCases(facts, ctx) {
  const somaxconn = facts.kernel.somaxconn;
  return listens(facts, ctx).map((l) => {
    const liveQ = (facts.listeners || []).find((x) => x.kind === 'tcp' && (x.local === l.address || x.local.endsWith(`:${l.address.split(':').pop()}`)));
    return {
      vars: { tunekit_listen_backlog: l.asked, tunekit_sysctl_net_core_somaxconn: somaxconn },
      where: `nginx listen ${l.address} asks backlog ${l.asked}, net.core.somaxconn is ${somaxconn}`,
      fix: `raise net.core.somaxconn to ${l.asked} (tunekit's sysctl drop-in sets them together)`,
      ok: l.idle ? null : `nginx listen ${l.address}: accept queue ${Math.min(l.asked, somaxconn)}${liveQ ? ` (live: ${liveQ.backlog})` : ''}`,
    };
  });
}

// Not a broken rule: somaxconn was raised for nothing, the listen keeps nginx's default.
function listenBacklogIdle(facts, ctx) {
  return listens(facts, ctx).filter((l) => l.idle).map((l) => ({ id: 'backlog', level: 'warn',
    what: `nginx listen ${l.address} uses backlog ${l.asked} (nginx's default), so net.core.somaxconn ${facts.kernel.somaxconn} buys nothing`,
    fix: `add backlog=${facts.kernel.somaxconn} to the listen directive` }));
}

/** Alt-Svc advertises HTTP/3 on a UDP port: a `listen PORT quic` must serve it. */
function altSvcServed(facts) {
  const n = facts.nginx;
  if (!n || !n.altSvc) return [];
  const portOf = (address) => String(address).split(':').pop();
  return n.altSvc.flatMap((value) => {
    const ports = [...String(value).matchAll(/h3=":(\d+)"/g)].map((m) => m[1]);
    if (!ports.length) return [];
    const missing = ports.filter((p) => !n.listens.some((l) => l.quic && portOf(l.address) === p));
    return missing.length
      ? [{ id: 'http3-advertised', level: 'fail',
        what: `Alt-Svc "${value}" advertises HTTP/3 on UDP port ${missing.join(', ')}, but no \`listen ... quic\` serves it: clients try QUIC, wait for it to time out, and fall back to TCP`,
        fix: 'add `listen PORT quic` beside the TLS listen (tunekit_nginx_http3: true renders both), or remove the Alt-Svc header' }]
      : [{ id: 'http3-advertised', level: 'ok', what: `Alt-Svc h3 on UDP port ${ports.join(', ')} is served by a quic listen` }];
  });
}

function appSocketBacklog(facts) {
  if (!facts.nginx) return [];
  const somaxconn = facts.kernel.somaxconn;
  const asked = facts.app && facts.app.settings ? facts.app.settings.backlog : null;
  return facts.sockets.filter((s) => s.backlog != null).map((s) => (s.backlog < Math.min(somaxconn, 1024) && (asked == null || asked > s.backlog)
    ? { id: 'backlog', level: 'warn', what: `app socket ${s.path}: live accept queue ${s.backlog}, somaxconn ${somaxconn}`, fix: 'pass the listen backlog the sysctl allows (tunekit_listen_backlog)' }
    : { id: 'backlog', level: 'ok', what: `app socket ${s.path}: live accept queue ${s.backlog} (somaxconn ${somaxconn})` }));
}

function nginxNofile(facts) {
  const n = facts.nginx;
  if (!n) return [];
  const need = n.workerConnections * 2;
  const out = [];
  if (n.workerRlimitNofile == null) {
    out.push({ id: 'nofile', level: 'warn', what: 'worker_rlimit_nofile is not set; workers inherit the service\'s limit', fix: `set worker_rlimit_nofile ${need} (2 x worker_connections ${n.workerConnections})` });
  }
  if (n.workerNofile && n.workerNofile.length) {
    const low = Math.min(...n.workerNofile);
    out.push(low < need
      ? { id: 'nofile', level: 'fail', what: `a running nginx worker has an open-files limit of ${low} < ${need}`, fix: 'raise LimitNOFILE in nginx.service.d and worker_rlimit_nofile, then reload' }
      : { id: 'nofile', level: 'ok', what: `running nginx workers may open ${low} files` });
  }
  return out;
}

function socketDir(facts) {
  return existing(facts).filter((s) => s.dirMode & 0o007).map((s) => ({ id: 'socket-dir', level: 'warn',
    what: `${path.dirname(s.path)} is mode ${s.dirMode.toString(8)}: others may search it`, fix: 'use mode 0750 (RuntimeDirectoryMode)' }));
}

function socketAccess(facts) {
  return existing(facts).filter((s) => s.nginxAccess).map((s) => (s.nginxAccess.ok
    ? { id: 'socket-access', level: 'ok', what: `nginx's user may connect to ${s.path}` }
    : { id: 'socket-access', level: 'fail', ...failure(accessFailure(s, facts.app && facts.app.settings)) }));
}

const failure = ([what, fix]) => ({ what, fix });

function appNofile(facts, ctx) {
  return existing(facts).filter((s) => s.nofile && s.nofile.length).map((s) => {
    const low = Math.min(...s.nofile);
    return low <= 1024
      ? { id: 'app-nofile', level: 'warn', what: `an app process on ${s.path} has an open-files limit of ${low}: near ${low} connections accept() fails with EMFILE, and the connections past it are closed unread (libuv's reserve descriptor; the worker logs open-files-limit when it reaches it); nginx answers 502 with "recv() failed (104: Connection reset by peer)"`,
        fix: `set LimitNOFILE=${ctx.def.tunekit_app_limit_nofile} in the unit (tunekit_app_limit_nofile)` }
      : { id: 'app-nofile', level: 'ok', what: `app processes may open ${low} files` };
  });
}

// What nginx's error log says it ran out of (no live check can see a past peak).
const alert = (facts, id) => facts.nginx && facts.nginx.alerts && facts.nginx.alerts[id];

function workerConnectionsAlert(facts) {
  const a = alert(facts, 'worker-connections');
  const wc = a && facts.nginx.workerConnections;
  return a ? [{ id: 'worker-connections', level: 'fail',
    what: `nginx ran out of connections ${a.count} time(s) in the last ${ERROR_LOG_HOURS} h: "${a.last}"; each worker holds a client connection and an upstream one per proxied request, so worker_connections ${wc} serve about ${Math.floor(wc / 2)} requests at once; past that nginx closes idle keep-alive connections, then stops accepting: new clients wait in the listen queue or are closed unanswered`,
    fix: 'raise worker_connections (tunekit_nginx_worker_connections; ansible/profiles/large.yml has 16384), and worker_rlimit_nofile with it (the kit derives 2x)' }] : [];
}

function nginxRlimitAlert(facts) {
  const a = alert(facts, 'nginx-rlimit');
  return a ? [{ id: 'nginx-rlimit', level: 'warn', what: `nginx could not raise its open-files limit (${a.count} time(s) in the last ${ERROR_LOG_HOURS} h): "${a.last}"; its workers run with the limit they inherited`,
    fix: 'raise the hard limit nginx starts with: LimitNOFILE= in nginx.service (the kit renders a drop-in that covers worker_rlimit_nofile)' }] : [];
}

function nginxEmfileAlert(facts) {
  const a = alert(facts, 'nginx-emfile');
  return a ? [{ id: 'nginx-emfile', level: 'fail', what: `nginx ran out of file descriptors ${a.count} time(s) in the last ${ERROR_LOG_HOURS} h: "${a.last}"`,
    fix: 'raise worker_rlimit_nofile (the kit derives 2 x worker_connections) and nginx.service\'s LimitNOFILE' }] : [];
}

// A full accept queue: on a Unix socket connect() does not wait, it fails at once.
function acceptQueue(facts) {
  return facts.sockets.filter((s) => s.queued != null && s.backlog != null && s.queued > s.backlog).map((s) => {
    const stopped = s.stopped && s.stopped.length;
    return { id: 'accept-queue', level: 'fail',
      what: `accept queue of ${s.path} is full (${s.queued} connections waiting, backlog ${s.backlog}): ${stopped ? `app processes ${s.stopped.join(', ')} are stopped (state T: SIGSTOP, a debugger)` : 'the app\'s workers are not accepting (a blocked event loop, or all busy)'}; nginx's connect() fails at once with "(11: Resource temporarily unavailable)" (EAGAIN; a Unix socket does not wait as TCP does): 502`,
      fix: stopped ? `resume them (kill -CONT ${s.stopped.join(' ')}) or restart the app; find what stopped them`
        : 'find what blocks the workers (their CPU, a synchronous call); a larger backlog (tunekit_listen_backlog, up to net.core.somaxconn) only absorbs bursts' };
  });
}

// The socket file is gone but the app still listens on the (deleted) path.
function socketDeleted(facts) {
  return facts.sockets.filter((s) => !s.exists && s.pids && s.pids.length).map((s) => ({ id: 'socket-deleted', level: 'fail',
    what: `socket file ${s.path} was deleted while app processes (pids ${[...new Set(s.pids)].join(', ')}) still listen on it: nginx's connect() fails with "(2: No such file or directory)" for every new upstream connection (502)`,
    fix: deletedSocketFix(facts.app && facts.app.settings) }));
}

// Nothing accepts on an existing socket: the app is stopped (a stale socket file).
function socketListener(facts) {
  const first = existing(facts)[0];
  if (!first || !facts.app || facts.app.healthzError !== 'ECONNREFUSED') return [];
  return [{ id: 'socket-listener', level: 'fail', what: `socket ${first.path} exists but nothing accepts on it (ECONNREFUSED): the app is not running; nginx answers 502 with "(111: Connection refused)"`,
    fix: 'start the app (systemctl start tunekit-app); its runner replaces a socket file nobody listens on' }];
}

/** What to do about a deleted socket file: the runner binds it again, unless it cannot. */
function deletedSocketFix(settings) {
  const restart = 'restart the app (systemctl restart tunekit-app) so that it binds the path again; find what deleted it (a tmpfiles rule, an rm)';
  if (!settings) return `the kit's runner binds the path again within socketCheckMs (1000 ms by default); if this persists: ${restart}`;
  if (settings.socketCheckMs == null) return `this app.json has no socketCheckMs: its runner, older than this kit, does not bind the path again by itself; ${restart}`;
  if (settings.socketCheckMs === 0) return `socketCheckMs is 0 in app.json (tunekit_app_socket_check_ms): the runner's check is off; ${restart}`;
  if (settings.strategy === 'round-robin') return `with strategy round-robin Node's cluster holds the socket and the runner does not bind the path again; ${restart}`;
  return `the runner binds the path again within socketCheckMs (${settings.socketCheckMs} ms) and logs socket-rebound; if this persists, the running runner is older than this app.json or its check failed (socket-rebind-failed in its log): ${restart}`;
}

function summarize(findings) {
  const count = (l) => findings.filter((f) => f.level === l).length;
  return { ok: count('ok'), warn: count('warn'), fail: count('fail'), skip: count('skip') };
}

module.exports = {
  nginxUpstreamDefaults, CHECKS, DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG, gather, analyze, audit, describeNginx, summarize, access, errorLogAlerts, nofile, listeners };
