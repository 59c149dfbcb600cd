'use strict';
// What the kernel says about a listening socket, for the primary (app/socket.js,
// app/listeners.js) and the workers (app/worker.js): the address a handle is
// bound to and whether it listens (from /proc/net), who holds an address that is
// taken (from `ss -p`), and a bind or listen error said in one line with its fix.
//
// Why the primary checks a TCP bind itself: libuv defers EADDRINUSE from bind()
// to the listen() that follows (uv__tcp_bind keeps it as the handle's
// delayed_error, https://github.com/libuv/libuv/blob/v1.x/src/unix/tcp.c). The
// primary binds without listening, so the error would stay in its handle; a
// worker that receives the descriptor gets a socket that never bound, and its
// listen() binds one itself: a random port on every interface (INADDR_ANY). Node's
// own cluster checks the same thing for its workers (checkBindError in
// lib/net.js: the port getsockname() reports must be the port asked for).
// getsockname() on such a handle returns the deferred error.

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const { spawnSync } = require('node:child_process');

function errnoName(rval) {
  try {
    return require('node:util').getSystemErrorName(rval);
  } catch {
    return String(rval);
  }
}

/** The address a bound TCP handle reports ({ address, port, family }), or the errno name of its failed bind. */
function tcpBound(handle) {
  const out = {};
  const err = handle.getsockname(out);
  return err ? { error: errnoName(err) } : out;
}

/** The same address, written the same way (IPv6 compressed, lower case). */
function sameHost(a, b) {
  if (a === b) return true;
  if (!net.isIPv6(a) || !net.isIPv6(b)) return false;
  const canonical = (h) => new URL(`http://[${h}]/`).hostname;
  return canonical(a) === canonical(b);
}

// ---- /proc/net -------------------------------------------------------------------

/** An address of /proc/net/tcp or tcp6 ("0100007F:0BB9"): its IP written as usual, and its port. */
function procTcpAddress(hex, v6) {
  const [ip, port] = hex.split(':');
  // Each 32-bit word is printed in the host's byte order.
  const bytes = Buffer.alloc(ip.length / 2);
  for (let w = 0; w < ip.length / 8; w++) {
    const word = Number.parseInt(ip.slice(w * 8, w * 8 + 8), 16);
    if (os.endianness() === 'LE') bytes.writeUInt32LE(word, w * 4);
    else bytes.writeUInt32BE(word, w * 4);
  }
  let address;
  if (v6) {
    const groups = [];
    for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
    address = new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
  } else {
    address = [...bytes].join('.');
  }
  return { address, port: Number.parseInt(port, 16) };
}

function readProc(file) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(1).filter(Boolean);
  } catch {
    return [];
  }
}

// TCP_LISTEN in the kernel's tcp_states.h; __SO_ACCEPTCON in a Unix socket's flags.
const TCP_LISTEN = '0A';
const UNIX_ACCEPTCON = 0x10000;

/**
 * The sockets of this network namespace by inode, from /proc/net/{tcp,tcp6,unix}:
 * Map(inode -> { kind: 'tcp', address, port, listening } | { kind: 'unix', path, listening }).
 * A Unix socket's path is the name it was bound with (renaming its file does not change it).
 */
function procSockets() {
  const out = new Map();
  for (const [file, v6] of [['/proc/net/tcp', false], ['/proc/net/tcp6', true]]) {
    for (const line of readProc(file)) {
      const f = line.trim().split(/\s+/);
      out.set(f[9], { kind: 'tcp', ...procTcpAddress(f[1], v6), listening: f[3] === TCP_LISTEN });
    }
  }
  for (const line of readProc('/proc/net/unix')) {
    // Num RefCount Protocol Flags Type St Inode Path
    const f = line.trim().split(/\s+/);
    out.set(f[6], { kind: 'unix', path: f.slice(7).join(' '), listening: (Number.parseInt(f[3], 16) & UNIX_ACCEPTCON) !== 0 });
  }
  return out;
}

/** The socket inode behind one of this process's descriptors, or null. */
function inodeOf(fd, pid = 'self') {
  try {
    const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
    return m ? m[1] : null;
  } catch {
    return null;
  }
}

/** What the kernel says the socket behind descriptor `fd` is (procSockets' shape), or null without /proc. */
function socketOf(fd) {
  const ino = inodeOf(fd);
  return ino ? procSockets().get(ino) || null : null;
}

/** The listening sockets this process holds: [{ kind, address, port } | { kind, path }]. */
function ownListening() {
  let fds = [];
  try {
    fds = fs.readdirSync('/proc/self/fd');
  } catch {
    return [];
  }
  const all = procSockets();
  return fds.map((fd) => all.get(inodeOf(fd))).filter((s) => s && s.listening);
}

/** A socket of procSockets() as a listen string: tcp:HOST:PORT (tcp:[::1]:PORT) or unix:PATH. */
function listenText(s) {
  if (s.kind === 'unix') return `unix:${s.path}`;
  return `tcp:${net.isIPv6(s.address) ? `[${s.address}]` : s.address}:${s.port}`;
}

/** Whether a socket of procSockets() is bound where `endpoint` (settings.endpoint, tcp) asks. */
function atTcpEndpoint(s, endpoint) {
  return s.kind === 'tcp' && s.port === endpoint.port && sameHost(s.address, endpoint.host);
}

/**
 * What is wrong with a TCP handle about to listen for `endpoint` (settings.endpoint),
 * or null: its bind failed, it is not bound, or it is bound elsewhere than a tcp:
 * endpoint asks (an inherited socket, fd:N, only has to be bound).
 */
