'use strict';
// The `# Live:` line of a variable's comment block (roles/tunekit/defaults/main/*.yml):
// where a running host shows the variable's value, read by `tunekit doctor`
// (lib/live/variables.js) to evaluate the cross-layer rules over a live host, kit
// deployed or not. One or more sources, the first that the host has wins,
// separated by " or ":
//
//   nginx DIRECTIVE[ PARAM] in CONTEXT[ as SHAPE]
//         a directive of `nginx -T`; CONTEXT is main, events, http, or the blocks
//         the app is reached through: upstream (the first upstream{} block a
//         location proxies to), server (the server{} that holds that location),
//         location (that location, or what it inherits from server and http).
//         PARAM: a listen/server parameter, "backlog=" (its value) or "quic" (a
//         flag: any such listen). Absent: the definition's Upstream default
//         (never typed again), or not read when it states none.
//         PARAM of proxy_set_header: the header's name (its value; a variable a
//         map sets counts at the map's default).
//         SHAPE: seconds (nginx's time units), number, flag (present: true), port
//         (of the listen's address), path (a unix: server's path), kind (the
//         servers: uds, per-worker, tcp), default-server (default_server, or the
//         first server{} that listens on the port: nginx's own default)
//   nginx -V                         nginx's version
//   nginx -V --with-MODULE           whether nginx was built with MODULE (true/false)
//   sysctl NAME                      /proc/sys/NAME
//   limits nginx|app FIELD soft|hard a field of /proc/PID/limits ("Max open files"):
//                                    nginx's master, the lowest of the app's processes
//   listener app queue               the app socket's accept queue (sock_diag: ss -l)
//   socket mode|group                the app socket's file (stat)
//   systemd PROPERTY of app[ as seconds]  `systemctl show` of the service the app runs in
//   healthz FIELD[ as seconds]       the app's GET /healthz (the kit's runner, the example app)
//   process node-version             the Node version the app's processes run (/proc/PID/exe
//                                    --version; a cluster primary's workers first)
//   app.json FIELD[ as seconds]      the runner's settings (as seconds: a value in ms / 1000)
//   probe idle-close|headers-wait|buffer
//                                    measured black-box over the app's socket or loopback
//                                    port (lib/probe.js); buffer: 0, the measured close has it
//   derived                          the definition's own expression, over the live values
//                                    it reads (each one live, or the kit's own table)
//   kit                              the kit's own table, the same on every host
//   no: REASON                       not read on a live host, and why
//
// parse() checks the grammar; lib/config/definition.js calls it on every line.

const KINDS = ['nginx', 'sysctl', 'limits', 'listener', 'socket', 'systemd', 'healthz', 'app.json', 'process', 'probe', 'derived', 'kit', 'no'];
const CONTEXTS = ['main', 'events', 'http', 'upstream', 'server', 'location'];
const SHAPES = ['seconds', 'number', 'flag', 'port', 'path', 'kind', 'default-server'];

/** One source, "nginx keepalive_timeout in upstream as seconds", as { kind, ... }; throws on a line outside the grammar. */
function source(text, where) {
  const bad = (why) => new Error(`${where}: "# Live: ${text}": ${why}`);
  const [kind, ...rest] = text.trim().split(/\s+/);
  const tail = rest.join(' ');
  if (text.startsWith('no:')) {
    if (!text.slice(3).trim()) throw bad('say why it is not read live');
    return { kind: 'no', why: text.slice(3).trim() };
  }
  if (!KINDS.includes(kind)) throw bad(`a source is one of ${KINDS.join(', ')}`);
  if (kind === 'nginx') {
    if (tail === '-V') return { kind, version: true };
    const module = /^-V --with-(\w+)$/.exec(tail);
    if (module) return { kind, module: module[1] };
    const m = /^(\w+)(?: (\w+=?))? in (\w+)(?: as ([\w-]+))?$/.exec(tail);
    if (!m) throw bad('write "nginx DIRECTIVE[ PARAM] in CONTEXT[ as SHAPE]", "nginx -V" or "nginx -V --with-MODULE"');
    if (!CONTEXTS.includes(m[3])) throw bad(`the context is one of ${CONTEXTS.join(', ')}`);
    if (m[4] && !SHAPES.includes(m[4])) throw bad(`the shape is one of ${SHAPES.join(', ')}`);
    return { kind, directive: m[1], param: m[2] || null, context: m[3], shape: m[4] || null };
  }
  if (kind === 'sysctl' && /^[\w.]+$/.test(tail)) return { kind, name: tail };
  const limit = /^(nginx|app) (.+) (soft|hard)$/.exec(tail);
  if (kind === 'limits' && limit) return { kind, process: limit[1], field: limit[2], which: limit[3] };
  if (kind === 'listener' && tail === 'app queue') return { kind };
  if (kind === 'socket' && /^(mode|group)$/.test(tail)) return { kind, field: tail };
  const field = /^(\w+)( as seconds)?$/.exec(tail);
  if ((kind === 'healthz' || kind === 'app.json') && field) return { kind, field: field[1], seconds: Boolean(field[2]) };
  const unit = /^(\w+) of app( as seconds)?$/.exec(tail);
  if (kind === 'systemd' && unit) return { kind, property: unit[1], seconds: Boolean(unit[2]) };
  if (kind === 'probe' && /^(idle-close|headers-wait|buffer)$/.test(tail)) return { kind, measure: tail };
  if (kind === 'process' && tail === 'node-version') return { kind, field: tail };
  if ((kind === 'kit' || kind === 'derived') && !tail) return { kind };
  throw bad(`not a ${kind} source (lib/config/live.js has the grammar)`);
}

