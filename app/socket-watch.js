'use strict';
// The socket path, checked while the app runs.
//
// An rm or a tmpfiles clean-up can delete the socket file under the running app:
// the workers keep accepting on a socket nobody can reach by path any more, and
// nginx's connect() fails with ENOENT (502) for every new upstream connection.
// Every socketCheckMs the primary looks at each path it bound:
//   our file      → nothing to do
//   gone          → bind a new socket for it (mode and group as at the start), then a
//                   rolling restart of the slots on the old one (p.moveWorkers); the
//                   first new worker to listen on it publishes it at the path and
//                   socket-rebound is logged (app/listeners.js workerListening)
//   another file  → never touched; said once (socket-replaced)
// A binding not published yet is left to that; one whose publish failed (a file
// appeared at the path meanwhile) is published at a later check, once the path is free.
// Round-robin: Node's cluster holds that socket, and binds again only once every
// worker has left it (closing its handle, which unlinks the path unchecked), so
// the runner only says the path is gone and that a restart fixes it. Inherited
// sockets (fd:N, systemd) are not the runner's: never checked.
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.s, p.listen, p.log, p.state, p.slots, p.bound, p.rrSocket,
//   p.unreachable (bindings a re-bind replaced: held open, never closed or released),
//   p.checks (socket path -> { lastSeen, reported }), p.checkTimer;
// and calls p.moveWorkers (app/rolling.js) after a re-bind, p.publishListener (app/listeners.js)
// for a binding a worker listens on but whose path could not be given yet.

const sock = require('./socket');
const { AppError } = require('./errors');

function watchSockets(p) {
  if (!p.s.socketCheckMs || p.listen.kind !== 'unix' || p.checkTimer) return;
  p.checkTimer = setInterval(() => {
    if (p.state !== 'running') return;
    try {
      checkSockets(p);
    } catch (err) {
      p.log('error', 'primary-error', { error: err.stack || String(err) });
    }
  }, p.s.socketCheckMs);
  p.checkTimer.unref();
}

/** Log an event once per state of a path (again only after the state changed). */
function reportOnce(p, check, key, level, event, fields) {
  if (check.reported === key) return;
  check.reported = key;
  p.log(level, event, fields);
}

function checkSockets(p) {
  if (p.s.strategy === 'round-robin') {
    // Node's handle (and so the socket's inode) is held only while a worker listens.
    if (p.rrSocket && p.slots.some((slot) => slot.current && slot.current.state === 'ready')) checkSocket(p, p.rrSocket, -1);
    return;
  }
  for (let i = 0; i < p.bound.length; i++) {
    const b = p.bound[i];
    if (b.kind !== 'unix' || !b.owned) continue;
    if (b.published === false) {
      if (b.listening) p.publishListener(b); // its path was taken when a worker first listened: again
      continue;
    }
    checkSocket(p, b, i);
  }
}

/** Binding b (p.bound[i]; i < 0: Node's round-robin socket), checked once. */
function checkSocket(p, b, i) {
  // Known to be ours since it was bound; since each check that found it, after that.
  if (!p.checks.has(b.path)) p.checks.set(b.path, { lastSeen: b.boundAt, reported: null });
  const check = p.checks.get(b.path);
  let state;
  try {
    state = sock.pathState(b);
  } catch (err) {
    reportOnce(p, check, err.code, 'warn', 'socket-check-failed', { path: b.path, error: err.message, code: err.code });
    return;
  }
  if (state === 'ours') {
    check.lastSeen = Date.now();
    check.reported = null;
    return;
  }
  if (state === 'replaced') {
    reportOnce(p, check, 'replaced', 'warn', 'socket-replaced', {
      path: b.path,
      reason: 'another file now sits at the socket path; the runner leaves it alone, and nginx connects to it, not to this app',
      fix: `find what put it there and move it away (the runner then binds ${b.path} again within ${p.s.socketCheckMs} ms), or stop what serves on it and restart the app`,
    });
    return;
  }
  if (i < 0) {
    reportOnce(p, check, 'gone', 'warn', 'socket-gone', {
      path: b.path,
      ...sock.goneFor(b.path, check.lastSeen),
      reason: 'the socket file was deleted; with strategy round-robin Node\'s cluster holds the socket and the runner cannot bind the path again while workers listen on it',
      fix: 'restart the app (systemctl restart tunekit-app); find what deleted it (a tmpfiles rule, an rm)',
    });
    return;
  }
  rebind(p, b, i, check);
}

/**
 * The socket file of binding i is gone: bind a new socket for the path and move the
 * workers; the first of them to listen on it publishes it (socket-rebound).
 */
function rebind(p, old, i, check) {
  // Read before binding: the bind changes the directory too.
  const gone = sock.goneFor(old.path, check.lastSeen);
  let fresh;
  try {
    fresh = sock.bindAgain(old.path, p.s);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    reportOnce(p, check, `rebind:${err.code}`, 'warn', 'socket-rebind-failed', { path: old.path, error: err.message, code: err.code, retry_ms: p.s.socketCheckMs });
    return;
  }
  fresh.rebind = { lastSeen: check.lastSeen, changedAt: gone.missing_ms_at_least == null ? null : Date.now() - gone.missing_ms_at_least };
  // The old handle stays open here for good: closing it would make libuv unlink
  // the name it was bound with. Its workers drain off it below.
  p.unreachable.push(old);
  p.bound[i] = fresh;
  check.reported = null;
  p.moveWorkers();
}

module.exports = { watchSockets, checkSockets, checkSocket, rebind };
