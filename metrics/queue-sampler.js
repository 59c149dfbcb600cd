#!/usr/bin/env node
'use strict';
// The accept queues the kit sizes, sampled for node_exporter's textfile collector:
// for the app's Unix socket and nginx's TCP listeners, how many connections wait
// to be accepted and how many may (the kernel's sock_diag, as `ss -l` prints it:
// for a listening socket Recv-Q is the queue, Send-Q its limit). A Unix socket has
// no overflow counter; a full one shows only as nginx's EAGAIN 502. Also the
// values the cross-layer rules compare, as the host has them now (app.json, the
// nginx files, /proc/sys), so a rule broken on the host shows as an alert.
// Node built-ins only: this file is copied to hosts on its own.
//
//   node queue-sampler.js --textfile-dir /var/lib/prometheus/node-exporter \
//     --unix /run/tunekit-app/app.sock --tcp 80 --tcp 443 \
//     --app-config /etc/tunekit-app/app.json --nginx-conf /etc/nginx/nginx.conf [--interval-s 15 | --once]
//
// A directive the nginx files leave out counts at nginx's own default, read from
// defaults.json beside this file (`npm run generate` writes it from the
// definition's "Upstream default:" lines and version tables; the role copies
// both), for the nginx version `nginx -v` reports: an upstream block without
// keepalive_timeout keeps idle connections 60 s, and from nginx 1.29.7 one
// without `keepalive` pools too. The app's idle close is its keepAliveTimeout
// plus the buffer the app's Node adds (1 s from 20.18 and 22.9): this process
// runs on the host's Node, the app's (tunekit_node_bin), so its own is the app's.
//
// The file (FILE_NAME) is written whole, then renamed into place: node_exporter
// never reads half a sample. Metric names: metrics/README.md.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { parseArgs } = require('node:util');

const FILE_NAME = 'tunekit-queues.prom';
const DEFAULTS_FILE = path.join(__dirname, 'defaults.json');
const SOMAXCONN = '/proc/sys/net/core/somaxconn';

const OPTIONS = {
  'textfile-dir': { type: 'string' },
  unix: { type: 'string', multiple: true, default: [] },
  tcp: { type: 'string', multiple: true, default: [] },
  'app-config': { type: 'string' },
  'nginx-conf': { type: 'string' },
  'nginx-bin': { type: 'string', default: 'nginx' },
  defaults: { type: 'string', default: DEFAULTS_FILE },
  'interval-s': { type: 'string', default: '15' },
  once: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
};

const USAGE = 'usage: queue-sampler.js --textfile-dir DIR [--unix PATH]... [--tcp [ADDR:]PORT]... '
  + '[--app-config app.json] [--nginx-conf nginx.conf] [--nginx-bin nginx] [--defaults FILE] [--interval-s N | --once]';

// The tunekit runner binds its Unix socket under PATH~PID and then gives the file its
// path (app/socket.js bindName): the socket keeps the name it was bound with, so ss
// lists PATH~PID for PATH. (The same rule as lib/proc.js servedPath; metrics/
// imports nothing outside itself.)
const RUNNER_BIND_NAME = /~\d+$/;

/**
 * Listening sockets as ss prints them: [{ kind, local, queued, limit }], a unix one
 * with `ino` too (the inode of the file it was bound to, with ss -e) and `local` the
 * path it serves. unix lines: Netid State Recv-Q Send-Q Local Inode Peer Inode
 * [... ino:N dev:M/m]; tcp lines (-t alone: no Netid column): State Recv-Q Send-Q Local Peer.
 */
