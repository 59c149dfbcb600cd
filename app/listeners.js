'use strict';
// The primary's listeners: bind them at the start (app/socket.js does the checks
// and the bind), adopt the socket Node's cluster binds for round-robin, say which
// binding a slot's worker listens on, and release them (inode-checked) at the stop.
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.s (settings), p.listen (settings.endpoint), p.log,
//   p.bound (bindings: one per slot for per-worker, else one),
//   p.rrSocket (round-robin: the socket Node's cluster bound, as last seen),
//   p.infos (worker.id -> info: who else listens).

const fs = require('node:fs');
const { socketPaths } = require('./settings');
const sock = require('./socket');

async function bindListeners(p) {
  const { s, listen } = p;
  if (listen.kind === 'fd') {
    p.bound.push(sock.adoptFd(listen.fd, { systemd: listen.systemd }));
    p.log('info', 'listen', { listen: listen.text, fd: listen.fd, owner: 'inherited' });
    return;
  }
  if (listen.kind === 'tcp') {
    if (s.strategy === 'round-robin') return; // Node's cluster binds it
    p.bound.push(sock.bindTcp(listen.host, listen.port, listen.ipv6));
    p.log('info', 'listen', { listen: listen.text, backlog: s.backlog });
    return;
  }
  const paths = socketPaths(s);
  for (const path of paths) {
    sock.checkPathLength(path);
    sock.checkDirectory(path);
  }
  sock.resolveGroup(s.socketGroup); // refuse an unknown group before touching anything
  for (const path of paths) {
    const removed = await sock.preparePath(path);
    if (removed) p.log('warn', 'stale-socket-removed', { path, reason: 'connect() was refused: nobody accepts on it' });
  }
  if (s.strategy === 'round-robin') {
    // Node's cluster binds the path when the first worker listens, in this
    // process: the umask gives the socket its mode from the first moment.
    process.umask(0o777 & ~s.modeBits);
    return;
  }
  for (const path of paths) {
    const b = sock.bindUnix(path, s);
    p.bound.push(b);
    p.log('info', 'listen', { listen: `unix:${path}`, mode: s.socketMode, group: s.socketGroup || null, backlog: s.backlog });
  }
}

/**
 * Round-robin: Node's cluster bound the socket (again, if every worker had left).
 * Make its group and mode right, and remember which file it is. `info` is the
 * worker that just listened: while another one listens, Node's cluster still holds
 * the socket it bound first, so another file at the path is not Node's: left alone.
 */
function adoptRoundRobinSocket(p, info) {
  if (p.s.strategy !== 'round-robin' || p.listen.kind !== 'unix') return;
  const path = p.listen.path;
  let st;
  try {
    st = fs.lstatSync(path);
  } catch {
    return;
  }
  const gid = sock.resolveGroup(p.s.socketGroup);
  const mode = p.s.modeBits;
  if (p.rrSocket && sock.sameFile(sock.identity(path), p.rrSocket) && (gid === null || st.gid === gid)) return;
  const othersListen = [...p.infos.values()].some((other) => other !== info && other.state === 'ready');
  if (p.rrSocket && othersListen && sock.pathState(p.rrSocket) !== 'ours') return;
  if (gid !== null && st.gid !== gid) fs.chownSync(path, -1, gid);
  if ((st.mode & 0o777) !== mode) fs.chmodSync(path, mode);
  p.rrSocket = { kind: 'unix', path, ...sock.identity(path), owned: true, boundAt: Date.now() };
  p.log('info', 'listen', { listen: `unix:${path}`, mode: p.s.socketMode, group: p.s.socketGroup || null, backlog: p.s.backlog, bound_by: 'node-cluster' });
}

function releaseListeners(p) {
  for (const b of [...p.bound, p.rrSocket]) {
    if (!b || b.kind !== 'unix') continue;
    const result = sock.release(b);
    if (result === 'removed') p.log('info', 'socket-removed', { path: b.path });
    if (result === 'replaced') p.log('warn', 'socket-kept', { path: b.path, reason: 'another socket now sits at the path; not ours to remove' });
  }
  p.bound = p.bound.filter((b) => b.kind !== 'unix');
  p.rrSocket = null;
}

/** The binding a slot's worker listens on (undefined: Node's cluster binds). */
function bindingOf(p, slot) {
  return p.s.strategy === 'per-worker' ? p.bound[slot.n - 1] : p.bound[0];
}

module.exports = { bindListeners, adoptRoundRobinSocket, releaseListeners, bindingOf };
