'use strict';
// The primary's listeners: bind them at the start (app/socket.js does the checks
// and the bind), publish and confirm each one when the first worker listens on it
// (workerListening: the path given to a Unix socket, the address it accepts on
// read back from the kernel, logged as `listen` before `ready`), adopt the socket
// Node's cluster binds for round-robin, say which binding a slot's worker listens
// on, and release them (inode-checked) at the stop.
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.s (settings), p.listen (settings.endpoint), p.log, p.state,
//   p.bound (bindings: one per slot for per-worker, else one),
//   p.rrSocket (round-robin: the socket Node's cluster bound, as last seen),
//   p.infos (worker.id -> info: who else listens; info.listener, the binding sent),
//   p.checks (app/socket-watch.js: when a path was last seen ours);
// and calls p.shutdown when a listener cannot be published or confirmed at the start.
// A binding (app/socket.js) gains here: listening (a worker listens on it),
// announced (published and said), confirmed (read back from the kernel), failed
// (the last publish failure's code).

const fs = require('node:fs');
const nodePath = require('node:path');
const { socketPaths } = require('./settings');
const { AppError, ListenError } = require('./errors');
const sock = require('./socket');
const address = require('./address');

async function bindListeners(p) {
  const { s, listen } = p;
  if (listen.kind === 'fd') {
    p.bound.push(sock.adoptFd(listen.fd, { systemd: listen.systemd }));
    return;
  }
  if (listen.kind === 'tcp') {
    const b = sock.bindTcp(listen);
    // Round-robin: Node's cluster binds the address itself when the first worker
    // listens; this bind only finds out, before any fork, whether it can.
    if (s.strategy === 'round-robin') b.handle.close();
    else p.bound.push(b);
    return;
  }
  const paths = socketPaths(s);
  for (const path of paths) {
    sock.checkPathLength(path);
    sock.checkDirectory(path);
  }
  sock.resolveGroup(s.socketGroup); // refuse an unknown group before touching anything
  const found = [];
  for (const path of paths) {
    for (const file of sock.removeLeftovers(path)) p.log('warn', 'stale-socket-removed', { path: file, reason: 'left by a runner that died before its workers listened' });
    found.push(await sock.inspectPath(path));
  }
  // A socket bound at the path itself (Node's cluster binds it so for round-robin; a
  // path with no room for a bind name) needs the stale file gone first; one bound
  // beside the path replaces it when it is published.
  const inPlace = (path) => s.strategy === 'round-robin' || sock.bindName(path) === path;
  paths.forEach((path, i) => {
    if (!found[i] || !inPlace(path)) return;
    sock.removeStale(path, found[i].stale);
    found[i] = null;
    p.log('warn', 'stale-socket-removed', { path, reason: 'connect() was refused: nobody accepts on it' });
  });
  if (s.strategy === 'round-robin') {
    // Node's cluster binds the path when the first worker listens, in this
    // process: the umask gives the socket its mode from the first moment.
    process.umask(0o777 & ~s.modeBits);
    return;
  }
  paths.forEach((path, i) => p.bound.push(sock.bindUnix(path, s, { replaces: found[i] && found[i].stale })));
}

/**
 * A worker reports it listens (lifecycle.js, MSG.LISTENING). The first time a
 * binding has a listening worker, the primary publishes it (a Unix socket gets its
 * path) and confirms with the kernel that it accepts where it was asked to; then
 * logs `listen` (at the start: before `ready`) or `socket-rebound` (a re-bind). A
 * listener that cannot be published or confirmed at the start stops the runner
 * (exit 1); after a re-bind the path check tries again (app/socket-watch.js).
 */
function workerListening(p, info) {
  if (p.s.strategy !== 'round-robin') {
    if (info.listener) publishListener(p, info.listener);
    return;
  }
  try {
    adoptRoundRobinSocket(p, info);
  } catch (err) {
    if (!(err instanceof AppError) || p.state !== 'starting') throw err;
    refuse(p, err);
  }
}

/**
 * Binding b has a worker listening on it: publish it if it is not yet, confirm it
 * if it is not yet. Also called by the path check for a binding whose publish
 * failed (app/socket-watch.js). A failure at the start stops the runner; later it is
 * said once per cause (socket-rebind-failed) and tried again at the next check.
 */
function publishListener(p, b) {
  b.listening = true;
  try {
    if (!b.announced) publish(p, b);
    if (!b.confirmed) confirm(p, b);
    b.failed = null;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    if (p.state === 'starting') {
      refuse(p, err);
      return;
    }
    if (b.failed === err.code) return;
    b.failed = err.code;
    p.log('warn', 'socket-rebind-failed', { path: b.path, error: err.message, code: err.code, retry_ms: p.s.socketCheckMs });
  }
}

/** A listener that failed at the start: said once, on stderr too, and the runner stops (exit 1). */
function refuse(p, err) {
  p.log('error', 'listen-refused', { error: err.message, code: err.code });
  process.stderr.write(`tunekit: ${err.message}\n`);
  p.shutdown('listen-refused', 1);
}

/**
 * Give binding b its path (app/socket.js publish; one bound in place has it) and say
 * so: a stale file replaced, a re-bind done.
 */
