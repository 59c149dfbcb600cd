'use strict';
// `tunekit doctor`: a cross-layer audit of a live host. It reads what is actually
// running — nginx's effective config (`nginx -T`), the kernel's limits, the
// listening sockets' real accept queues (`ss`), process limits (/proc), the
// socket's owner, mode and directories, and the app's live timeouts (GET /healthz
// of the example app, else the runner's app.json) — and checks that the layers
// agree (the cross-layer rules of ansible/roles/tunekit/templates/checks.j2).
// Fix texts read the kit's definition (lib/config), so they name the values
// tunekit would render.
//
// gather(options) -> facts (I/O only); analyze(facts) -> findings (pure).
// Each finding: { id, level: 'ok'|'warn'|'fail'|'skip', what, fix? }.

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const accounts = require('./accounts');
const nginxconf = require('./nginxconf');
const { childrenOf } = require('./proc');
const { findNginx } = require('./nginx');
const config = require('./config');
const { UsageError } = require('./errors');

const NGINX_UPSTREAM_KEEPALIVE_TIMEOUT_DEFAULT_S = 60;
const LISTEN_BACKLOG_DEFAULT = 511;

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function readInt(file) {
  const t = readText(file);
  return t == null ? null : Number(t.trim());
}

/** Soft "Max open files" of a process, or null. */
function nofile(pid) {
  const t = readText(`/proc/${pid}/limits`);
  const m = t && /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(t);
  if (!m) return null;
  return m[1] === 'unlimited' ? Infinity : Number(m[1]);
}


/** Processes among pids stopped by a signal (state T in /proc/PID/stat: SIGSTOP, a debugger). */
function stoppedOf(pids) {
  return [...new Set(pids)].filter((pid) => {
    const t = readText(`/proc/${pid}/stat`);
    return t && /^\S+ \(.*\) [tT] /s.test(t);
  });
}

/**
 * Listening sockets from `ss`: [{ kind: 'unix'|'tcp', local, backlog, queued, pids }];
 * a unix one also has `ino`, the inode of the file it was bound to (ss -e), which
 * tells apart two sockets bound to one path (one of them deleted from it).
 */
function listeners() {
  const out = [];
  for (const [kind, args] of [['unix', ['-H', '-l', '-x', '-p', '-e']], ['tcp', ['-H', '-l', '-t', '-n', '-p']]]) {
    const r = spawnSync('ss', args, { encoding: 'utf8' });
    if (r.status !== 0) continue;
    for (const line of r.stdout.split('\n')) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5) continue;
      // unix: Netid State Recv-Q Send-Q Local Inode Peer Inode users   (Send-Q = backlog,
      //       Recv-Q = connections waiting to be accepted)
      // tcp:  State Recv-Q Send-Q Local:Port Peer:Port users
      const pids = [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
      if (kind === 'unix') {
        const ino = / ino:(\d+) dev:/.exec(line);
        if (f[1] === 'LISTEN') out.push({ kind, backlog: Number(f[3]), queued: Number(f[2]), local: f[4], pids, ino: ino ? Number(ino[1]) : null });
      } else if (f[0] === 'LISTEN') {
        out.push({ kind, backlog: Number(f[2]), local: f[3], pids });
      }
    }
  }
  return out;
}

/**
 * Can `user` connect() to the socket at `file`: write on it, search on every parent.
 * When not, why names the file, its mode, owner and group, and the user's groups.
 */
