'use strict';
// The listening socket's lifecycle, in the primary only (a worker never unlinks).
//
//   check the path  → length, parent directory, what is already there
//   bind            → umask around bind() so the mode is right from its first moment,
//                     then chgrp; remember dev/ino
//   hand the handle → to the workers (app/lifecycle.js); the primary never accepts on it
//   check           → every socketCheckMs (app/socket-watch.js): is the path still our file?
//                     gone → bind again (bindAgain) and hand the new handle to new
//                     workers; another file → leave it alone
//   release         → unlink only if the inode at the path is still the one we bound
//
// Why a raw handle (net._createServerHandle, the function Node's own cluster primary
// uses for SCHED_NONE): it binds without listening, so the primary has no watcher on
// the socket and never accepts; only the workers call listen() and accept. The
// public API has no bind-without-listen. libuv unlinks a path-bound socket when the
// handle that bound it closes, so the primary never closes this handle itself: it
// unlinks after the inode check and leaves with process.exit() (which runs no
// handle cleanup). Handles the workers receive over IPC carry no path and never
// unlink, whatever the worker does. After a re-bind the old handle stays open in the
// primary for the same reason: closing it would unlink the path, which now holds the
// new socket.

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { SUN_PATH_MAX, parseMode } = require('./settings');
const { SettingsError, ListenError } = require('./errors');

function errnoName(rval) {
  try {
    return require('node:util').getSystemErrorName(rval);
  } catch {
    return String(rval);
  }
}

/** connect() to a path: 'live' (accepted), 'stale' (ECONNREFUSED) or the error code. */
function probe(socketPath, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const sock = net.connect({ path: socketPath });
    const done = (result) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(result);
    };
    // A full accept queue (EAGAIN) or a slow server is still a live server.
    const timer = setTimeout(() => done('live'), timeoutMs);
    sock.once('connect', () => done('live'));
    sock.once('error', (err) => done(err.code === 'ECONNREFUSED' ? 'stale' : err.code === 'EAGAIN' ? 'live' : err.code));
  });
}

function checkPathLength(socketPath) {
  const bytes = Buffer.byteLength(socketPath);
  if (bytes > SUN_PATH_MAX) {
    throw new ListenError(
      `socket path ${socketPath} is ${bytes} bytes; the limit (sun_path) is ${SUN_PATH_MAX}: choose a shorter directory or name`,
      'ENAMETOOLONG',
    );
  }
}

function checkDirectory(socketPath) {
  const dir = path.dirname(socketPath);
  let st;
  try {
    st = fs.statSync(dir);
  } catch (err) {
    throw new ListenError(
      `socket directory ${dir} does not exist (${err.code}): create it (systemd RuntimeDirectory=, or mkdir -m 0750) so the runner can create ${path.basename(socketPath)} in it`,
      'ENOENT',
    );
  }
  if (!st.isDirectory()) throw new ListenError(`socket directory ${dir} is not a directory`, 'ENOTDIR');
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch {
    throw new ListenError(
      `socket directory ${dir} is not writable by uid ${process.getuid()}: the runner needs write and search (wx) permission on it to create and remove the socket`,
      'EACCES',
    );
  }
}

/**
 * Make the path free for bind(), or refuse. Removes only a socket file that
 * refuses connections (stale); never a live socket, never a non-socket.
 * @returns {Promise<null|{removed:string}>}
 */
async function preparePath(socketPath) {
  checkPathLength(socketPath);
  checkDirectory(socketPath);
  let st;
  try {
    st = fs.lstatSync(socketPath);
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw new ListenError(`cannot inspect ${socketPath}: ${err.code}`, err.code);
  }
  if (!st.isSocket()) {
    const what = st.isFile() ? 'a regular file' : st.isDirectory() ? 'a directory' : st.isSymbolicLink() ? 'a symbolic link' : 'not a socket';
    throw new ListenError(
      `${socketPath} exists and is ${what}, not a socket; refusing to touch it: move it away or choose another socket path`,
      'EEXIST',
    );
  }
  const state = await probe(socketPath);
  if (state === 'live') {
    throw new ListenError(
      `a server is already answering on ${socketPath}; refusing to start a second one (stop the other process, or choose another socket path)`,
      'EADDRINUSE',
    );
  }
  if (state !== 'stale') {
    throw new ListenError(`cannot tell whether ${socketPath} is in use (connect: ${state}); refusing to remove it`, state);
  }
  // A socket nobody accepts on. Re-check it is the same inode before removing.
  const again = fs.lstatSync(socketPath);
  if (again.ino !== st.ino || again.dev !== st.dev) {
    throw new ListenError(`${socketPath} changed while it was being checked; retry`, 'EAGAIN');
  }
  fs.unlinkSync(socketPath);
  return { removed: socketPath };
}

