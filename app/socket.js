'use strict';
// The listening socket's lifecycle, in the primary only (a worker never unlinks).
//
//   check the path  → length, parent directory, what is already there
//   bind            → under the bind name PATH~PID beside the path (bindName), umask
//                     around bind() so the mode is right from its first moment, then
//                     chgrp; remember dev/ino
//   hand the handle → to the workers (app/lifecycle.js); the primary never accepts on it
//   publish         → once a worker listens on it: link() the file to PATH (or rename()
//                     it over the stale file found there), so PATH names a listening
//                     socket from its first moment: a connect() to it is never refused
//   check           → every socketCheckMs (app/socket-watch.js): is the path still our file?
//                     gone → bind again (bindAgain), hand the new handle to new
//                     workers, publish; another file → leave it alone
//   release         → unlink only if the inode at the path is still the one we bound
//
// Why bind elsewhere and publish: bind() creates the file, listen() makes it accept,
// and here a worker calls listen() (the primary never does: it would have to accept).
// A socket bound at PATH refuses connect() (ECONNREFUSED) until then, for as long as
// a worker takes to start, and another runner's start-up check would take it for a
// stale file. rename() and link() give a file a new name atomically; the socket keeps
// the name it was bound with, so `ss -x` and /proc/net/unix show PATH~PID, and the
// inode (ss -e's ino) is what ties a listener to PATH (lib/doctor.js reads both).
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
const { errnoName, tcpBound, tcpBindFailure, unixHeldBy, handleFault } = require('./address');

/**
 * The name a socket for `socketPath` is bound under until publish() gives it the
 * path: PATH~PID, in the same directory (rename() and link() stay on one file
 * system), one per runner. A path within a few bytes of sun_path's limit has no room
 * for the suffix: its socket is bound at the path itself, as before (refused until
 * a worker listens).
 */
function bindName(socketPath, pid = process.pid) {
  const name = `${socketPath}~${pid}`;
  return Buffer.byteLength(name) <= SUN_PATH_MAX ? name : socketPath;
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

function whatIs(st) {
  return st.isFile() ? 'a regular file' : st.isDirectory() ? 'a directory' : st.isSymbolicLink() ? 'a symbolic link' : 'not a socket';
}

function liveSocket(socketPath) {
  return new ListenError(
    `a server is already answering on ${socketPath}, ${unixHeldBy(socketPath)}; refusing to start a second one: stop that process, or choose another socket path`,
    'EADDRINUSE',
  );
}

/**
 * What is at the path before bind(), or a refusal: null (nothing), or { stale }
 * (a socket that refuses connections: nobody accepts on it; its dev/ino). Never a
 * live socket (refused, naming who holds it), never a non-socket (refused).
 * @returns {Promise<null|{stale:{dev:number, ino:number}}>}
 */
async function inspectPath(socketPath) {
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
    throw new ListenError(
      `${socketPath} exists and is ${whatIs(st)}, not a socket; refusing to touch it: move it away or choose another socket path`,
      'EEXIST',
    );
  }
  const state = await probe(socketPath);
  if (state === 'live') throw liveSocket(socketPath);
  if (state !== 'stale') {
    throw new ListenError(`cannot tell whether ${socketPath} is in use (connect: ${state}); refusing to remove it`, state);
  }
  return { stale: { dev: st.dev, ino: st.ino } };
}

/**
 * Make the path free for a bind() at the path itself (Node's cluster binds it for
 * round-robin; the metrics endpoint): a stale socket file is removed after its
 * inode is checked again. Refusals as inspectPath's.
 * @returns {Promise<null|{removed:string}>}
 */
async function preparePath(socketPath) {
  const found = await inspectPath(socketPath);
  if (!found) return null;
  removeStale(socketPath, found.stale);
  return { removed: socketPath };
}