function access(file, user) {
  const all = accounts.users();
  const u = all.get(user);
  if (!u) return { ok: false, why: `user ${user} does not exist` };
  const gids = new Set([u.gid, ...accounts.groups().filter((g) => g.members.includes(user)).map((g) => g.gid)]);
  const owner = (uid) => [...all].find(([, v]) => v.uid === uid)?.[0] ?? uid;
  const bits = (st) => `mode ${(st.mode & 0o777).toString(8)}, owner ${owner(st.uid)}, group ${accounts.groupName(st.gid)}; ${user}'s groups: ${[...gids].map(accounts.groupName).join(', ')}`;
  const may = (st, bits) => {
    if (u.uid === 0) return true;
    if (st.uid === u.uid) return ((st.mode >> 6) & bits) === bits;
    if (gids.has(st.gid)) return ((st.mode >> 3) & bits) === bits;
    return (st.mode & bits) === bits;
  };
  let dir = path.dirname(file);
  const chain = [];
  for (;;) {
    chain.unshift(dir);
    if (dir === '/') break;
    dir = path.dirname(dir);
  }
  for (const d of chain) {
    const st = fs.statSync(d);
    if (!may(st, 1)) return { ok: false, file: d, why: `${user} cannot search ${d} (${bits(st)})` };
  }
  const st = fs.statSync(file);
  if (!may(st, 2)) return { ok: false, file, why: `${user} has no write permission on ${file} (${bits(st)})` };
  return { ok: true };
}


function healthz(socketPath, timeoutMs = 3000) {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/healthz', timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode, body: JSON.parse(body) });
        } catch {
          resolve({ status: res.statusCode, body: null });
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.code || err.message }));
  });
}


/** Read what runs. Options: nginxConf, nginxBin, appConfig, socket. */
const DEFAULT_NGINX_CONF = '/etc/nginx/nginx.conf';
const DEFAULT_APP_CONFIG = '/etc/tunekit-app/app.json';

// The cause of a failed read, and what to do about it.
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

function readFailure(file, err) {
  if (err.code === 'ENOENT') return `${file} does not exist`;
  if (err.code === 'EACCES') {
    return process.getuid && process.getuid() !== 0 ? `${file}: permission denied; run doctor as root` : `${file}: permission denied (even as root)`;
  }
  return `${file}: ${err.code || err.message}`;
}

/**
 * Read what runs. Options: nginxConf, nginxBin, appConfig, socket. A path
 * given explicitly must exist (UsageError otherwise); a default path that does
 * not exist skips its layer. facts.read lists what was read, facts.skipped
 * every layer left out and why.
 */
