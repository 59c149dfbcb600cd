'use strict';
// The listening sockets (`ss -l`: each one's accept queue and the processes that
// hold it) and one app socket as a host has it: its file (stat), whether nginx's
// user may connect() to it, the listener bound to it and its processes' limits.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const accounts = require('../accounts');
const { servedPath } = require('../proc');
const { nofile, stoppedOf } = require('./host');

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
 * The inode of the file each listening Unix socket was bound to (`ss -e`'s
 * ino:N), by the socket's own inode (the column after its name). Asked apart
 * from the list itself: once one listener has about 1,000 connections waiting
 * in its accept queue, the kernel's dump with -e (which adds the waiting peers,
 * UDIAG_SHOW_ICONS) holds no listener at all and ss prints nothing, exit 0
 * (measured: iproute2 6.1, Linux 6.18, 2026-12-05; 100 queued were listed, 1,000
 * were not) — the moment a deep queue is worth seeing. Then no inode is known
 * and the path alone names a socket's listener.
 */
function boundInodes() {
  const out = new Map();
  const r = spawnSync('ss', ['-H', '-l', '-x', '-e'], { encoding: 'utf8' });
  if (r.status !== 0) return out;
  for (const line of r.stdout.split('\n')) {
    const f = line.trim().split(/\s+/);
    const ino = / ino:(\d+) dev:/.exec(line);
    if (ino && f.length > 5) out.set(f[5], Number(ino[1]));
  }
  return out;
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
  const inodes = boundInodes();
  for (const [kind, args] of [['unix', ['-H', '-l', '-x', '-p']], ['tcp', ['-H', '-l', '-t', '-n', '-p']]]) {
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
        if (f[1] === 'LISTEN') out.push({ kind, backlog: Number(f[3]), queued: Number(f[2]), local: servedPath(absoluteSocketName(f[4], pids)), pids, ino: inodes.get(f[5]) ?? null });
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

module.exports = { listeners, access, socketFacts };