/** A whole `# Live:` line: its sources in order ("A or B"). */
function parse(text, where = text) {
  if (/^no:/.test(text.trim())) return [source(text.trim(), where)];
  return text.split(/ or /).map((s) => source(s, where));
}

/** A source in words, for the docs' table and doctor's findings. */
function describe(s) {
  switch (s.kind) {
    case 'nginx':
      if (s.version) return '`nginx -V`: its version';
      if (s.module) return `\`nginx -V\`: built --with-${s.module}`;
      return `nginx \`${s.directive}${s.param ? ` ${s.param}` : ''}\` in ${s.context}${s.shape ? ` (${s.shape})` : ''}`;
    case 'sysctl': return `sysctl \`${s.name}\``;
    case 'limits': return `/proc/PID/limits "${s.field}" (${s.which}) of ${s.process === 'nginx' ? "nginx's master" : "the app's processes"}`;
    case 'listener': return "the app socket's accept queue (sock_diag, `ss -l`)";
    case 'socket': return `the app socket's ${s.field} (stat)`;
    case 'systemd': return `\`systemctl show -p ${s.property}\` of the app's service`;
    case 'healthz': return `GET /healthz \`${s.field}\``;
    case 'app.json': return `app.json \`${s.field}\`${s.seconds ? ' (ms / 1000)' : ''}`;
    case 'process': return "the Node version of the app's processes (`/proc/PID/exe --version`)";
    case 'probe': return {
      'idle-close': 'measured: when the app closes an idle connection',
      'headers-wait': 'measured: how long the app waits for unfinished headers',
      buffer: 'measured: 0, the measured close includes it',
    }[s.measure];
    case 'kit': return "the kit's own table";
    case 'derived': return "the definition's expression over the live values it reads";
    default: return `not live: ${s.why}`;
  }
}

/**
 * The setting a user changes where a source reads it, in their own terms (the
 * directive, the sysctl, the limit), for doctor's findings; null for the kit's
 * own table and its derivations, which no host setting names.
 */
function term(s) {
  switch (s.kind) {
    case 'nginx':
      if (s.version) return "nginx's version";
      if (s.module) return `nginx's --with-${s.module}`;
      if (s.shape === 'kind') return `the upstream block's ${s.directive} lines`;
      if (s.shape === 'default-server') return 'listen default_server';
      return `${s.directive}${s.param ? ` ${s.param}` : ''}`;
    case 'sysctl': return s.name;
    case 'limits': return `the ${s.which} "${s.field}" limit of ${s.process === 'nginx' ? "nginx's master" : "the app's processes"}`;
    case 'listener': return "the app's listen backlog";
    case 'socket': return `the app socket's ${s.field}`;
    case 'systemd': return s.property;
    case 'healthz': return `the app's ${s.field} (GET /healthz)`;
    case 'app.json': return `app.json ${s.field}`;
    case 'process': return "the app's Node version";
    case 'probe': return {
      'idle-close': "the app's idle close (measured)",
      'headers-wait': "the app's headers wait (measured)",
      buffer: "Node's keep-alive buffer",
    }[s.measure];
    default: return null;
  }
}

module.exports = { KINDS, CONTEXTS, SHAPES, parse, describe, term };