async function gather({ nginxConf, nginxBin = findNginx() || 'nginx', appConfig, socket = null } = {}) {
  for (const [flag, file] of [['--nginx-conf', nginxConf], ['--app-config', appConfig], ['--socket', socket]]) {
    if (file && !fs.existsSync(file)) throw new UsageError(`${flag} ${file}: no such file; pass the path of the live file`);
  }
  const explicitApp = Boolean(appConfig);
  nginxConf = nginxConf || DEFAULT_NGINX_CONF;
  appConfig = appConfig || DEFAULT_APP_CONFIG;
  const facts = {
    read: [],
    skipped: [],
    kernel: {
      somaxconn: readInt('/proc/sys/net/core/somaxconn'),
      nrOpen: readInt('/proc/sys/fs/nr_open'),
    },
    nginx: null,
    app: null,
    sockets: [],
    errors: [],
  };
  facts.read.push('/proc/sys/net/core/somaxconn', '/proc/sys/fs/nr_open');
  const dump = fs.existsSync(nginxConf) ? spawnSync(nginxBin, ['-T', '-c', nginxConf], { encoding: 'utf8' }) : null;
  if (!dump) {
    facts.skipped.push({ layer: 'nginx', why: `${nginxConf} does not exist (pass --nginx-conf PATH)` });
  } else if (dump.status !== 0) {
    const why = dump.error ? `${nginxBin}: ${dump.error.code || dump.error.message}` : (dump.stderr || '').trim().split('\n').pop();
    facts.errors.push(`nginx -T -c ${nginxConf} failed: ${why}`);
    facts.skipped.push({ layer: 'nginx', why: 'nginx -T failed (see the read finding)' });
  } else {
    facts.read.push(`${nginxBin} -T -c ${nginxConf}`);
    facts.nginx = describeNginx(nginxconf.parseDump(dump.stdout));
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
  }
  if (facts.nginx) {
    facts.nginx.alerts = errorLogAlerts(facts.nginx.errorLog);
    if (facts.nginx.alerts) facts.read.push(`${facts.nginx.errorLog} (the last ${ERROR_LOG_TAIL / 1024} KiB, lines of the last ${ERROR_LOG_HOURS} h)`);
  }
  const live = listeners();
  facts.listeners = live;
  facts.read.push('ss -l (listening sockets)');

  let settings = null;
  try {
    settings = fs.readFileSync(appConfig, 'utf8');
    facts.read.push(appConfig);
  } catch (err) {
    if (explicitApp || err.code !== 'ENOENT') facts.errors.push(readFailure(appConfig, err));
    else facts.skipped.push({ layer: 'app.json', why: `${appConfig} does not exist (pass --app-config PATH)` });
  }
  let appSettings = null;
  if (settings) {
    try {
      appSettings = JSON.parse(settings);
    } catch (err) {
      facts.errors.push(`${appConfig} is not JSON: ${err.message}`);
    }
  }
  const socketPaths = socket ? [socket]
    : facts.nginx ? facts.nginx.upstreams.flatMap((u) => u.servers.filter((s) => s.startsWith('unix:')).map((s) => s.slice(5)))
      : appSettings && appSettings.listen.startsWith('unix:') ? [appSettings.listen.slice(5)] : [];
  if (!socketPaths.length) facts.skipped.push({ layer: 'app socket', why: 'no unix: server in nginx\'s upstreams and no app.json naming one (pass --socket PATH)' });
  for (const p of [...new Set(socketPaths)]) {
    facts.read.push(`socket ${p}`);
    const entry = { path: p, exists: false };
    try {
      const st = fs.statSync(p);
      entry.exists = true;
      entry.ino = st.ino;
      entry.isSocket = st.isSocket();
      entry.mode = st.mode & 0o777;
      entry.group = accounts.groupName(st.gid);
      const dst = fs.statSync(path.dirname(p));
      entry.dirMode = dst.mode & 0o777;
      entry.dirGroup = accounts.groupName(dst.gid);
      if (facts.nginx && facts.nginx.user) entry.nginxAccess = access(p, facts.nginx.user);
    } catch (err) {
      entry.error = err.code;
    }
    // After the runner bound a deleted path again, its old socket still listens under
    // the same name (the runner holds it): the one bound to the file at the path counts.
    const l = live.find((x) => x.kind === 'unix' && x.local === p && (!entry.exists || x.ino == null || x.ino === entry.ino));
    if (l) {
      entry.backlog = l.backlog;
      entry.queued = l.queued;
      entry.pids = l.pids;
      entry.stopped = stoppedOf(l.pids);
      entry.nofile = [...new Set(l.pids)].map(nofile).filter((n) => n != null);
    }
    facts.sockets.push(entry);
  }
  const first = facts.sockets.find((s) => s.exists && s.isSocket);
  const hz = first ? await healthz(first.path) : null;
  if (hz) facts.read.push(`GET /healthz on ${first.path}`);
  facts.app = {
    settings: appSettings,
    healthz: hz && hz.status === 200 && hz.body ? hz.body : null,
    healthzError: hz && (hz.error || (hz.status !== 200 ? `HTTP ${hz.status}` : null)),
  };
  return facts;
}

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

