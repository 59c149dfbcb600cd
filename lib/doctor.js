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
// gather(options) -> facts (I/O only); analyze(facts) -> findings (pure).
// Each finding: { id, level: 'ok'|'warn'|'fail'|'skip', what, fix? }.

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const accounts = require('./accounts');
const nginxconf = require('./nginxconf');
const probe = require('./probe');
const { childrenOf, servedPath } = require('./proc');
const { findNginx, nginxVersion } = require('./nginx');
const config = require('./config');
const rules = require('./config/rules');
const { createEnv, compareVersions } = require('./template');
const { UsageError } = require('./errors');

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

// A Node cluster primary (PM2's daemon among them) binds a worker's socket path by the
// shorter of the absolute path and the one relative to its own cwd, so from cwd /tmp
// `ss` lists /tmp/s/app.sock as "s/app.sock" (measured, Node 20). Such a name is
// resolved against the cwd of the process that holds it; abstract (@) and unnamed (*)
// ones are left as they are.
function absoluteSocketName(name, pids) {
  if (name.startsWith('/') || name.startsWith('@') || name === '*') return name;
  for (const pid of pids) {
    try {
      return path.resolve(fs.readlinkSync(`/proc/${pid}/cwd`), name);
    } catch {
      // gone, or not ours to read: the next holder
    }
  }
  return name;
}

/**
 * Listening sockets from `ss`: [{ kind: 'unix'|'tcp', local, backlog, queued, pids }];
 * a unix one's `local` is the path it serves (lib/proc.js servedPath: the runner's
 * socket is listed by the name it was bound with), and it also has `ino`,
 * the inode of the file it was bound to (ss -e), which tells apart two sockets
 * bound to one path (one of them deleted from it).
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
      // tcp:  State Recv-Q Send-Q Local:Port Peer:Port users (the same: queue, backlog)
      const pids = [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
      if (kind === 'unix') {
        const ino = / ino:(\d+) dev:/.exec(line);
        if (f[1] === 'LISTEN') out.push({ kind, backlog: Number(f[3]), queued: Number(f[2]), local: servedPath(absoluteSocketName(f[4], pids)), pids, ino: ino ? Number(ino[1]) : null });
      } else if (f[0] === 'LISTEN') {
        out.push({ kind, backlog: Number(f[2]), queued: Number(f[1]), local: f[3], pids });
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

// The files doctor reads when no path is given.
const DEFAULT_NGINX_CONF = '/etc/nginx/nginx.conf';
const DEFAULT_APP_CONFIG = '/etc/tunekit-app/app.json';

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

/** The cause of a failed read (the read check's fix says what to do about it). */
function readFailure(file, err) {
  if (err.code === 'ENOENT') return `${file} does not exist`;
  if (err.code === 'EACCES') return `${file}: permission denied (EACCES)${isRoot() ? ' even as root' : ''}`;
  return `${file}: ${err.code || err.message}`;
}

const isRoot = () => !process.geteuid || process.geteuid() === 0;

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

/**
 * Read what runs. Options: nginxConf, nginxBin, appConfig, socket. A path
 * given explicitly must exist (UsageError otherwise); a default path that does
 * not exist skips its layer. facts.read lists what was read, facts.skipped
 * every layer left out and why.
 */