function parseSs(kind, text, details = text) {
  // The file inodes (ino:N, by the socket's own inode) come from a second `ss -e`
  // (`details`): with -e the kernel lists no listener at all once one has about
  // 1,000 connections in its accept queue (the waiting peers no longer fit its
  // dump; ss prints nothing, exit 0: iproute2 6.1, Linux 6.18, 2026-12-05), and
  // that queue is what this sampler is for. Without the inodes, the path names it.
  const inodes = new Map();
  for (const line of details.split('\n')) {
    const f = line.trim().split(/\s+/);
    const ino = / ino:(\d+) /.exec(`${line} `);
    if (ino && f.length > 5) inodes.set(f[5], Number(ino[1]));
  }
  const out = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    const at = kind === 'unix' ? 1 : 0;
    if (f[at] !== 'LISTEN' || f.length < at + 4) continue;
    const socket = { kind, local: f[at + 3], queued: Number(f[at + 1]), limit: Number(f[at + 2]) };
    if (kind === 'unix') {
      socket.local = socket.local.replace(RUNNER_BIND_NAME, '');
      if (inodes.has(f[5])) socket.ino = inodes.get(f[5]);
    }
    out.push(socket);
  }
  return out;
}

function ss(args) {
  const r = spawnSync('ss', args, { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(`\`ss ${args.join(' ')}\` failed (${r.error ? r.error.message : r.stderr.trim()}): install iproute2`);
  }
  return r.stdout;
}

function listening(kind) {
  if (kind !== 'unix') return parseSs(kind, ss(['-H', '-l', '-t', '-n']));
  return parseSs(kind, ss(['-H', '-l', '-x']), ss(['-H', '-l', '-x', '-e']));
}

/** Whether a tcp local address (127.0.0.1:80, [::]:443, *:80) is what `spec` names: ADDR:PORT, or PORT on any address. */
function tcpMatches(spec, local) {
  return /^\d+$/.test(spec) ? local.endsWith(`:${spec}`) : local === spec;
}

/**
 * One queue per socket asked for: { socket, kind, sockets, queued, limit }. With
 * SO_REUSEPORT (nginx's reuseport: one socket per worker) an address has several
 * queues: queued and limit are those of the fullest one, sockets how many there are.
 */
function queues(wanted, found, inodeOf = fileInode) {
  return wanted.map(({ kind, socket }) => {
    let mine = found.filter((s) => s.kind === kind && (kind === 'unix' ? s.local === socket : tcpMatches(socket, s.local)));
    // After the runner bound a deleted path again, its old socket still listens under
    // the same name; the one bound to the file at the path is the one nginx reaches.
    const ino = kind === 'unix' ? inodeOf(socket) : null;
    if (ino != null && mine.some((s) => s.ino === ino)) mine = mine.filter((s) => s.ino === ino);
    const fullest = mine.reduce((a, s) => (!a || s.queued / s.limit > a.queued / a.limit ? s : a), null);
    return { kind, socket, sockets: mine.length, queued: fullest ? fullest.queued : null, limit: fullest ? fullest.limit : null };
  });
}

function fileInode(file) {
  try {
    return fs.statSync(file).ino;
  } catch {
    return null;
  }
}

/** The words of an nginx file, comments dropped: directives and their arguments, `{`, `}`, `;`. */
function words(text) {
  const out = [];
  const re = /#[^\n]*|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([{};])|([^\s{};#"']+)/g;
  for (const m of text.matchAll(re)) {
    if (m[0].startsWith('#')) continue;
    out.push(m[1] ?? m[2] ?? m[3] ?? m[4]);
  }
  return out;
}

/** The files an `include` names (a `*` in its last part, as nginx globs it), relative to nginx.conf's directory. */
function included(pattern, confDir) {
  const full = path.resolve(confDir, pattern);
  if (!path.basename(full).includes('*')) return [full];
  const re = new RegExp(`^${path.basename(full).split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
  try {
    return fs.readdirSync(path.dirname(full)).filter((n) => re.test(n)).sort().map((n) => path.join(path.dirname(full), n));
  } catch {
    return [];
  }
}

/**
 * The directives of an nginx configuration, includes followed: [{ name, args, context }],
 * context the enclosing blocks, each with its arguments ('http > upstream tunekit_app'). Enough for the few values
 * the rules compare; `nginx -T` is the full reader (it needs root).
 */
function directives(file, confDir = path.dirname(file), context = [], out = [], seen = new Set()) {
  if (seen.has(file)) return out;
  seen.add(file);
  const w = words(fs.readFileSync(file, 'utf8'));
  const stack = [...context];
  let cur = [];
  for (const t of w) {
    if (t === '{') {
      stack.push(cur.join(' '));
      cur = [];
    } else if (t === '}') {
      stack.pop();
      cur = [];
    } else if (t === ';') {
      if (cur[0] === 'include') for (const f of included(cur[1], confDir)) directives(f, confDir, stack, out, seen);
      else if (cur.length) out.push({ name: cur[0], args: cur.slice(1), context: stack.join(' > ') });
      cur = [];
    } else {
      cur.push(t);
    }
  }
  return out;
}

/** An nginx time ("65", "65s", "1m", "500ms") in seconds. */
function seconds(v) {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(v);
  if (!m) return null;
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] || 's'];
}

/** A dotted version (1.29.7) compared with another: <0, 0, >0. */
function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) - (y[i] || 0);
  return 0;
}

/** The version the nginx binary reports (`nginx -v` writes "nginx version: nginx/1.22.1" to stderr). */
function nginxVersion(bin) {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  const m = /nginx\/(\d+(?:\.\d+)+)/.exec(`${r.stdout || ''}${r.stderr || ''}`);
  if (!m) throw new Error(`\`${bin} -v\` printed no version (${r.error ? r.error.message : (r.stderr || '').trim() || `exit ${r.status}`}): pass --nginx-bin PATH`);
  return m[1];
}

/**
 * The values the cross-layer rules compare, as this host has them:
 * [{ layer, name, value, source }]. Only what could be read is listed; a source
 * that could not be read (an app.json half-written by a deploy) is named in
 * `out.errors` and the others are still read, the queues still sampled.
 * `nginx`: { defaults, version } — nginx's defaults (defaults.json) and the
 * version running; without them a directive left out is not counted.
 */
function settings({ appConfig, nginxConf, nginx = null }) {
  const out = [];
  out.errors = [];
  const add = (layer, name, value, source) => { if (Number.isFinite(value)) out.push({ layer, name, value, source }); };
  const from = (source, read) => {
    try {
      read();
    } catch (err) {
      out.errors.push(`${source}: ${err.message}`);
    }
  };
  from(SOMAXCONN, () => add('kernel', 'somaxconn', Number(fs.readFileSync(SOMAXCONN, 'utf8').trim()), SOMAXCONN));
  let listen = null;
  const bufferMs = nginx ? nodeKeepaliveBufferMs(nginx.defaults.nodeKeepaliveBuffer) : null;
  if (appConfig) from(appConfig, () => { listen = appSettings(appConfig, add, bufferMs); });
  if (nginxConf) from(nginxConf, () => nginxSettings(nginxConf, listen, add, nginx));
  return out;
}

/**
 * What Node adds to keepAliveTimeout before it closes an idle connection, in the
 * Node running this: server.keepAliveTimeoutBuffer where it is a setting, else
 * the fixed buffer of the releases that have one (defaults.json's facts), else 0.
 */
function nodeKeepaliveBufferMs(buffer, version = process.versions.node, own = new (require('node:http').Server)().keepAliveTimeoutBuffer) {
  if (typeof own === 'number') return own;
  if (!buffer) return 0;
  const major = (v) => v.split('.')[0];
  const has = compareVersions(version, buffer.since) >= 0
    || (major(version) === major(buffer.backported) && compareVersions(version, buffer.backported) >= 0);
  return has ? buffer.ms : 0;
}

/** app.json's timeouts and backlog; returns its listen ("unix:/path", "tcp:host:port"). */
function appSettings(appConfig, add, bufferMs) {
  const app = JSON.parse(fs.readFileSync(appConfig, 'utf8'));
  add('app', 'keepalive_timeout_seconds', app.keepAliveTimeoutMs / 1000, appConfig);
  if (bufferMs != null) add('app', 'keepalive_close_seconds', (app.keepAliveTimeoutMs + bufferMs) / 1000, appConfig);
  add('app', 'headers_timeout_seconds', app.headersTimeoutMs / 1000, appConfig);
  add('app', 'listen_backlog', app.backlog, appConfig);
  return app.listen;
}

/**
 * nginx's worker limits, and the keepalive_timeout of the upstream blocks that
 * keep idle connections (a `keepalive` directive; every block from the version
 * where that is nginx's default) and name the app's listen as a server
 * (per-worker sockets: PATH.N); without an app.json, of every such block. The
 * longest counts: it is the one the app must outlast. A block without its own
 * keepalive_timeout keeps them for nginx's default; a block that keeps none
 * cannot race.
 */
function nginxSettings(nginxConf, listen, add, nginx) {
  const d = directives(nginxConf);
  const first = (name, context) => d.find((x) => x.name === name && (context === undefined || x.context === context));
  const inBlock = (name, block) => d.find((x) => x.name === name && x.context === block);
  const target = listen ? listen.replace(/^tcp:/, '') : null;
  const isApp = (server) => !target || server === target || server.startsWith(`${target}.`);
  const poolsByDefault = Boolean(nginx && nginx.version && compareVersions(nginx.version, nginx.defaults.upstreamKeepaliveDefaultSince) >= 0);
  const pools = (block) => (inBlock('keepalive', block) ? Number(inBlock('keepalive', block).args[0]) > 0 : poolsByDefault);
  const blocks = [...new Set(d.filter((x) => x.name === 'server' && /> upstream \S+$/.test(x.context) && isApp(x.args[0])).map((x) => x.context))]
    .filter(pools);
  const timeoutOf = (block) => {
    const own = inBlock('keepalive_timeout', block);
    if (own) return seconds(own.args[0]);
    return nginx ? nginx.defaults.upstreamKeepaliveTimeoutS : null;
  };
  const upstreamTimeouts = blocks.map(timeoutOf).filter((v) => v !== null);
  if (upstreamTimeouts.length) add('nginx', 'upstream_keepalive_timeout_seconds', Math.max(...upstreamTimeouts), nginxConf);
  const wc = first('worker_connections', 'events');
  if (wc) add('nginx', 'worker_connections', Number(wc.args[0]), nginxConf);
  else if (nginx) add('nginx', 'worker_connections', nginx.defaults.workerConnections, nginxConf);
  const nofile = first('worker_rlimit_nofile', '');
  if (nofile) add('nginx', 'worker_rlimit_nofile', Number(nofile.args[0]), nginxConf);
}

/** nginx's defaults, as `npm run generate` wrote them (defaults.json). */
function readDefaults(file) {
  const d = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const key of ['upstreamKeepaliveTimeoutS', 'workerConnections', 'upstreamKeepaliveDefaultSince', 'nodeKeepaliveBuffer']) {
    if (d[key] === undefined) throw new Error(`${file} has no ${key}: copy the defaults.json of the same kit version as this file`);
  }
  return d;
}