/** The parts of nginx's effective config the cross-layer rules need. */
function describeNginx(parsed) {
  const { tree } = parsed;
  const { child, findAll, seconds } = nginxconf;
  const arg = (n) => (n ? n.args[0] : null);
  const http = child(tree, 'http');
  const events = child(tree, 'events');
  const upstreams = findAll(tree, 'upstream').map(({ node }) => ({
    name: node.args[0],
    servers: node.children.filter((c) => c.name === 'server').map((c) => c.args[0]),
    keepalive: child(node.children, 'keepalive') ? Number(arg(child(node.children, 'keepalive'))) : 0,
    keepaliveTimeoutS: child(node.children, 'keepalive_timeout')
      ? seconds(arg(child(node.children, 'keepalive_timeout'))) : NGINX_UPSTREAM_KEEPALIVE_TIMEOUT_DEFAULT_S,
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
    return {
      location: node.args.join(' '),
      proxyPass: arg(child(node.children, 'proxy_pass')),
      httpVersion: arg(inherited(ancestors, node, 'proxy_http_version')) || '1.0',
      connectionHeader: connection ? connection.args[1] : null,
    };
  });
  const listens = findAll(tree, 'listen').map(({ node }) => {
    const opt = (k) => {
      const a = node.args.find((x) => x.startsWith(`${k}=`));
      return a ? a.slice(k.length + 1) : null;
    };
    return { address: node.args[0], backlog: opt('backlog') ? Number(opt('backlog')) : null };
  });
  const maps = findAll(tree, 'map').map(({ node }) => ({ source: node.args[0], variable: node.args[1], entries: node.children.map((c) => [c.name, ...c.args]) }));
  return {
    user: arg(child(tree, 'user')) || 'nobody',
    pidFile: arg(child(tree, 'pid')),
    workerConnections: events && child(events.children, 'worker_connections') ? Number(arg(child(events.children, 'worker_connections'))) : 512,
    workerRlimitNofile: child(tree, 'worker_rlimit_nofile') ? Number(arg(child(tree, 'worker_rlimit_nofile'))) : null,
    // The main error log (the first error_log of the main context; nginx's
    // compiled-in default otherwise).
    errorLog: arg(child(tree, 'error_log')) || DEFAULT_NGINX_ERROR_LOG,
    upstreams,
    proxies,
    listens,
    maps,
    hasHttp: Boolean(http),
  };
}

/** The cross-layer rules over gathered facts. Pure: facts in, findings out. */
function analyze(facts, def = config.resolve()) {
  const out = [];
  const add = (id, level, what, fix) => out.push({ id, level, what, ...(fix ? { fix } : {}) });
  const root = !process.getuid || process.getuid() === 0;
  for (const e of facts.errors || []) {
    add('read', 'fail', e, /permission denied|EACCES/i.test(e) && !root ? 'run doctor as root' : 'point --nginx-conf / --app-config at the live files');
  }
  for (const s of facts.skipped || []) add('skipped', 'skip', `${s.layer}: ${s.why}`);
  const { kernel, nginx, app } = facts;
  const somaxconn = kernel.somaxconn;

  if (nginx) {
    // Upstream keep-alive and the 502 race.
    const appKeepAlive = app && app.healthz && app.healthz.keepAliveTimeout != null ? { ms: app.healthz.keepAliveTimeout, from: 'live /healthz' }
      : app && app.settings ? { ms: app.settings.keepAliveTimeoutMs, from: 'app.json' } : null;
    const appHeaders = app && app.healthz && app.healthz.headersTimeout != null ? app.healthz.headersTimeout
      : app && app.settings ? app.settings.headersTimeoutMs : null;
    for (const p of nginx.proxies) {
      const up = nginx.upstreams.find((u) => p.proxyPass === `http://${u.name}` || p.proxyPass.startsWith(`http://${u.name}/`));
      if (!up) {
        add('keepalive-pool', 'warn', `location ${p.location} proxies to ${p.proxyPass} directly: no upstream block, so no keep-alive pool; every request opens a new connection to the app`,
          'proxy_pass to an upstream block with `keepalive N;` (tunekit render does)');
        continue;
      }
      if (!up.keepalive) {
        add('keepalive-pool', 'warn', `upstream ${up.name} has no keepalive directive: nginx opens a connection per request`, `add \`keepalive ${def.tunekit_nginx_upstream_keepalive};\` to the upstream block (tunekit_nginx_upstream_keepalive)`);
      } else if (p.httpVersion !== '1.1') {
        add('keepalive-http', 'fail', `location ${p.location}: proxy_http_version ${p.httpVersion} closes every upstream connection, so upstream ${up.name}'s keepalive pool is never used`, 'set `proxy_http_version 1.1;`');
      } else if (p.connectionHeader == null) {
        add('keepalive-connection', 'fail', `location ${p.location}: the Connection header is not set, so nginx sends "Connection: close" upstream and the pool is never used`,
          'set `proxy_set_header Connection $connection_upgrade_or_empty;` from a map ($http_upgrade -> "upgrade", else "")');
      } else if (/^close$/i.test(p.connectionHeader)) {
        add('keepalive-connection', 'fail', `location ${p.location}: Connection "close" defeats the keepalive pool`, 'send "" (or "upgrade" for WebSockets, from a map)');
      } else {
        add('keepalive-pool', 'ok', `location ${p.location} reuses upstream ${up.name} connections (keepalive ${up.keepalive}, HTTP/1.1, Connection ${JSON.stringify(p.connectionHeader)})`);
      }
      if (up.keepalive && appKeepAlive) {
        const nginxMs = up.keepaliveTimeoutS * 1000;
        if (appKeepAlive.ms <= nginxMs) {
          add('keepalive-race', 'fail', `app keepAliveTimeout ${appKeepAlive.ms} ms (${appKeepAlive.from}) is not longer than nginx upstream ${up.name} keepalive_timeout ${up.keepaliveTimeoutS}s: the app closes idle connections nginx may still reuse -> 502 for requests nginx does not retry (POST), logged as "upstream prematurely closed connection" or, on a Unix socket, "recv() failed (104: Connection reset by peer)"`,
            `set the app's keepAliveTimeout above ${nginxMs} ms (tunekit derives ${nginxMs + def.tunekit_app_keepalive_margin_s * 1000}: + tunekit_app_keepalive_margin_s), or lower nginx's keepalive_timeout`);
        } else {
          add('keepalive-race', 'ok', `app keepAliveTimeout ${appKeepAlive.ms} ms (${appKeepAlive.from}) > nginx upstream keepalive_timeout ${up.keepaliveTimeoutS}s`);
        }
      }
    }
    if (appHeaders != null && appKeepAlive && appHeaders <= appKeepAlive.ms) {
      add('headers-timeout', 'fail', `app headersTimeout ${appHeaders} ms is not above keepAliveTimeout ${appKeepAlive.ms} ms`, `set headersTimeout = keepAliveTimeout + ${Number(def.tunekit_app_headers_timeout_ms) - Number(def.tunekit_app_keepalive_timeout_ms)} ms (as tunekit_app_headers_timeout_ms)`);
    }
    const wsMap = nginx.maps.find((m) => m.source === '$http_upgrade');
    if (wsMap) {
      const closes = wsMap.entries.some((e) => /^close$/i.test(e[e.length - 1]));
      const pooled = nginx.upstreams.some((u) => u.keepalive);
      if (closes) {
        add('upgrade-map', pooled ? 'fail' : 'warn',
          `map $http_upgrade ${wsMap.variable} sends "close" for plain requests${pooled ? ': that defeats the upstream keepalive pool' : ' (harmless only while there is no keepalive pool)'}`,
          'map the default to "" instead of close');
      } else {
        add('upgrade-map', 'ok', `map $http_upgrade ${wsMap.variable} sends "upgrade" only when asked`);
      }
    }

    // Backlogs and somaxconn.
    for (const l of nginx.listens) {
      const asked = l.backlog ?? LISTEN_BACKLOG_DEFAULT;
      const liveQ = (facts.listeners || []).find((x) => x.kind === 'tcp' && (x.local === l.address || x.local.endsWith(`:${l.address.split(':').pop()}`)));
      const eff = Math.min(asked, somaxconn);
      if (asked > somaxconn) {
        add('backlog', 'warn', `nginx listen ${l.address} asks backlog ${asked} but net.core.somaxconn is ${somaxconn}: the kernel clamps it to ${somaxconn}`, `raise net.core.somaxconn to ${asked} (tunekit's sysctl drop-in sets them together)`);
      } else if (asked === LISTEN_BACKLOG_DEFAULT && somaxconn > LISTEN_BACKLOG_DEFAULT) {
        add('backlog', 'warn', `nginx listen ${l.address} uses backlog ${asked} (nginx's default), so net.core.somaxconn ${somaxconn} buys nothing`, `add backlog=${somaxconn} to the listen directive`);
      } else {
        add('backlog', 'ok', `nginx listen ${l.address}: accept queue ${eff}${liveQ ? ` (live: ${liveQ.backlog})` : ''}`);
      }
    }
    for (const s of facts.sockets) {
      if (s.backlog == null) continue;
      const asked = app && app.settings ? app.settings.backlog : null;
      if (s.backlog < Math.min(somaxconn, 1024) && (asked == null || asked > s.backlog)) {
        add('backlog', 'warn', `app socket ${s.path}: live accept queue ${s.backlog}, somaxconn ${somaxconn}`, 'pass the listen backlog the sysctl allows (tunekit_listen_backlog)');
      } else {
        add('backlog', 'ok', `app socket ${s.path}: live accept queue ${s.backlog} (somaxconn ${somaxconn})`);
      }
    }

    // File descriptors.
    const need = nginx.workerConnections * 2;
    if (nginx.workerRlimitNofile == null) {
      add('nofile', 'warn', `worker_rlimit_nofile is not set; workers inherit the service's limit`, `set worker_rlimit_nofile ${need} (2 x worker_connections ${nginx.workerConnections})`);
    } else if (nginx.workerRlimitNofile < need) {
      add('nofile', 'fail', `worker_rlimit_nofile ${nginx.workerRlimitNofile} < 2 x worker_connections ${nginx.workerConnections}`, `set worker_rlimit_nofile ${need}`);
    } else {
      add('nofile', 'ok', `worker_rlimit_nofile ${nginx.workerRlimitNofile} >= 2 x worker_connections ${nginx.workerConnections}`);
    }
    if (nginx.workerNofile && nginx.workerNofile.length) {
      const low = Math.min(...nginx.workerNofile);
      if (low < need) add('nofile', 'fail', `a running nginx worker has an open-files limit of ${low} < ${need}`, 'raise LimitNOFILE in nginx.service.d and worker_rlimit_nofile, then reload');
      else add('nofile', 'ok', `running nginx workers may open ${low} files`);
    }
  }

  // The socket: mode, group, directory, nginx's access.
  for (const s of facts.sockets) {
    if (!s.exists) {
      add('socket', 'fail', `socket ${s.path} does not exist${s.error ? ` (${s.error})` : ''}`, 'start the app; check `journalctl -u tunekit-app`');
      continue;
    }
    if (!s.isSocket) {
      add('socket', 'fail', `${s.path} is not a socket`, 'remove the file that is in the way, then restart the app');
      continue;
    }
    if (s.mode & 0o007) add('socket-mode', 'fail', `socket ${s.path} is mode ${s.mode.toString(8).padStart(4, '0')}: any local user may connect`, 'use mode 0660 with a group nginx is in');
    else add('socket-mode', 'ok', `socket ${s.path} mode ${s.mode.toString(8).padStart(4, '0')} group ${s.group}`);
    if (s.dirMode & 0o007) add('socket-dir', 'warn', `${path.dirname(s.path)} is mode ${s.dirMode.toString(8)}: others may search it`, 'use mode 0750 (RuntimeDirectoryMode)');
    if (s.nginxAccess) {
      if (s.nginxAccess.ok) add('socket-access', 'ok', `nginx's user may connect to ${s.path}`);
      else add('socket-access', 'fail', ...accessFailure(s, app && app.settings));
    }
    if (s.nofile && s.nofile.length) {
      const low = Math.min(...s.nofile);
      if (low <= 1024) add('app-nofile', 'warn', `an app process on ${s.path} has an open-files limit of ${low}: near ${low} connections accept() fails with EMFILE, and the connections past it are closed unread (libuv's reserve descriptor; the worker logs open-files-limit when it reaches it); nginx answers 502 with "recv() failed (104: Connection reset by peer)"`, `set LimitNOFILE=${def.tunekit_app_limit_nofile} in the unit (tunekit_app_limit_nofile)`);
      else add('app-nofile', 'ok', `app processes may open ${low} files`);
    }
  }
  // What nginx's error log says it ran out of (no live check can see a past peak).
  const alerts = nginx && nginx.alerts;
  if (alerts && alerts['worker-connections']) {
    const a = alerts['worker-connections'];
    add('worker-connections', 'fail', `nginx ran out of connections ${a.count} time(s) in the last ${ERROR_LOG_HOURS} h: "${a.last}"; each worker holds a client connection and an upstream one per proxied request, so worker_connections ${nginx.workerConnections} serve about ${Math.floor(nginx.workerConnections / 2)} requests at once; past that nginx closes idle keep-alive connections, then stops accepting: new clients wait in the listen queue or are closed unanswered`,
      `raise worker_connections (tunekit_nginx_worker_connections; ansible/profiles/large.yml has 16384), and worker_rlimit_nofile with it (the kit derives 2x)`);
  }
  if (alerts && alerts['nginx-rlimit']) {
    add('nginx-rlimit', 'warn', `nginx could not raise its open-files limit (${alerts['nginx-rlimit'].count} time(s) in the last ${ERROR_LOG_HOURS} h): "${alerts['nginx-rlimit'].last}"; its workers run with the limit they inherited`,
      'raise the hard limit nginx starts with: LimitNOFILE= in nginx.service (the kit renders a drop-in that covers worker_rlimit_nofile)');
  }
  if (alerts && alerts['nginx-emfile']) {
    add('nginx-emfile', 'fail', `nginx ran out of file descriptors ${alerts['nginx-emfile'].count} time(s) in the last ${ERROR_LOG_HOURS} h: "${alerts['nginx-emfile'].last}"`,
      'raise worker_rlimit_nofile (the kit derives 2 x worker_connections) and nginx.service\'s LimitNOFILE');
  }
  // A full accept queue: on a Unix socket connect() does not wait, it fails at once.
  for (const s of facts.sockets) {
    if (s.queued == null || s.backlog == null || s.queued <= s.backlog) continue;
    const stopped = s.stopped && s.stopped.length ? `app processes ${s.stopped.join(', ')} are stopped (state T: SIGSTOP, a debugger)` : 'the app\'s workers are not accepting (a blocked event loop, or all busy)';
    add('accept-queue', 'fail', `accept queue of ${s.path} is full (${s.queued} connections waiting, backlog ${s.backlog}): ${stopped}; nginx's connect() fails at once with "(11: Resource temporarily unavailable)" (EAGAIN; a Unix socket does not wait as TCP does): 502`,
      s.stopped && s.stopped.length ? `resume them (kill -CONT ${s.stopped.join(' ')}) or restart the app; find what stopped them`
        : 'find what blocks the workers (their CPU, a synchronous call); a larger backlog (tunekit_listen_backlog, up to net.core.somaxconn) only absorbs bursts');
  }
  // The socket file is gone but the app still listens on the (deleted) path.
  for (const s of facts.sockets) {
    if (!s.exists && s.pids && s.pids.length) {
      add('socket-deleted', 'fail', `socket file ${s.path} was deleted while app processes (pids ${[...new Set(s.pids)].join(', ')}) still listen on it: nginx's connect() fails with "(2: No such file or directory)" for every new upstream connection (502)`,
        deletedSocketFix(app && app.settings));
    }
  }
  // Nothing accepts on an existing socket: the app is stopped (a stale socket file).
  const first = facts.sockets.find((s) => s.exists && s.isSocket);
  if (first && app && app.healthzError === 'ECONNREFUSED') {
    add('socket-listener', 'fail', `socket ${first.path} exists but nothing accepts on it (ECONNREFUSED): the app is not running; nginx answers 502 with "(111: Connection refused)"`,
      'start the app (systemctl start tunekit-app); its runner replaces a socket file nobody listens on');
  }
  if (app && app.healthzError) add('app', 'skip', `GET /healthz on the socket: ${app.healthzError}; timeouts taken from app.json where available`);
  return out;
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

module.exports = { gather, analyze, describeNginx, summarize, access, errorLogAlerts, nofile, listeners, DEFAULT_APP_CONFIG };
