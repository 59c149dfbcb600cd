'use strict';
// The live variable set: the gathered facts of a host as the rules' tunekit_*
// variables, read by each variable's `# Live:` line (lib/config/live.js has the
// grammar). Pure: facts in, { values, from, missing, source } out —
//   values:  { tunekit_x: value } for every variable the host shows
//   from:    { tunekit_x: where it was read, in the host's terms ("keepalive_timeout
//            65s at /etc/nginx/conf.d/app.conf:4", "nginx's default: ...") }
//   missing: { tunekit_x: why it was not read (the layer this host lacks, or the
//            line's own "no: why") }
//   source:  { tunekit_x: the source of its # Live: line it was read from }
// Where a host runs several apps, each proxied location is an app's path (its
// server{}, its upstream{}, the app at its address): appViews() gives the facts
// as each sees them, and doctor evaluates the rules over each; facts with no
// apps gathered read the first location that proxies to an upstream block.

const nginxconf = require('../nginxconf');
const config = require('../config');
const rules = require('../config/rules');
const { readDefinition } = require('../config/definition');
const { term } = require('../config/live');
const { probedTimeouts } = require('./app');
const { appTarget } = require('./nginx');

const octal = (m) => m.toString(8).padStart(4, '0');

/** A value, or why there is none: the readers' one return shape. */
const found = (value, from) => ({ value, from });
const none = (why) => ({ why });

/**
 * nginx's tree nodes along each app's path, one route per location that proxies:
 * the location, its ancestors, its server{}, the upstream{} block it proxies to
 * (or null) and the address it reaches (that block's first server, else
 * proxy_pass's own address).
 */
function appPaths(tree) {
  const { findAll, child, where: at } = nginxconf;
  const upstreams = findAll(tree, 'upstream').map(({ node }) => node);
  const locations = findAll(tree, 'location').filter(({ node }) => child(node.children, 'proxy_pass'));
  return locations.map((loc) => {
    const target = String(child(loc.node.children, 'proxy_pass').args[0]);
    const upstream = upstreams.find((u) => target === `http://${u.args[0]}` || target.startsWith(`http://${u.args[0]}/`)) || null;
    const server = upstream && child(upstream.children, 'server');
    return {
      location: loc.node, ancestors: loc.ancestors, server: [...loc.ancestors].reverse().find((a) => a.name === 'server') || null, upstream,
      target: server ? String(server.args[0]) : appTarget(target),
      name: `location ${loc.node.args.join(' ')} at ${at(loc.node)}`,
    };
  });
}

/** The app's path where a host has one: the first location that proxies to an upstream block, else the first that proxies. */
function appPath(tree) {
  const routes = appPaths(tree);
  return routes.find((r) => r.upstream) || routes[0] || null;
}

/**
 * The facts as each app sees them, one view per proxied location: its route
 * through nginx, and of the app it reaches (facts.apps, by address) its socket,
 * app.json, /healthz, probe, processes' limits, service and Node version.
 * [{ name, facts }]; name: "app on unix:/run/b.sock (location /b/ at FILE:LINE)",
 * null where the host shows one path only (no apps gathered, no proxied location).
 */
function appViews(facts) {
  const tree = facts.nginx && facts.nginx.tree;
  const routes = tree && facts.apps ? appPaths(tree) : [];
  if (!routes.length) return [{ name: null, facts }];
  return routes.map((route) => {
    const app = facts.apps.find((a) => a.target === route.target) || null;
    return {
      name: `app on ${route.target} (${route.name})`,
      facts: {
        ...facts,
        route,
        sockets: app && app.socket ? facts.sockets.filter((x) => x.path === app.socket) : [],
        app: app ? { settings: app.settings, healthz: app.healthz, probe: app.probe, node: app.node } : { settings: null, healthz: null, probe: null },
        limits: { ...facts.limits, app: (app && app.limits) || {} },
        systemd: app ? app.systemd : null,
        tcpListener: app && app.address && app.backlog != null ? { local: route.target, backlog: app.backlog } : null,
      },
    };
  });
}

/** The nodes a context's directives are looked for in, nearest first. */
function contextNodes(tree, route, context) {
  const { child } = nginxconf;
  const top = { name: 'main', args: [], children: tree };
  switch (context) {
    case 'main': return [top];
    case 'events': return [child(tree, 'events')].filter(Boolean);
    case 'http': return [child(tree, 'http')].filter(Boolean);
    case 'server': return route && route.server ? [route.server] : [];
    case 'upstream': return route && route.upstream ? [route.upstream] : [];
    default: return route ? [route.location, ...[...route.ancestors].reverse()] : [];
  }
}