/** A label value as the text format writes it. */
const label = (v) => String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/** The sample in Prometheus text format 0.0.4. */
function format(qs, sets, now = Date.now()) {
  const lines = [];
  const metric = (name, help, rows) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of rows) {
      const l = Object.entries(labels).map(([k, v]) => `${k}="${label(v)}"`).join(',');
      lines.push(`${name}${l ? `{${l}}` : ''} ${value}`);
    }
  };
  const seen = qs.filter((q) => q.sockets > 0);
  metric('tunekit_listen_queue_length', 'Connections waiting to be accepted on a listening socket (ss Recv-Q); with SO_REUSEPORT, the fullest of its sockets.',
    seen.map((q) => [{ socket: q.socket, kind: q.kind }, q.queued]));
  metric('tunekit_listen_queue_limit', 'How many connections that queue holds: min(listen backlog, net.core.somaxconn) (ss Send-Q).',
    seen.map((q) => [{ socket: q.socket, kind: q.kind }, q.limit]));
  metric('tunekit_listen_sockets', 'Listening sockets on that path or address (0: nothing listens; above 1: SO_REUSEPORT).',
    qs.map((q) => [{ socket: q.socket, kind: q.kind }, q.sockets]));
  metric('tunekit_setting', 'A value the cross-layer rules compare, as the host has it now (docs/observability.md#drift).',
    sets.map((s) => [{ layer: s.layer, name: s.name }, s.value]));
  metric('tunekit_queue_sampler_last_run_timestamp_seconds', 'When this file was written.', [[{}, (now / 1000).toFixed(3)]]);
  return `${lines.join('\n')}\n`;
}

