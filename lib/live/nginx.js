'use strict';
// nginx as it runs: its effective config (`nginx -T`) read into the model the
// cross-layer rules need (upstreams, proxied locations, listens, maps; an unset
// directive at nginx's default for its version, from the definition), its
// processes' open-files limits (/proc) and the alerts of its error log.

const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const nginxconf = require('../nginxconf');
const { childrenOf } = require('../proc');
const { nginxVersion, nginxBuildText } = require('../nginx');
const config = require('../config');
const rules = require('../config/rules');
const { compareVersions } = require('../template');
const { readText, nofile } = require('./host');

// nginx's main config when no path is given.
const DEFAULT_NGINX_CONF = '/etc/nginx/nginx.conf';

// nginx's error log: the limits only its alerts show, once they were hit.
const DEFAULT_NGINX_ERROR_LOG = '/var/log/nginx/error.log';
const ERROR_LOG_TAIL = 256 * 1024;
const ERROR_LOG_HOURS = 24;
const ERROR_LOG_ALERTS = [
  ['worker-connections', /worker_connections are not enough/],
  ['nginx-rlimit', /setrlimit\(RLIMIT_NOFILE, \d+\) failed/],
  ['nginx-emfile', /\(24: Too many open files\)/],
];

/**
 * The alerts of ERROR_LOG_ALERTS in the tail of nginx's error log, from the
 * last ERROR_LOG_HOURS: {id: {count, last}}; null when the log cannot be read.
 * `now` is for tests.
 */
function errorLogAlerts(file, now = Date.now()) {
  let text;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const buf = Buffer.alloc(Math.min(size, ERROR_LOG_TAIL));
      fs.readSync(fd, buf, 0, buf.length, size - buf.length);
      text = buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^(\d{4})\/(\d\d)\/(\d\d) (\d\d):(\d\d):(\d\d) /.exec(line);
    if (!m) continue;
    // nginx writes local time.
    const at = new Date(+m[1], m[2] - 1, +m[3], +m[4], +m[5], +m[6]).getTime();
    if (now - at > ERROR_LOG_HOURS * 3600e3) continue;
    for (const [id, re] of ERROR_LOG_ALERTS) {
      if (!re.test(line)) continue;
      out[id] = { count: ((out[id] && out[id].count) || 0) + 1, last: line };
    }
  }
  return out;
}

/**
 * Why nginx failed, from its stderr: the first [emerg] line (else [alert], [crit]),
 * the one that names the file and the errno ("open() "/run/nginx.pid" failed (13:
 * Permission denied)"), without its time and pid; else the last line. nginx's last
 * line ("configuration file ... test failed") never says why.
 */
function nginxFailure(stderr) {
  const lines = stderr.trim().split('\n');
  const line = ['emerg', 'alert', 'crit'].map((level) => lines.find((l) => l.includes(`[${level}]`))).find(Boolean) || lines[lines.length - 1];
  return line.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: /, 'nginx: [$1] ');
}

/** nginx's effective config (`nginx -T`), its processes' limits and its error log's alerts, into facts.nginx. */
function gatherNginx(facts, nginxConf, nginxBin) {
  const dump = fs.existsSync(nginxConf) ? spawnSync(nginxBin, ['-T', '-c', nginxConf], { encoding: 'utf8' }) : null;
  if (!dump) {
    facts.skipped.push({ layer: 'nginx', why: `${nginxConf} does not exist (pass --nginx-conf PATH)` });
    return;
  }
  if (dump.status !== 0) {
    const why = dump.error ? `${nginxBin}: ${dump.error.code || dump.error.message}` : nginxFailure(dump.stderr || '');
    facts.errors.push(`nginx -T -c ${nginxConf} failed: ${why}`);
    facts.skipped.push({ layer: 'nginx', why: 'nginx -T failed (see the read finding)' });
    return;
  }
  facts.read.push(`${nginxBin} -T -c ${nginxConf}`);
  const version = nginxVersion(nginxBin);
  if (version) facts.read.push(`${nginxBin} -V (nginx ${version})`);
  facts.nginx = describeNginx(nginxconf.parseDump(dump.stdout), version);
  // The modules nginx was built with (`nginx -V`'s --with-NAME arguments).
  const build = nginxBuildText(nginxBin);
  if (build) facts.nginx.configure = [...build.matchAll(/--with-(\w+)/g)].map((m) => m[1]);
  const pidText = facts.nginx.pidFile && readText(facts.nginx.pidFile);
  const master = pidText ? Number(pidText.trim()) : null;
  if (master && fs.existsSync(`/proc/${master}`)) {
    facts.nginx.masterPid = master;
    facts.nginx.masterNofile = nofile(master);
    facts.nginx.workerNofile = childrenOf(master).map(nofile).filter((n) => n != null);
    facts.read.push(`/proc/${master}/limits (nginx master) and its workers'`);
  } else {
    facts.skipped.push({ layer: 'nginx processes', why: `no running nginx master (pid file ${facts.nginx.pidFile || 'not set'})` });
  }
  facts.nginx.alerts = errorLogAlerts(facts.nginx.errorLog);
  if (facts.nginx.alerts) facts.read.push(`${facts.nginx.errorLog} (the last ${ERROR_LOG_TAIL / 1024} KiB, lines of the last ${ERROR_LOG_HOURS} h)`);
}