const where = (node) => `${node.name} ${node.args.join(' ')} at ${nginxconf.where(node)}`.replace('  ', ' ');
const portOf = (address) => {
  const m = /(?:^|:)(\d+)$/.exec(String(address));
  return m ? Number(m[1]) : null;
};

/** The kind of upstream its servers make: per-worker (PATH.1 … PATH.N), uds (a unix: socket), tcp. */
function upstreamKind(servers) {
  const unix = servers.filter((s) => s.args[0].startsWith('unix:'));
  if (unix.length > 1 && unix.every((s) => /\.\d+$/.test(s.args[0]))) return 'per-worker';
  return unix.length ? 'uds' : 'tcp';
}

/** Whether nginx makes this server the default for its port: default_server, or the first server{} that listens on it. */
function defaultServer(tree, server) {
  const listens = server.children.filter((c) => c.name === 'listen');
  if (listens.some((l) => l.args.includes('default_server') || l.args.includes('default'))) return true;
  const ports = listens.map((l) => portOf(l.args[0]) ?? 80);
  if (!listens.length) ports.push(80);
  const servers = nginxconf.findAll(tree, 'server').map(({ node }) => node).filter((n) => n.children);
  return ports.some((port) => servers.find((s) => {
    const ls = s.children.filter((c) => c.name === 'listen');
    return ls.length ? ls.some((l) => (portOf(l.args[0]) ?? 80) === port) : port === 80;
  }) === server);
}

/** The value of a map's default where a directive sets a variable the config maps ($connection_upgrade). */
function mapped(tree, value) {
  if (!String(value).startsWith('$')) return { value, note: '' };
  const map = nginxconf.findAll(tree, 'map').map(({ node }) => node).find((m) => m.args[1] === value);
  const dflt = map && map.children.find((c) => c.name === 'default');
  return dflt ? { value: dflt.args[0] ?? '', note: ` (${value}: the default of map ${map.args[0]} ${value} at ${nginxconf.where(map)})` } : { value, note: '' };
}

/** What nginx uses when a directive the line names is not set: for its version where that changed, else the definition's. */
function nginxDefault(key, s, nginx) {
  const d = nginx.defaults || {};
  const byVersion = { keepalive: d.keepalive, proxy_http_version: d.httpVersion, proxy_set_header: d.connection };
  if (!s.param && byVersion[s.directive] != null) return byVersion[s.directive];
  if (s.directive === 'proxy_set_header' && byVersion.proxy_set_header != null) return byVersion.proxy_set_header;
  return rules.upstreamDefault(key);
}

/** An nginx directive along the app's path (lib/config/live.js: nginx DIRECTIVE[ PARAM] in CONTEXT[ as SHAPE]). */
function readNginx(key, s, facts, entry) {
  const nginx = facts.nginx;
  if (!nginx) return none('nginx was not read');
  if (s.version) return nginx.version ? found(nginx.version, `nginx -V: ${nginx.version}`) : none("nginx -V did not say nginx's version");
  if (s.module) return nginx.configure ? found(nginx.configure.includes(s.module), `nginx -V: ${nginx.configure.includes(s.module) ? '' : 'no '}--with-${s.module}`) : none('nginx -V was not read');
  const tree = nginx.tree;
  if (!tree) return none("nginx's config tree was not kept");
  const route = 'route' in facts ? facts.route : appPath(tree);
  const nodes = contextNodes(tree, route, s.context);
  if (!nodes.length) return none(`no ${s.context} on the app's path (no location proxies to ${s.context === 'upstream' ? 'an upstream block' : 'the app'})`);
  const all = nodes[0].children ? nodes.flatMap((n) => (n.children || []).filter((c) => c.name === s.directive).map((c) => ({ c, n }))) : [];
  const nearest = (pred) => all.find(({ c }) => pred(c));
  const flag = s.param && !s.param.endsWith('=') && s.directive !== 'proxy_set_header';
  const shape = (c, raw) => {
    switch (s.shape) {
      case 'seconds': return nginxconf.seconds(raw);
      case 'number': return Number(raw);
      case 'flag': return Boolean(c);
      case 'port': return c ? portOf(c.args[0]) : null;
      case 'path': return String(raw).replace(/^unix:/, '');
      default: return raw;
    }
  };
  if (s.shape === 'kind') {
    const servers = all.map(({ c }) => c);
    return servers.length ? found(upstreamKind(servers), servers.map(where).join('; ')) : none(`upstream ${route.upstream.args[0]} lists no server`);
  }
  if (s.shape === 'default-server') {
    const server = nodes[0];
    const yes = defaultServer(tree, server);
    return found(yes, `server{} at ${nginxconf.where(server)} is ${yes ? '' : 'not '}the default for its port`);
  }
  let hit;
  let raw;
  if (s.directive === 'proxy_set_header') {
    hit = [...all].reverse().find(({ c }) => String(c.args[0]).toLowerCase() === s.param.toLowerCase());
    if (hit) {
      const m = mapped(tree, hit.c.args[1]);
      return found(m.value, `${where(hit.c)}${m.note}`);
    }
  } else if (s.param && s.param.endsWith('=')) {
    for (const h of all) {
      const a = h.c.args.find((x) => x.startsWith(s.param));
      if (a) {
        hit = h;
        raw = a.slice(s.param.length);
        break;
      }
    }
  } else if (flag) {
    hit = nearest((c) => c.args.includes(s.param));
    if (s.shape === 'flag') return found(Boolean(hit), hit ? where(hit.c) : `no ${s.directive} ${s.param} in ${s.context} at ${nginxconf.where(nodes[0])}`);
  } else {
    hit = all[0];
    raw = hit && hit.c.args[0];
  }
  if (hit) return found(shape(hit.c, raw ?? hit.c.args[0]), where(hit.c));
  const name = `${s.directive}${s.param ? ` ${s.param}` : ''}`;
  if (s.shape === 'flag') return found(false, `no ${name} in ${s.context} at ${nginxconf.where(nodes[0])}`);
  try {
    const d = nginxDefault(key, s, nginx);
    return found(d, `no ${name} in ${s.context}${nodes[0].name === 'main' ? '' : ` at ${nginxconf.where(nodes[0])}`}: nginx's default${nginx.version ? ` (nginx ${nginx.version})` : ''}`);
  } catch {
    return none(`no ${name} in ${s.context}, and no value stands for its absence (the definition's upstream default: ${entry.upstream})`);
  }
}