function handleFault(handle, endpoint) {
  const at = tcpBound(handle);
  if (at.error) return `its bind failed (${at.error})`;
  if (!at.port) return 'it is not bound';
  const s = { kind: 'tcp', ...at };
  if (endpoint.kind === 'tcp' && !atTcpEndpoint(s, endpoint)) return `it is bound to ${listenText(s)}`;
  return null;
}

// ---- who holds an address ---------------------------------------------------------

/** A process's command line, one line, cut short. */
function commandOf(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    return text.length > 80 ? `${text.slice(0, 79)}…` : text;
  } catch {
    return null;
  }
}

/**
 * Whether a listener ss prints at `local` (127.0.0.1:80, [::1]:80, 0.0.0.0:80, *:80,
 * 127.0.0.1%lo:80) keeps `host` from binding its port: the same address, or a
 * wildcard on either side.
 */
function overlaps(local, host) {
  if (!local || !host) return Boolean(local);
  const at = local.slice(0, local.lastIndexOf(':')).replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const any = (h) => ['*', '0.0.0.0', '::'].includes(h);
  return any(at) || any(host) || sameHost(at, host);
}

/**
 * The processes listening on a TCP port (on `host`, or on any address when a
 * wildcard is involved), or on the Unix socket whose file has inode `ino`, as
 * `ss -p` names them: [{ pid, command }]; [] when ss names none (another
 * user's process seen by a non-root user), null without ss.
 * A Unix socket is found by its file's inode (`ss -e`), else by its `path`:
 * with -e the kernel lists no listener at all once one has about 1,000
 * connections waiting in its accept queue (ss prints nothing, exit 0; iproute2
 * 6.1, Linux 6.18, 2026-12-05), as an overloaded app's socket has.
 */
function holders({ port, host, ino, path: socketPath }) {
  const byName = (local) => local === socketPath || (local.startsWith(`${socketPath}~`) && /^\d+$/.test(local.slice(socketPath.length + 1)));
  const tries = port ? [[['-H', '-l', '-t', '-n', '-p', 'sport', '=', `:${port}`], (f) => overlaps(f[3], host)]]
    : [[['-H', '-l', '-x', '-p', '-e'], (f, line) => ` ${line} `.includes(` ino:${ino} `)],
      ...(socketPath ? [[['-H', '-l', '-x', '-p'], (f) => byName(f[4] || '')]] : [])];
  const pids = new Set();
  for (const [args, matches] of tries) {
    const r = spawnSync('ss', args, { encoding: 'utf8' });
    if (r.error || r.status !== 0) return null;
    // tcp: State Recv-Q Send-Q Local:Port Peer:Port users; unix: Netid State Recv-Q Send-Q Local Inode ... [ino:N dev:M/m]
    for (const line of r.stdout.split('\n')) {
      if (!matches(line.trim().split(/\s+/), line)) continue;
      for (const m of line.matchAll(/pid=(\d+)/g)) pids.add(Number(m[1]));
    }
    if (pids.size) break;
  }
  return [...pids].filter((pid) => pid !== process.pid).map((pid) => ({ pid, command: commandOf(pid) }));
}

/** "pid 12 (node server.js)" for each holder, or why none is named. */
function heldBy(found) {
  if (found === null) return 'held by another process (install iproute2 for ss to name it)';
  if (!found.length) return `held by another process (ss names none: a process of another user${process.getuid && process.getuid() !== 0 ? '; run ss -ltnp or ss -xlp as root to see it' : ''})`;
  return `held by ${found.map((h) => `pid ${h.pid}${h.command ? ` (${h.command})` : ''}`).join(', ')}`;
}

/** The lowest port an unprivileged process may bind (net.ipv4.ip_unprivileged_port_start, 1024 by default). */
function unprivilegedPortStart() {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8').trim());
  } catch {
    return 1024;
  }
}

/**
 * One line for a TCP bind or listen that failed with errno `code`: the address,
 * what holds it or what is missing, and the fix.
 */
function tcpBindFailure(endpoint, code) {
  const where = endpoint.text;
  if (code === 'EADDRINUSE') {
    return `${where} is already in use, ${heldBy(holders({ port: endpoint.port, host: endpoint.host }))}: stop that process or choose another port (tunekit_app_tcp_port, --listen tcp:HOST:PORT)`;
  }
  if (code === 'EACCES' && endpoint.port < unprivilegedPortStart()) {
    return `cannot bind ${where}: binding a port below ${unprivilegedPortStart()} needs root or CAP_NET_BIND_SERVICE; use a port >= ${unprivilegedPortStart()} (nginx in front takes 80 and 443), or give the runner the capability (AmbientCapabilities=CAP_NET_BIND_SERVICE in its systemd unit)`;
  }
  if (code === 'EINVAL' && !net.isIP(endpoint.host)) {
    return `cannot bind ${where}: HOST must be an IP address, not a name (tcp:127.0.0.1:${endpoint.port} or tcp:[::1]:${endpoint.port})`;
  }
  if (code === 'EADDRNOTAVAIL') {
    return `cannot bind ${where}: no interface of this host has the address ${endpoint.host} (EADDRNOTAVAIL); use one it has (ip -brief address), e.g. 127.0.0.1`;
  }
  return `cannot bind ${where}: ${code}`;
}

/** The holders of the Unix socket at `socketPath` (by the inode of its file), said as heldBy() says them. */
function unixHeldBy(socketPath) {
  let ino;
  try {
    ino = fs.statSync(socketPath).ino;
  } catch {
    return heldBy([]);
  }
  return heldBy(holders({ ino, path: socketPath }));
}

module.exports = {
  errnoName, tcpBound, sameHost, procTcpAddress, procSockets, socketOf, ownListening, listenText, atTcpEndpoint, handleFault,
  holders, heldBy, unixHeldBy, unprivilegedPortStart, tcpBindFailure,
};