async function gather({ nginxConf, nginxBin = findNginx() || 'nginx', appConfig, socket = null, probePath = '/' } = {}) {
  for (const [flag, file] of [['--nginx-conf', nginxConf], ['--app-config', appConfig], ['--socket', socket]]) {
    if (file && !fs.existsSync(file)) throw new UsageError(`${flag} ${file}: no such file; pass the path of the live file`);
  }
  const facts = {
    read: ['/proc/sys/net/core/somaxconn', '/proc/sys/fs/nr_open'],
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
  gatherNginx(facts, nginxConf || DEFAULT_NGINX_CONF, nginxBin);
  facts.listeners = listeners();
  facts.read.push('ss -l (listening sockets)');
  const appSettings = gatherAppSettings(facts, appConfig || DEFAULT_APP_CONFIG, Boolean(appConfig));
  const socketPaths = socket ? [socket]
    : facts.nginx ? facts.nginx.upstreams.flatMap((u) => u.servers.filter((s) => s.startsWith('unix:')).map((s) => s.slice(5)))
      : appSettings && appSettings.listen.startsWith('unix:') ? [appSettings.listen.slice(5)] : [];
  if (!socketPaths.length) facts.skipped.push({ layer: 'app socket', why: 'no unix: server in nginx\'s upstreams and no app.json naming one (pass --socket PATH)' });
  for (const p of [...new Set(socketPaths)]) {
    facts.read.push(`socket ${p}`);
    facts.sockets.push(socketFacts(p, facts));
  }
  const first = facts.sockets.find((s) => s.exists && s.isSocket);
  const hz = first ? await healthz(first.path) : null;
  if (hz) facts.read.push(`GET /healthz on ${first.path}`);
  facts.app = {
    settings: appSettings,
    healthz: hz && hz.status === 200 && hz.body ? hz.body : null,
    healthzError: hz && (hz.error || (hz.status !== 200 ? `HTTP ${hz.status}` : null)),
    probe: null,
  };
  if (!appTimeouts(facts.app) && probePath !== false) await probeApp(facts, first, probePath);
  return facts;
}

/**
 * An app that says nothing of its timeouts (no app.json, no /healthz: not the
 * kit's runner): measured black-box over its socket, else the loopback address
 * of a pooled upstream's server (lib/probe.js: two connections, a time budget).
 * An app on another host is not probed from here.
 */
async function probeApp(facts, socket, probePath) {
  let target = socket ? { socketPath: socket.path } : null;
  if (!target && facts.nginx) {
    const server = pooled(facts.nginx).flatMap((up) => up.servers).find((s) => /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(s));
    if (server) {
      const at = server.lastIndexOf(':');
      target = { host: server.slice(0, at).replace(/^\[|\]$/g, '').replace('localhost', '127.0.0.1'), port: Number(server.slice(at + 1)) };
    }
  }
  if (!target) {
    if (facts.nginx && pooled(facts.nginx).length) facts.skipped.push({ layer: 'app probe', why: 'no app socket or loopback server to measure the app\'s timeouts on (pass --app-config, or --socket PATH)' });
    return;
  }
  const name = target.socketPath || `${target.host}:${target.port}`;
  try {
    facts.app.probe = { target: name, ...await probe.probeApp(target, { path: probePath || '/' }) };
    facts.read.push(`the app on ${name}, measured (HEAD ${probePath || '/'} then idle; a request whose headers never end; ${probe.BUDGET_MS / 1000} s at most)`);
  } catch (err) {
    facts.errors.push(`measuring the app on ${name}: ${err.message}`);
  }
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

/** The runner's app.json, parsed; null when it cannot be read (an error, or a skip for a default path that does not exist). */
function gatherAppSettings(facts, appConfig, explicit) {
  let text;
  try {
    text = fs.readFileSync(appConfig, 'utf8');
    facts.read.push(appConfig);
  } catch (err) {
    if (explicit || err.code !== 'ENOENT') facts.errors.push(readFailure(appConfig, err));
    else facts.skipped.push({ layer: 'app.json', why: `${appConfig} does not exist (pass --app-config PATH)` });
    return null;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    facts.errors.push(`${appConfig} is not JSON: ${err.message}`);
    return null;
  }
}

/** One socket path: its file (stat, nginx's access) and the listener bound to it (ss, /proc). */
function socketFacts(p, facts) {
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
  const l = facts.listeners.find((x) => x.kind === 'unix' && x.local === p && (!entry.exists || x.ino == null || x.ino === entry.ino));
  if (l) {
    entry.backlog = l.backlog;
    entry.queued = l.queued;
    entry.pids = l.pids;
    entry.stopped = stoppedOf(l.pids);
    entry.nofile = [...new Set(l.pids)].map(nofile).filter((n) => n != null);
  }
  return entry;
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
    return {
      location: node.args.join(' '),
      proxyPass: arg(child(node.children, 'proxy_pass')),
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
  return {
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

/**
 * What Node adds to keepAliveTimeout before it closes an idle connection: the
 * live server.keepAliveTimeoutBuffer where the app reports it, else what its Node
 * version adds (tunekit_app_keepalive_buffer_ms of the definition); 0 when
 * neither is known (the stricter comparison).
 */
function keepAliveBuffer(hz) {
  if (hz && Number.isFinite(hz.keepAliveTimeoutBuffer)) return { ms: hz.keepAliveTimeoutBuffer, from: `server.keepAliveTimeoutBuffer, Node ${hz.node || '?'}` };
  if (hz && typeof hz.node === 'string' && /^\d+\.\d+\.\d+$/.test(hz.node)) {
    const ms = Number(config.resolve({ set: [`tunekit_node_version=${hz.node}`], check: false }).tunekit_app_keepalive_buffer_ms);
    return { ms, from: `Node ${hz.node}` };
  }
  return { ms: 0, from: null };
}

/** The app's live timeouts: from GET /healthz, else app.json; null when neither. */
function appTimeouts(app) {
  const hz = app && app.healthz;
  if (hz && hz.keepAliveTimeout != null) {
    const buffer = keepAliveBuffer(hz);
    return { keepAliveMs: hz.keepAliveTimeout, headersMs: hz.headersTimeout ?? null, bufferMs: buffer.ms, bufferFrom: buffer.from, from: 'live /healthz' };
  }
  if (app && app.settings) return { keepAliveMs: app.settings.keepAliveTimeoutMs, headersMs: app.settings.headersTimeoutMs ?? null, bufferMs: 0, bufferFrom: null, from: 'app.json' };
  if (app && app.probe) return probedTimeouts(app.probe);
  return null;
}

/**
 * The timeouts lib/probe.js measured, as appTimeouts gives them: the idle close
 * as measured (Node's buffer included: no bufferMs); a bound the budget ended
 * before is marked atLeast; a hint not waited for is the hint. An app that
 * closes after every answer keeps nothing idle: closesEachResponse.
 */
function probedTimeouts(p) {
  const k = p.keepAlive;
  const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
  const on = `measured on ${p.target}`;
  let keep;
  if (k.connection === 'close') keep = { keepAliveMs: 0, closesEachResponse: true, from: `${on}: it answers "Connection: close"` };
  else if (k.notWaited) keep = { keepAliveMs: k.hintS * 1000, from: `its "Keep-Alive: timeout=${k.hintS}" hint on ${p.target}; the close itself is past the probe's budget` };
  else if (k.closedAfterMs != null) keep = { keepAliveMs: Math.round(k.closedAfterMs), from: `${on}: closed after ${secs(k.closedAfterMs)} idle` };
  else keep = { keepAliveMs: Math.round(k.openAfterMs), atLeast: true, from: `${on}: still open after ${secs(k.openAfterMs)} idle, when the probe stopped` };
  const h = p.headers;
  const headers = h.closedAfterMs != null
    ? { headersMs: Math.round(h.closedAfterMs), headersFrom: `${on}: unfinished headers answered ${h.status || 'with a close'} after ${secs(h.closedAfterMs)}` }
    : { headersMs: Math.round(h.openAfterMs), headersAtLeast: true, headersFrom: `${on}: unfinished headers still waited on after ${secs(h.openAfterMs)}` };
  return { ...keep, ...headers, bufferMs: 0, bufferFrom: null, measured: true };
}

/** "5000 ms" or "5000 ms + 1000 ms keepAliveTimeoutBuffer": when Node closes an idle connection. */
function closeTime(t) {
  return t.bufferMs ? `${t.keepAliveMs} ms + ${t.bufferMs} ms keepAliveTimeoutBuffer (${t.bufferFrom})` : `${t.keepAliveMs} ms`;
}

/** Each location that proxies, with the upstream block it proxies to (or null). */
function proxied(nginx) {
  return nginx.proxies.map((p) => ({
    p,
    up: nginx.upstreams.find((u) => p.proxyPass === `http://${u.name}` || p.proxyPass.startsWith(`http://${u.name}/`)) || null,
  }));
}

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
 * The cross-layer checks over gathered facts. Pure: facts in, findings out.
 * asRoot: the command line as root, the fix of a read only root may make.
 */
function analyze(facts, def = config.resolve(), { asRoot = null } = {}) {
  const table = new Map(rules.load().map((r) => [r.id, r]));
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
  for (const check of CHECKS) {
    if (check.run) {
      out.push(...check.run(facts, ctx));
      continue;
    }
    const rule = table.get(check.rule);
    for (const c of check.cases(facts, ctx)) {
      if (!rules.broken(rule, c.vars, env)) {
        if (c.ok) out.push({ id: check.id, level: 'ok', what: c.ok });
      } else {
        out.push({ id: check.id, level: rule.level, what: `${c.where}: ${rules.says(rule, c.vars, env)}${c.note ? `; ${c.note}` : ''}`, fix: c.fix });
      }
    }
  }
  return out;
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

/** The upstream blocks some location proxies to that keep a pool (their own keepalive line, or nginx's default). */
function pooled(nginx) {
  return [...new Set(proxied(nginx).filter(({ up }) => up && up.keepalive).map(({ up }) => up))];
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
  nginxUpstreamDefaults, CHECKS, DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG, gather, analyze, describeNginx, summarize, access, errorLogAlerts, nofile, listeners };