/** Write text to dir/name whole: a temp file (not *.prom, which the collector would read), then rename. */
function writeAtomically(dir, name, text) {
  const tmp = path.join(dir, `.${name}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, text, { mode: 0o644 });
  fs.renameSync(tmp, path.join(dir, name));
}

/** nginx's defaults and running version, or what kept them from being read (a directive left out is then not counted). */
function nginxFacts(o) {
  try {
    return { facts: { defaults: readDefaults(o.defaults), version: nginxVersion(o.nginxBin) } };
  } catch (err) {
    return { facts: null, error: `nginx's defaults: ${err.message}` };
  }
}

/** One sample: read the queues and settings, write the file. Returns the text written and what could not be read. */
function sampleOnce(o) {
  const wanted = [...o.unix.map((socket) => ({ kind: 'unix', socket })), ...o.tcp.map((socket) => ({ kind: 'tcp', socket }))];
  const found = [...(o.unix.length ? listening('unix') : []), ...(o.tcp.length ? listening('tcp') : [])];
  const nginx = o.nginxConf ? nginxFacts(o) : null;
  const sets = settings({ ...o, nginx: nginx && nginx.facts });
  if (nginx && nginx.error) sets.errors.push(nginx.error);
  const text = format(queues(wanted, found), sets);
  writeAtomically(o.textfileDir, FILE_NAME, text);
  return { text, errors: sets.errors };
}

