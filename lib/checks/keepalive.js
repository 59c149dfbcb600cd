'use strict';
// doctor's checks of the keep-alive path from nginx to the app: the pool (an
// upstream{} block that keeps connections, HTTP/1.1, no "Connection: close"),
// the race between nginx's keepalive_timeout and the app's idle close, the
// app's headers timeout, the $http_upgrade map. Each is an entry of CHECKS
// (lib/doctor.js): cases(facts, ctx) over a rule of the table, or run(facts, ctx).

const { nginxUpstreamDefaults, proxied, pooled } = require('../live/nginx');
const { appTimeouts, closeTime } = require('../live/app');

/** A location's keep-alive settings as the rules' variables (unset: nginx's default, from the definition). */
function poolVars(p, up, ctx) {
  return {
    tunekit_nginx_upstream_keepalive: up.keepalive,
    tunekit_nginx_proxy_http_version: p.httpVersion,
    tunekit_nginx_proxy_connection_default: p.connectionHeader ?? ctx.connectionDefault,
  };
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

/**
 * The app values (app.json, /healthz, the probe) of the app an upstream block
 * reaches: the app at its first server (facts.apps), else the host's one app.
 */
function appOf(facts, up) {
  const a = (facts.apps || []).find((x) => x.target === up.servers[0]);
  return a ? { settings: a.settings, healthz: a.healthz, probe: a.probe } : facts.app;
}

function keepaliveRaceCases(facts, ctx) {
  if (!facts.nginx) return [];
  // A lower bound (the probe's budget ended first) decides only when it is already past nginx's.
  return pooled(facts.nginx).map((up) => ({ up, t: appTimeouts(appOf(facts, up)) }))
    .filter(({ up, t }) => t && !t.closesEachResponse && (!t.atLeast || t.keepAliveMs > up.keepaliveTimeoutS * 1000)).map(({ up, t }) => {
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
  if (!facts.nginx) return [];
  const nodeDefault = ctx.upstream('tunekit_app_keepalive_timeout_ms');
  return pooled(facts.nginx).flatMap((up) => {
    const t = appTimeouts(appOf(facts, up));
    if (t && t.atLeast) {
      return t.keepAliveMs <= up.keepaliveTimeoutS * 1000 ? [{
        id: 'keepalive-race', level: 'warn',
        what: `nginx upstream ${up.name} keeps idle connections ${up.keepaliveTimeoutS}s (${up.keepaliveTimeoutAt}); the app (${t.from}) may close them first or not: not known`,
        fix: `make sure the app's server.keepAliveTimeout is above ${up.keepaliveTimeoutS * 1000} ms, or point doctor at its app.json (--app-config)`,
      }] : [];
    }
    return t || up.keepaliveTimeoutS * 1000 < nodeDefault ? [] : [raceUnknown(facts, ctx, up, nodeDefault)];
  });
}

/** A pool in front of an app whose keepAliveTimeout nothing reports: Node's default is what it has when left alone. */
function raceUnknown(facts, ctx, up, nodeDefault) {
  return {
    id: 'keepalive-race', level: 'warn',
    what: `${defaultPoolNote(facts, up)}nginx upstream ${up.name} keeps idle connections ${up.keepaliveTimeoutS}s; the app's keepAliveTimeout is not known here ` +
      `(no app.json, and GET /healthz did not report it): Node's default is ${nodeDefault} ms (+ 1000 ms keepAliveTimeoutBuffer from Node 20.18 and 22.9; ` +
      '65 s only from a future major, https://github.com/nodejs/node/pull/62782), so an app left at it closes first and POSTs nginx sends on a closing connection get 502',
    fix: `set the app's server.keepAliveTimeout above ${up.keepaliveTimeoutS * 1000} ms (tunekit's runner does: ${ctx.def.tunekit_app_keepalive_timeout_ms} ms), or \`keepalive_timeout\` in upstream ${up.name} under the app's; point doctor at its app.json (--app-config)`,
  };
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

module.exports = { poolVars, keepalivePool, keepaliveRaceCases, measuredHeadersCases, keepaliveRaceUnknown, upgradeMapCases, upgradeMapUnpooled };