/** Remove the stale socket file inspectPath found (`stale`: its dev/ino), after checking its inode again. */
function removeStale(socketPath, stale) {
  let again;
  try {
    again = fs.lstatSync(socketPath);
  } catch (err) {
    if (err.code === 'ENOENT') return; // removed meanwhile: the path is free
    throw new ListenError(`cannot inspect ${socketPath}: ${err.code}`, err.code);
  }
  if (again.ino !== stale.ino || again.dev !== stale.dev) {
    throw new ListenError(`${socketPath} changed while it was being checked; retry`, 'EAGAIN');
  }
  fs.unlinkSync(socketPath);
}

/**
 * Remove the socket files of runners that died before they published theirs
 * (PATH~PID whose PID is gone, killed between bind and publish): nobody can
 * listen on them any more. One of a live pid is left alone (a runner starting).
 * @returns {string[]} the files removed
 */
function removeLeftovers(socketPath) {
  const dir = path.dirname(socketPath);
  const prefix = `${path.basename(socketPath)}~`;
  const removed = [];
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix) || !/^\d+$/.test(name.slice(prefix.length))) continue;
    const pid = Number(name.slice(prefix.length));
    if (pid === process.pid || alive(pid)) continue;
    const file = path.join(dir, name);
    try {
      if (!fs.lstatSync(file).isSocket()) continue;
      fs.unlinkSync(file);
      removed.push(file);
    } catch { /* gone meanwhile */ }
  }
  return removed;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
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
 * Bind a Unix socket for `socketPath` under its bind name, with mode and group from
 * its first moment. `replaces`: the stale file inspectPath found at the path, which
 * publish() may rename over. `published` is true only when the path had no room for
 * a bind name (bound at the path itself).
 * @returns {{kind:'unix', path:string, name:string, handle:object, dev:bigint, ino:bigint, ctimeNs:bigint,
 *   owned:true, published:boolean, replaces:object|null, boundAt:number}}
 */
function bindUnix(socketPath, { socketMode, socketGroup }, { replaces = null } = {}) {
  const mode = parseMode(socketMode);
  const gid = resolveGroup(socketGroup);
  const name = bindName(socketPath);
  // bind() creates the file with 0777 & ~umask; umask 0o117 gives 0660.
  const previous = process.umask(0o777 & ~mode);
  let handle;
  try {
    handle = net._createServerHandle(name, -1, -1);
  } finally {
    process.umask(previous);
  }
  if (typeof handle === 'number') {
    throw new ListenError(`cannot bind ${name}: ${errnoName(handle)}`, errnoName(handle));
  }
  try {
    if (gid !== null) fs.chownSync(name, -1, gid);
    // The umask already gave this mode; chmod states it (a no-op unless a default
    // ACL on the directory interfered). Never wider than asked.
    fs.chmodSync(name, mode);
  } catch (err) {
    fs.rmSync(name, { force: true });
    throw new ListenError(
      `cannot set group ${socketGroup} / mode ${socketMode} on ${name}: ${err.code} (the runner must be root or a member of the group)`,
      err.code,
    );
  }
  return {
    kind: 'unix', path: socketPath, name, handle, ...identity(name), owned: true, published: name === socketPath, replaces, boundAt: Date.now(),
  };
}

/** What is at a path now, for a refusal: the holder of a live socket, or the kind of file. */
function occupant(socketPath) {
  let st;
  try {
    st = fs.lstatSync(socketPath);
  } catch {
    return 'a file';
  }
  return st.isSocket() ? `a socket ${unixHeldBy(socketPath)}` : whatIs(st);
}

/**
 * Give a socket bound under its bind name its path, once a worker listens on it: so
 * the path, from the moment it exists, names a socket that accepts. A free path gets
 * a second name by link(), which fails rather than replace a file that appeared
 * meanwhile (EEXIST), and the bind name is then removed; the stale file found at
 * the start (`replaces`) is replaced in one step by rename(), after its inode is
 * checked again. The inode is ours throughout; its change time is not (a link or
 * rename changes it), so the binding's identity is read again at the path.
 */