function options(argv) {
  const { values: v } = parseArgs({ args: argv, options: OPTIONS, strict: true });
  if (v.help) return { help: true };
  if (!v['textfile-dir']) throw new Error(`--textfile-dir is required (node_exporter's --collector.textfile.directory)\n${USAGE}`);
  if (!fs.statSync(v['textfile-dir'], { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`--textfile-dir ${v['textfile-dir']} is not a directory: create it, or pass node_exporter's --collector.textfile.directory`);
  }
  const intervalS = Number(v['interval-s']);
  if (!(intervalS > 0)) throw new Error(`--interval-s ${v['interval-s']} is not a positive number of seconds`);
  for (const t of v.tcp) if (!/^(\d+|.+:\d+)$/.test(t)) throw new Error(`--tcp ${t}: give PORT or ADDR:PORT as ss prints it (127.0.0.1:80, [::]:443)`);
  return { textfileDir: v['textfile-dir'], unix: v.unix, tcp: v.tcp, appConfig: v['app-config'], nginxConf: v['nginx-conf'],
    nginxBin: v['nginx-bin'], defaults: v.defaults, intervalS, once: v.once };
}

function main(argv = process.argv.slice(2)) {
  let o;
  try {
    o = options(argv);
  } catch (err) {
    console.error(`queue-sampler: ${err.message}`);
    process.exit(2);
  }
  if (o.help) {
    console.log(USAGE);
    return;
  }
  const tick = () => {
    try {
      const { errors } = sampleOnce(o);
      for (const e of errors) console.error(`queue-sampler: cannot read ${e}`);
      if (errors.length && o.once) process.exitCode = 1;
    } catch (err) {
      // ss failed or the directory went away: the file keeps its last sample,
      // whose timestamp shows its age; the next tick tries again.
      console.error(`queue-sampler: ${err.message}`);
      if (o.once) process.exitCode = 1;
    }
  };
  tick();
  if (o.once) return;
  const timer = setInterval(tick, o.intervalS * 1000);
  for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => clearInterval(timer));
}

if (require.main === module) main();

module.exports = { parseSs, queues, words, directives, seconds, settings, readDefaults, compareVersions, nodeKeepaliveBufferMs, format, sampleOnce, FILE_NAME, DEFAULTS_FILE };