/** A group name or gid → gid. Refuses with the group's name when it does not exist. */
function resolveGroup(group) {
  if (group === '' || group == null) return null;
  if (/^\d+$/.test(String(group))) return Number(group);
  let line = '';
  try {
    // getent asks NSS (LDAP, sssd) as well as /etc/group.
    line = execFileSync('getent', ['group', String(group)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch (err) {
    if (err.code === 'ENOENT') {
      line = fs.readFileSync('/etc/group', 'utf8').split('\n').find((l) => l.split(':')[0] === group) || '';
    }
  }
  const gid = Number(line.split(':')[2]);
  if (!line || !Number.isInteger(gid)) {
    throw new ListenError(
      `socket group "${group}" does not exist: create it (groupadd --system ${group}) and add nginx's worker user to it, or pass --socket-group with an existing group`,
      'ENOGROUP',
    );
  }
  return gid;
}

/**
 * Bind a Unix socket with mode and group from its first moment.
 * @returns {{kind:'unix', path:string, handle:object, dev:bigint, ino:bigint, ctimeNs:bigint, owned:true, boundAt:number}}
 */
function bindUnix(socketPath, { socketMode, socketGroup }) {
  const mode = parseMode(socketMode);
  const gid = resolveGroup(socketGroup);
  // bind() creates the file with 0777 & ~umask; umask 0o117 gives 0660.
  const previous = process.umask(0o777 & ~mode);
  let handle;
  try {
    handle = net._createServerHandle(socketPath, -1, -1);
  } finally {
    process.umask(previous);
  }
  if (typeof handle === 'number') {
    throw new ListenError(`cannot bind ${socketPath}: ${errnoName(handle)}`, errnoName(handle));
  }
  try {
    if (gid !== null) fs.chownSync(socketPath, -1, gid);
    // The umask already gave this mode; chmod states it (a no-op unless a default
    // ACL on the directory interfered). Never wider than asked.
    fs.chmodSync(socketPath, mode);
  } catch (err) {
    fs.rmSync(socketPath, { force: true });
    throw new ListenError(
      `cannot set group ${socketGroup} / mode ${socketMode} on ${socketPath}: ${err.code} (the runner must be root or a member of the group)`,
      err.code,
    );
  }
  return { kind: 'unix', path: socketPath, handle, ...identity(socketPath), owned: true, boundAt: Date.now() };
}

/**
 * Bind a new socket at a path whose file was deleted under the running app. Unlike
 * the start (preparePath), nothing at the path is removed: whatever appeared there
 * since the check found it gone belongs to someone else, and bind() fails with
 * EADDRINUSE rather than replace it.
 */
function bindAgain(socketPath, options) {
  checkDirectory(socketPath);
  return bindUnix(socketPath, options);
}

function bindTcp(host, port, ipv6) {
  const handle = net._createServerHandle(host, port, ipv6 || net.isIPv6(host) ? 6 : 4);
  if (typeof handle === 'number') {
    throw new ListenError(`cannot bind tcp:${host}:${port}: ${errnoName(handle)}`, errnoName(handle));
  }
  return { kind: 'tcp', host, port, handle, owned: true };
}

/**
 * Take an inherited listening socket (systemd socket activation or fd:N). The
 * runner does not own it: it never unlinks its path; systemd does.
 */
function adoptFd(fd, { systemd, env = process.env, pid = process.pid } = {}) {
  if (systemd) {
    const fds = Number(env.LISTEN_FDS);
    if (!(fds >= 1)) {
      throw new ListenError('listen systemd: LISTEN_FDS is not set; start the runner from a systemd .socket unit (or systemd-socket-activate)', 'EBADF');
    }
    if (env.LISTEN_PID && Number(env.LISTEN_PID) !== pid) {
      throw new ListenError(`listen systemd: LISTEN_PID=${env.LISTEN_PID} is not this process (${pid}); the sockets were meant for another process`, 'EBADF');
    }
  }
  let st;
  try {
    st = fs.fstatSync(fd);
  } catch (err) {
    throw new ListenError(`listen fd:${fd}: no such file descriptor (${err.code}); the parent must pass a listening socket there`, err.code);
  }
  if (!st.isSocket()) throw new ListenError(`listen fd:${fd}: file descriptor ${fd} is not a socket`, 'ENOTSOCK');
  const handle = net._createServerHandle(null, null, null, fd);
  if (typeof handle === 'number') {
    throw new ListenError(`listen fd:${fd}: cannot use it as a listening socket: ${errnoName(handle)}`, errnoName(handle));
  }
  // Like sd_listen_fds(unset_environment=1): the workers must not see these.
  for (const k of ['LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES']) delete env[k];
  return { kind: 'fd', fd, handle, owned: false };
}

/**
 * What makes a socket file "the one we bound": device, inode and change time. The
 * inode alone is not enough: tmpfs (/run) hands a freed inode number to the next
 * file, so another process's new socket can get the number ours had.
 */
function identity(socketPath) {
  const st = fs.lstatSync(socketPath, { bigint: true });
  return { dev: st.dev, ino: st.ino, ctimeNs: st.ctimeNs };
}

function sameFile(a, b) {
  return a.dev === b.dev && a.ino === b.ino && a.ctimeNs === b.ctimeNs;
}

/**
 * What the path of a socket the runner still holds open has now: 'ours', 'gone' or
 * 'replaced' (another file, socket or not). Device and inode decide: while the socket
 * is open its inode stays allocated, even once unlinked (the socket keeps a
 * reference to it), so no other file can have its number. The change time is left
 * out because a chmod or chgrp of our own socket changes it. Throws on anything but
 * ENOENT (a directory we may not search, ...).
 */
function pathState(bound) {
  let st;
  try {
    st = fs.lstatSync(bound.path, { bigint: true });
  } catch (err) {
    if (err.code === 'ENOENT') return 'gone';
    throw err;
  }
  return st.dev === bound.dev && st.ino === bound.ino ? 'ours' : 'replaced';
}

/**
 * How long a path has been gone, as far as its directory tells: at most since
 * `lastSeenMs` (the last check that found it), at least since the directory last
 * changed, when that is later (the unlink changed it; so may anything after it).
 * Read it before binding again: the bind changes the directory too.
 */
function goneFor(socketPath, lastSeenMs, now = Date.now()) {
  const out = { missing_ms_at_most: Math.round(now - lastSeenMs) };
  try {
    const changed = fs.statSync(path.dirname(socketPath)).mtimeMs;
    if (changed >= lastSeenMs && changed <= now) out.missing_ms_at_least = Math.round(now - changed);
  } catch { /* the bind names a missing directory */ }
  return out;
}

/**
 * Remove a socket we bound, only if the path still holds the file we created.
 * @returns {'removed'|'gone'|'replaced'|'not-owned'}
 */
function release(bound) {
  if (!bound || bound.kind !== 'unix' || !bound.owned) return 'not-owned';
  let now;
  try {
    now = identity(bound.path);
  } catch {
    return 'gone';
  }
  if (!sameFile(now, bound)) return 'replaced';
  try {
    fs.unlinkSync(bound.path);
  } catch {
    return 'gone';
  }
  return 'removed';
}

module.exports = {
  ListenError,
  SettingsError,
  probe,
  checkPathLength,
  checkDirectory,
  preparePath,
  resolveGroup,
  bindUnix,
  bindAgain,
  bindTcp,
  adoptFd,
  identity,
  sameFile,
  pathState,
  goneFor,
  release,
};