function publish(b) {
  if (b.published !== false) return;
  const mine = (st) => st.dev === b.dev && st.ino === b.ino;
  let st;
  try {
    st = fs.lstatSync(b.name, { bigint: true });
  } catch (err) {
    throw new ListenError(`the socket the runner bound at ${b.name} was deleted before it could be moved to ${b.path} (${err.code})`, err.code);
  }
  if (!mine(st)) throw new ListenError(`${b.name} is no longer the socket the runner bound; leaving it and ${b.path} alone`, 'ESTALE');
  let at = null;
  try {
    at = fs.lstatSync(b.path, { bigint: true });
  } catch (err) {
    if (err.code !== 'ENOENT') throw new ListenError(`cannot inspect ${b.path}: ${err.code}`, err.code);
  }
  const taken = () => new ListenError(
    `${b.path} was taken while the runner bound it: ${occupant(b.path)} is there now; refusing to replace it: stop what put it there, or choose another socket path`,
    'EADDRINUSE',
  );
  if (at && !(b.replaces && BigInt(b.replaces.dev) === at.dev && BigInt(b.replaces.ino) === at.ino)) throw taken();
  try {
    if (at) {
      fs.renameSync(b.name, b.path);
    } else {
      fs.linkSync(b.name, b.path);
      fs.unlinkSync(b.name);
    }
  } catch (err) {
    if (err.code === 'EEXIST') throw taken();
    throw new ListenError(`cannot put the socket ${b.name} at ${b.path}: ${err.code}`, err.code);
  }
  Object.assign(b, identity(b.path), { published: true, boundAt: Date.now() });
}

/**
 * Bind a new socket for a path whose file was deleted under the running app. Unlike
 * the start, nothing at the path is ever removed: publish() links the new socket
 * there only while the path is free, and whatever appeared there since the check
 * found it gone belongs to someone else.
 */
function bindAgain(socketPath, options) {
  checkDirectory(socketPath);
  return bindUnix(socketPath, options);
}

/**
 * Bind a TCP address, or refuse in one line naming the address and what holds it
 * (or why the bind is not allowed). The bind is checked before anything else uses
 * the handle: an EADDRINUSE that libuv deferred to listen() (app/address.js) would
 * let a worker's listen() bind a random port instead.
 */
function bindTcp(endpoint) {
  const { host, port, ipv6 } = endpoint;
  const handle = net._createServerHandle(host, port, ipv6 || net.isIPv6(host) ? 6 : 4);
  if (typeof handle === 'number') throw new ListenError(tcpBindFailure(endpoint, errnoName(handle)), errnoName(handle));
  const at = tcpBound(handle);
  if (at.error || at.port !== port) {
    handle.close();
    const code = at.error || 'EADDRINUSE';
    throw new ListenError(tcpBindFailure(endpoint, code), code);
  }
  return { kind: 'tcp', host, port, handle, owned: true, published: true };
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
  // A TCP socket that is not bound would be bound by the workers' listen(): to a
  // random port on every interface. A Unix socket cannot listen unbound (EINVAL).
  const fault = handle.constructor.name === 'TCP' && handleFault(handle, { kind: 'fd' });
  if (fault) {
    throw new ListenError(
      `listen fd:${fd}: refusing the TCP socket passed there: ${fault}, and listening on it would take a random port on every interface; pass a bound, listening socket (systemd's ListenStream=)`,
      'EDESTADDRREQ',
    );
  }
  // Like sd_listen_fds(unset_environment=1): the workers must not see these.
  for (const k of ['LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES']) delete env[k];
  return { kind: 'fd', fd, handle, owned: false, published: true };
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
  // Not published yet: its file is still under its bind name.
  const file = bound.published === false ? bound.name : bound.path;
  let now;
  try {
    now = identity(file);
  } catch {
    return 'gone';
  }
  if (!sameFile(now, bound)) return 'replaced';
  try {
    fs.unlinkSync(file);
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
  bindName,
  inspectPath,
  preparePath,
  removeStale,
  removeLeftovers,
  resolveGroup,
  bindUnix,
  publish,
  bindAgain,
  bindTcp,
  adoptFd,
  identity,
  sameFile,
  pathState,
  goneFor,
  release,
};