const APP_NOT_READ = "no app.json, no GET /healthz that reports it, and the app was not measured";

/** systemd's time values ("1min 30s", "90s", "500ms", "infinity") in seconds. */
function systemdSeconds(text) {
  if (text === 'infinity') return Infinity;
  const units = { us: 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600, d: 86400 };
  let total = 0;
  for (const m of String(text).matchAll(/(\d+(?:\.\d+)?)\s*(us|ms|min|s|h|d)/g)) total += Number(m[1]) * units[m[2]];
  return total;
}

/**
 * The definition's own expression for `key` over the live values it reads: each
 * input must be live already (or the kit's own table); resolved as render does.
 */
function readDerived(key, s, facts, entry, values, definition) {
  const raw = String(config.loadDefaults()[key]);
  const inputs = [...new Set(raw.match(/\btunekit_\w+/g) || [])];
  const kit = (k) => (definition.find((d) => d.key === k) || {}).live?.some((x) => x.kind === 'kit');
  const lacking = inputs.filter((k) => !(k in values) && !kit(k));
  if (lacking.length) return none(`derived from ${lacking.join(', ')}, not read`);
  const overrides = Object.fromEntries(inputs.filter((k) => k in values && !kit(k)).map((k) => [k, values[k]]));
  const value = config.resolve({ overrides, check: false })[key];
  return found(/^-?\d+$/.test(String(value)) ? Number(value) : value, `derived: ${Object.entries(overrides).map(([k, v]) => `${k}=${v}`).join(', ')}`);
}