/**
 * What nginx does toward an upstream when nothing says otherwise, for its
 * version: from 1.29.7 an upstream{} block keeps a pool (keepalive 32 local),
 * speaks HTTP/1.1 and sends no "Connection: close" (tunekit_nginx_versions);
 * before, or when the version is not known, the definition's upstream defaults.
 */
function nginxUpstreamDefaults(version) {
  const feature = config.loadDefaults().tunekit_nginx_versions.features.upstream_keepalive_default;
  if (version && compareVersions(version, feature.since) >= 0) {
    return { version, pooledByDefault: true, since: feature.since, keepalive: feature.pool, httpVersion: '1.1', connection: '' };
  }
  return {
    version: version || null,
    pooledByDefault: false,
    since: feature.since,
    keepalive: 0,
    httpVersion: String(rules.upstreamDefault('tunekit_nginx_proxy_http_version')),
    connection: String(rules.upstreamDefault('tunekit_nginx_proxy_connection_default')),
  };
}

/**
 * The parts of nginx's effective config the cross-layer rules need; a directive
 * that is not set has nginx's default, as the definition states it, for the
 * version given (`nginx -V`; null: not known, the defaults before 1.29.7).
 */
function describeNginx(parsed, version = null) {
  const { tree } = parsed;
  const nginxDefault = (key) => rules.upstreamDefault(key);
  const defaults = nginxUpstreamDefaults(version);
  const { child, findAll, seconds } = nginxconf;
  const arg = (n) => (n ? n.args[0] : null);
  const http = child(tree, 'http');
  const events = child(tree, 'events');
  const upstreams = findAll(tree, 'upstream').map(({ node }) => ({
    name: node.args[0],
    servers: node.children.filter((c) => c.name === 'server').map((c) => c.args[0]),
    // No keepalive line: no pool before 1.29.7, nginx's default pool from it.
    keepalive: child(node.children, 'keepalive') ? Number(arg(child(node.children, 'keepalive'))) : defaults.keepalive,
    keepaliveByDefault: !child(node.children, 'keepalive') && defaults.keepalive > 0,
    keepaliveTimeoutS: child(node.children, 'keepalive_timeout')
      ? seconds(arg(child(node.children, 'keepalive_timeout'))) : nginxDefault('tunekit_nginx_upstream_keepalive_timeout_s'),
    // Where a user changes it: the line of its keepalive_timeout, else of the block (nginx's default).
    keepaliveTimeoutAt: child(node.children, 'keepalive_timeout')
      ? `keepalive_timeout ${arg(child(node.children, 'keepalive_timeout'))} at ${nginxconf.where(child(node.children, 'keepalive_timeout'))}`
      : `no keepalive_timeout in upstream ${node.args[0]} at ${nginxconf.where(node)}: nginx's default`,
  }));
  const inherited = (ancestors, node, name) => {
    const own = child(node.children, name);
    if (own) return own;
    for (const a of [...ancestors].reverse()) {
      const c = child(a.children, name);
      if (c) return c;
    }
    return null;
  };
  const proxies = findAll(tree, 'location').filter(({ node }) => child(node.children, 'proxy_pass')).map(({ node, ancestors }) => {
    const headers = [...ancestors, node].flatMap((n) => (n.children || []).filter((c) => c.name === 'proxy_set_header'));
    const connection = headers.filter((h) => h.args[0].toLowerCase() === 'connection').pop();
    const proxyPass = arg(child(node.children, 'proxy_pass'));
    const up = upstreams.find((u) => proxyPass === `http://${u.name}` || proxyPass.startsWith(`http://${u.name}/`));
    return {
      location: node.args.join(' '),
      at: nginxconf.where(node),
      proxyPass,
      // Where the app listens: the upstream block's first server, else proxy_pass's own address.
      target: up ? up.servers[0] || null : appTarget(proxyPass),
      httpVersion: arg(inherited(ancestors, node, 'proxy_http_version')) || defaults.httpVersion,
      connectionHeader: connection ? connection.args[1] : null,
    };
  });
  const listens = findAll(tree, 'listen').map(({ node }) => {
    const opt = (k) => {
      const a = node.args.find((x) => x.startsWith(`${k}=`));
      return a ? a.slice(k.length + 1) : null;
    };
    // quic: a UDP listener (HTTP/3), which has no accept queue.
    return { address: node.args[0], backlog: opt('backlog') ? Number(opt('backlog')) : null, quic: node.args.includes('quic') };
  });
  // Alt-Svc headers nginx adds: what it tells clients it serves elsewhere (h3 on a UDP port).
  const altSvc = findAll(tree, 'add_header').filter(({ node }) => String(node.args[0]).toLowerCase() === 'alt-svc')
    .map(({ node }) => node.args[1]);
  const maps = findAll(tree, 'map').map(({ node }) => ({ source: node.args[0], variable: node.args[1], entries: node.children.map((c) => [c.name, ...c.args]) }));
  const model = {
    version: defaults.version,
    defaults,
    user: arg(child(tree, 'user')) || 'nobody',
    pidFile: arg(child(tree, 'pid')),
    workerConnections: events && child(events.children, 'worker_connections') ? Number(arg(child(events.children, 'worker_connections')))
      : nginxDefault('tunekit_nginx_worker_connections'),
    workerRlimitNofile: child(tree, 'worker_rlimit_nofile') ? Number(arg(child(tree, 'worker_rlimit_nofile'))) : null,
    // The main error log (the first error_log of the main context; nginx's
    // compiled-in default otherwise).
    errorLog: arg(child(tree, 'error_log')) || DEFAULT_NGINX_ERROR_LOG,
    upstreams,
    proxies,
    listens,
    altSvc,
    maps,
    hasHttp: Boolean(http),
  };
  // The whole tree, for the variables' `# Live:` lines (lib/live/variables.js);
  // not enumerable: `doctor --json` prints the model, not the config again.
  Object.defineProperty(model, 'tree', { value: tree, enumerable: false });
  return model;
}

/** The address of "http://127.0.0.1:3000/x" or "http://unix:/run/a.sock:/x": "127.0.0.1:3000", "unix:/run/a.sock". */
function appTarget(proxyPass) {
  const m = /^https?:\/\/(unix:[^:]+|[^/]+)/.exec(String(proxyPass));
  return m ? m[1] : null;
}

/** Each location that proxies, with the upstream block it proxies to (or null). */
function proxied(nginx) {
  return nginx.proxies.map((p) => ({
    p,
    up: nginx.upstreams.find((u) => p.proxyPass === `http://${u.name}` || p.proxyPass.startsWith(`http://${u.name}/`)) || null,
  }));
}

/** The upstream blocks some location proxies to that keep a pool (their own keepalive line, or nginx's default). */
function pooled(nginx) {
  return [...new Set(proxied(nginx).filter(({ up }) => up && up.keepalive).map(({ up }) => up))];
}


module.exports = {
  DEFAULT_NGINX_CONF, ERROR_LOG_HOURS, errorLogAlerts, nginxFailure, gatherNginx, nginxUpstreamDefaults, describeNginx, proxied, pooled, appTarget,
};
