'use strict';
// Processes and ports as /proc and the kernel show them now: the toolbox the
// local stack (stack.js), doctor and the load-test harness share. node: built-ins
// only; imports nothing of the kit.

const fs = require('node:fs');
const net = require('node:net');

// The command lines of the kit's runner (its primary: app/cluster.js or
// `bin/tunekit.js run`, `tunekit run`) and of its workers (app/worker.js), as
// /proc shows them, with an absolute or a relative path.
const RUNNER_CMD = /(?:^|[ /])(?:app\/cluster\.js|(?:bin\/)?tunekit(?:\.js)? run)(?: |$)/;
const WORKER_CMD = /(?:^|[ /])app\/worker\.js(?: |$)/;

// The runner binds its Unix socket under PATH~PID beside the path, and gives the file
// the path once a worker listens (app/socket.js bindName, publish): a socket keeps
// the name it was bound with, so `ss` and /proc/net/unix list it as PATH~PID. That
// name stands for PATH; the inode (ss -e's ino) tells which file it is.
const RUNNER_BIND_NAME = /~\d+$/;

/** The path a listening Unix socket's name (as ss prints it) serves. */
function servedPath(name) {
  return name.replace(RUNNER_BIND_NAME, '');
}

// Ports are chosen below the kernel's ephemeral range (ip_local_port_range,
// 32768-60999 by default): a port from that range, free when chosen, can be
// taken a moment later as the local port of any outgoing connection on the host
// — a load generator opens thousands — before the stack binds it. Seen: nginx's
// "bind() to 127.0.0.1:45930 failed (98: Address already in use)" while another
// load ran beside it (2026-12-05). Below the range only another listener can take
// it. Random, so two processes choosing at once rarely meet; each is tried by
// binding it, and the kernel's choice (port 0) is the fallback.
const LOWEST_PORT = 20000;
const TRIES = 50;

/** [low, high) to choose ports from: below the ephemeral range, or null when it leaves no room. */
function portRange(rangeFile = '/proc/sys/net/ipv4/ip_local_port_range') {
  let low;
  try {
    low = Number(fs.readFileSync(rangeFile, 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return null;
  }
  return low - LOWEST_PORT >= 1000 ? [LOWEST_PORT, low] : null;
}

/** Listens srv on 127.0.0.1: a port of the range that is free, else one the kernel picks. Resolves the port. */
async function listenFree(srv, except, range = portRange()) {
  const listen = (port) => new Promise((resolve, reject) => {
    const onError = (err) => reject(err);
    srv.once('error', onError);
    srv.listen(port, '127.0.0.1', () => {
      srv.removeListener('error', onError);
      resolve(srv.address().port);
    });
  });
  for (let i = 0; range && i < TRIES; i++) {
    const port = range[0] + Math.floor(Math.random() * (range[1] - range[0]));
    if (except.includes(port)) continue;
    try {
      return await listen(port);
    } catch (err) {
      if (err.code !== 'EADDRINUSE') throw err;
    }
  }
  return listen(0);
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
async function freePort() {
  return (await freePorts(1))[0];
}

/**
 * n distinct TCP ports on 127.0.0.1, free a moment ago: all held open at once
 * while they are chosen, so two of them are never the same port, and none of
 * `except`.
 */
async function freePorts(n, except = []) {
  const servers = [];
  try {
    const ports = [];
    while (ports.length < n) {
      const srv = net.createServer();
      srv.unref();
      servers.push(srv);
      const port = await listenFree(srv, except);
      if (!except.includes(port)) ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(() => resolve()))));
  }
}

function readStat(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // start: field 22 of stat(5), the start time in clock ticks since boot (a pid reused later has another).
    return { state: rest[0], ppid: Number(rest[1]), start: rest[19] };
  } catch {
    return null;
  }
}

function alive(pid) {
  if (!pid) return false;
  const st = readStat(pid);
  return Boolean(st) && st.state !== 'Z' && st.state !== 'X';
}

function cmdline(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Live children of pid, read from /proc now. */
function childrenOf(pid) {
  if (!pid) return [];
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = readStat(name);
    if (st && st.ppid === pid && st.state !== 'Z') out.push(Number(name));
  }
  return out.sort((a, b) => a - b);
}

function readPid(file) {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

function signal(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

module.exports = { freePort, freePorts, portRange, readStat, alive, cmdline, childrenOf, readPid, signal, servedPath, RUNNER_CMD, WORKER_CMD };
