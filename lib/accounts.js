'use strict';
// Users and groups as the local files list them (/etc/passwd, /etc/group): the
// one reader that render (the caller's group name), doctor (may nginx's user
// reach the socket) and the tests share. node: built-ins only.
//
// app/socket.js keeps its own lookup (getent, then /etc/group): the runner is
// copied to hosts on its own and imports nothing outside app/.

const fs = require('node:fs');

function lines(file) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n');
  } catch {
    return [];
  }
}

/** name → {uid, gid} for every user in /etc/passwd. */
function users(file = '/etc/passwd') {
  const out = new Map();
  for (const line of lines(file)) {
    const f = line.split(':');
    if (f.length >= 4) out.set(f[0], { uid: Number(f[2]), gid: Number(f[3]) });
  }
  return out;
}

/** Every group in /etc/group: [{name, gid, members}]. */
function groups(file = '/etc/group') {
  const out = [];
  for (const line of lines(file)) {
    const f = line.split(':');
    if (f.length >= 4) out.push({ name: f[0], gid: Number(f[2]), members: f[3] ? f[3].split(',') : [] });
  }
  return out;
}

/** The group with this name or gid, or null. */
function group(nameOrGid, file) {
  const key = typeof nameOrGid === 'number' ? 'gid' : 'name';
  return groups(file).find((g) => g[key] === nameOrGid) || null;
}

/** A gid's group name, or the number itself when /etc/group has no such group. */
function groupName(gid) {
  const g = group(gid);
  return g ? g.name : String(gid);
}

module.exports = { users, groups, group, groupName };