function publish(p, b) {
  if (b.published === false) sock.publish(b);
  b.announced = true;
  if (b.replaces) p.log('warn', 'stale-socket-removed', { path: b.path, reason: 'connect() was refused: nobody accepted on it; replaced by the new socket in one rename()' });
  const check = p.checks && p.checks.get(b.path);
  if (check) {
    check.lastSeen = b.boundAt;
    check.reported = null;
  }
  if (b.rebind) {
    // How long the path was missing, as far as the runner can tell (socket-watch's goneFor at the check that found it gone).
    const { lastSeen, changedAt } = b.rebind;
    const missing = { missing_ms_at_most: Math.round(b.boundAt - lastSeen) };
    if (changedAt != null) missing.missing_ms_at_least = Math.round(b.boundAt - changedAt);
    p.log('info', 'socket-rebound', { path: b.path, ...missing, mode: p.s.socketMode, group: p.s.socketGroup || null });
  }
}

/**
 * Read back from the kernel where binding b accepts: its socket (the descriptor
 * the workers share) must listen, at the TCP address asked for, or bound to the
 * file now at its path. Logs `listen` with that address (`accepting`).
 */
function confirm(p, b) {
  // Without /proc (or with a stand-in handle in a unit test) there is nothing to read it from.
  const s = Number.isInteger(b.handle.fd) ? address.socketOf(b.handle.fd) : null;
  const where = b.kind === 'unix' ? `unix:${b.path}` : p.listen.text;
  const fault = !s ? null
    : !s.listening ? 'its socket does not listen'
      : b.kind === 'tcp' && !address.atTcpEndpoint(s, p.listen) ? `its socket accepts on ${address.listenText(s)}`
        : b.kind === 'unix' && (s.path !== b.name || sock.pathState(b) !== 'ours') ? `the file at ${b.path} is not the socket bound as ${s.path}` : null;
  if (fault) throw new ListenError(`the listener for ${where} is not where it was asked to be: ${fault}; stopping (a bug in the runner: report it)`, 'ELISTENADDR');
  b.confirmed = true;
  if (b.rebind) return; // socket-rebound said it
  // What the workers accept on: the path of a Unix socket (its socket keeps its bind name), else the kernel's address.
  const accepting = b.kind === 'unix' ? where : s ? address.listenText(s) : undefined;
  const fields = { listen: where, accepting };
  if (b.kind === 'unix') Object.assign(fields, { mode: p.s.socketMode, group: p.s.socketGroup || null, backlog: p.s.backlog });
  else if (b.kind === 'tcp') fields.backlog = p.s.backlog;
  else Object.assign(fields, { fd: b.fd, owner: 'inherited' });
  p.log('info', 'listen', fields);
}

/**
 * Round-robin: Node's cluster bound the socket (again, if every worker had left).
 * Make its group and mode right, and remember which file it is. `info` is the
 * worker that just listened: while another one listens, Node's cluster still holds
 * the socket it bound first, so another file at the path is not Node's: left alone.
 * The first time, confirm from the kernel that this process listens there.
 */
function adoptRoundRobinSocket(p, info) {
  if (p.listen.kind === 'tcp') {
    if (p.rrConfirmed) return;
    const mine = address.ownListening().find((s) => address.atTcpEndpoint(s, p.listen));
    if (!mine) throw new ListenError(`Node's cluster does not listen on ${p.listen.text} after a worker said it does; stopping (a bug in the runner: report it)`, 'ELISTENADDR');
    p.rrConfirmed = true;
    p.log('info', 'listen', { listen: p.listen.text, accepting: address.listenText(mine), backlog: p.s.backlog, bound_by: 'node-cluster' });
    return;
  }
  if (p.listen.kind !== 'unix') return;
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
  // Node's cluster binds by the shorter of the absolute path and the one relative to the cwd.
  const own = address.ownListening();
  if (own.length && !own.some((s) => s.kind === 'unix' && nodePath.resolve(s.path) === path)) {
    throw new ListenError(`Node's cluster does not listen on unix:${path} after a worker said it does; stopping (a bug in the runner: report it)`, 'ELISTENADDR');
  }
  p.log('info', 'listen', { listen: `unix:${path}`, accepting: `unix:${path}`, mode: p.s.socketMode, group: p.s.socketGroup || null, backlog: p.s.backlog, bound_by: 'node-cluster' });
}

function releaseListeners(p) {
  for (const b of [...p.bound, p.rrSocket]) {
    if (!b || b.kind !== 'unix') continue;
    const result = sock.release(b);
    if (result === 'removed' && b.published !== false) p.log('info', 'socket-removed', { path: b.path });
    if (result === 'replaced') p.log('warn', 'socket-kept', { path: b.path, reason: 'another socket now sits at the path; not ours to remove' });
  }
  p.bound = p.bound.filter((b) => b.kind !== 'unix');
  p.rrSocket = null;
}

/** The binding a slot's worker listens on (undefined: Node's cluster binds). */
function bindingOf(p, slot) {
  return p.s.strategy === 'per-worker' ? p.bound[slot.n - 1] : p.bound[0];
}

module.exports = { bindListeners, workerListening, publishListener, adoptRoundRobinSocket, releaseListeners, bindingOf };