const READERS = {
  nginx: readNginx,
  derived: readDerived,
  kit: (key) => found(config.loadDefaults()[key], "the kit's own table"),
  sysctl: (key, s, facts) => {
    const v = facts.kernel && facts.kernel.sysctl ? facts.kernel.sysctl[s.name] : undefined;
    return v != null ? found(v, `sysctl ${s.name} = ${v}`) : none(`/proc/sys/${s.name.replace(/\./g, '/')} was not read`);
  },
  limits: (key, s, facts) => {
    const l = facts.limits && facts.limits[s.process] && facts.limits[s.process][s.field];
    if (!l) return none(s.process === 'nginx' ? 'no running nginx master was found' : "the app's processes were not found (no listener on its socket or port)");
    return found(l[s.which], `"${s.field}" ${s.which} ${l[s.which]} in /proc/${l.pids.join(',')}/limits (${s.process === 'nginx' ? "nginx's master" : "the app's processes"})`);
  },
  listener: (key, s, facts) => {
    const sock = (facts.sockets || []).find((x) => x.backlog != null) || (facts.tcpListener && { path: facts.tcpListener.local, backlog: facts.tcpListener.backlog });
    return sock ? found(sock.backlog, `the live accept queue of ${sock.path} (ss -l)`) : none('no app socket or loopback port with a listener');
  },
  process: (key, s, facts) => {
    const n = facts.app && facts.app.node;
    return n ? found(n.version, n.from) : none("the app's processes were not found, or do not run node");
  },
  socket: (key, s, facts) => {
    const sock = (facts.sockets || []).find((x) => x.exists && x.isSocket);
    if (!sock) return none('no app socket was found');
    return found(s.field === 'mode' ? octal(sock.mode) : sock.group, `socket ${sock.path} ${s.field} ${s.field === 'mode' ? octal(sock.mode) : sock.group}`);
  },
  systemd: (key, s, facts) => {
    const v = facts.systemd && facts.systemd.properties[s.property];
    if (v == null) return none(facts.systemd ? `systemctl show ${facts.systemd.unit} gave no ${s.property}` : 'the app does not run in a systemd service');
    return found(s.seconds ? systemdSeconds(v) : v, `${s.property}=${v} (systemctl show ${facts.systemd.unit})`);
  },
  healthz: (key, s, facts) => {
    const hz = facts.app && facts.app.healthz;
    const v = hz ? hz[s.field] : null;
    return v != null ? found(s.seconds ? v / 1000 : v, `GET /healthz ${s.field} ${v}`) : none(hz ? `GET /healthz does not report ${s.field}` : 'no GET /healthz answered');
  },
  'app.json': (key, s, facts) => {
    const a = facts.app && facts.app.settings;
    const v = a ? a[s.field] : null;
    return v != null ? found(s.seconds ? v / 1000 : v, `app.json ${s.field} ${JSON.stringify(v)}`) : none(a ? `app.json has no ${s.field}` : 'no app.json');
  },
  probe: (key, s, facts) => {
    const p = facts.app && facts.app.probe;
    if (!p) return none('the app was not measured');
    const t = probedTimeouts(p);
    if (s.measure === 'buffer') return found(0, `0: the measured close includes it (${t.from})`);
    if (s.measure === 'idle-close') {
      if (t.closesEachResponse || t.atLeast) return none(`the measure is no close time: ${t.from}`);
      return found(t.keepAliveMs, t.from);
    }
    return t.headersAtLeast ? none(`the measure is a lower bound: ${t.headersFrom}`) : found(t.headersMs, t.headersFrom);
  },
};

/** The live set of a host's facts: { values, from, missing } over every variable with a `# Live:` line. */
function liveVariables(facts, definition = readDefinition()) {
  const out = { values: {}, from: {}, missing: {}, source: {} };
  // Those with a derived source last: it reads the others' values.
  const entries = definition.filter((e) => e.live);
  const ordered = [...entries.filter((e) => !e.live.some((x) => x.kind === 'derived')), ...entries.filter((e) => e.live.some((x) => x.kind === 'derived'))];
  for (const d of ordered) {
    const whys = [];
    for (const s of d.live) {
      if (s.kind === 'no') {
        whys.push(`not read on a live host: ${s.why}`);
        break;
      }
      const r = READERS[s.kind](d.key, s, facts, d, out.values, definition);
      if ('value' in r) {
        out.values[d.key] = r.value;
        out.from[d.key] = r.from;
        out.source[d.key] = s;
        break;
      }
      whys.push(r.why);
    }
    if (!(d.key in out.values)) out.missing[d.key] = whys.join('; ') || APP_NOT_READ;
  }
  return out;
}

/**
 * A rule's text in the host's own terms: each tunekit_x=VALUE it names becomes the
 * setting where the host shows it, its value, and "(the kit's tunekit_x)" (the
 * source the live set read it from, else the first its # Live: line names);
 * a variable no host setting names keeps only "(the kit's tunekit_x)".
 */
function inUserWords(text, live, definition = readDefinition()) {
  const sourceOf = (key) => live.source[key]
    || ((definition.find((d) => d.key === key) || {}).live || []).find((s) => term(s));
  return String(text).replace(/\btunekit_\w+(=(?:"[^"]*"|[^\s,:;()]+))?/g, (all, eq) => {
    const key = eq ? all.slice(0, -eq.length) : all;
    const s = sourceOf(key);
    const t = s ? term(s) : null;
    const kit = `(the kit's ${key})`;
    if (!eq) return `${t || 'the setting'} ${kit}`;
    const value = eq.slice(1);
    return t ? `${t}${t.endsWith('=') ? '' : ' '}${value} ${kit}` : `${value} ${kit}`;
  });
}

module.exports = { inUserWords, liveVariables, appPath, appPaths, appViews, upstreamKind, systemdSeconds };
