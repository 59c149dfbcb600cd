'use strict';
// doctor's checks of the app socket as the host has it: its file, mode and
// directory, whether nginx's user may connect() to it, the listener behind it
// (a full accept queue, stopped processes, a deleted path still listened on,
// nothing accepting) and the open-files limit of the app's processes.

const path = require('node:path');

/**
 * nginx's user may not connect() to the socket (EACCES): [what, fix]. When the
 * socket's mode or group differs from what app.json binds it with, it was changed
 * after the runner bound it, and restoring them (or restarting the app) is the fix.
 */
function accessFailure(s, settings) {
  const octal = (m) => m.toString(8).padStart(4, '0');
  const what = `EACCES: ${s.nginxAccess.why}: nginx answers 502 with "(13: Permission denied)"`;
  const wantMode = settings && settings.socketMode != null ? parseInt(String(settings.socketMode), 8) : null;
  const wantGroup = settings && settings.socketGroup && !/^\d+$/.test(String(settings.socketGroup)) ? String(settings.socketGroup) : null;
  const changed = [];
  if (wantMode != null && wantMode !== s.mode) changed.push(`mode ${octal(s.mode)} (app.json binds it ${octal(wantMode)})`);
  if (wantGroup && wantGroup !== s.group) changed.push(`group ${s.group} (app.json: ${wantGroup})`);
  if (s.nginxAccess.file === s.path && changed.length) {
    return [`${what}; the socket has ${changed.join(' and ')}: changed after the runner bound it`,
      `restore them (chmod ${octal(wantMode ?? s.mode)} ${s.path}${wantGroup ? `; chgrp ${wantGroup} ${s.path}` : ''}), or restart the app (systemctl restart tunekit-app): its runner binds the socket with mode ${octal(wantMode ?? s.mode)}${wantGroup ? ` and group ${wantGroup}` : ''}`];
  }
  if (s.nginxAccess.file && s.nginxAccess.file !== s.path) {
    return [what, `give ${s.nginxAccess.file} search permission for nginx's user (on a host the app's RuntimeDirectory= with RuntimeDirectoryMode=0750 and group ${wantGroup || s.dirGroup}; restarting the app recreates it)`];
  }
  return [what, `add nginx's user to group ${s.group} and make the directory group-searchable`];
}

const octal = (m) => m.toString(8).padStart(4, '0');
const existing = (facts) => facts.sockets.filter((s) => s.exists && s.isSocket);

function socketDir(facts) {
  return existing(facts).filter((s) => s.dirMode & 0o007).map((s) => ({ id: 'socket-dir', level: 'warn',
    what: `${path.dirname(s.path)} is mode ${s.dirMode.toString(8)}: others may search it`, fix: 'use mode 0750 (RuntimeDirectoryMode)' }));
}

function socketAccess(facts) {
  return existing(facts).filter((s) => s.nginxAccess).map((s) => (s.nginxAccess.ok
    ? { id: 'socket-access', level: 'ok', what: `nginx's user may connect to ${s.path}` }
    : { id: 'socket-access', level: 'fail', ...failure(accessFailure(s, facts.app && facts.app.settings)) }));
}

const failure = ([what, fix]) => ({ what, fix });

function appNofile(facts, ctx) {
  return existing(facts).filter((s) => s.nofile && s.nofile.length).map((s) => {
    const low = Math.min(...s.nofile);
    return low <= 1024
      ? { id: 'app-nofile', level: 'warn', what: `an app process on ${s.path} has an open-files limit of ${low}: near ${low} connections accept() fails with EMFILE, and the connections past it are closed unread (libuv's reserve descriptor; the worker logs open-files-limit when it reaches it); nginx answers 502 with "recv() failed (104: Connection reset by peer)"`,
        fix: `set LimitNOFILE=${ctx.def.tunekit_app_limit_nofile} in the unit (tunekit_app_limit_nofile)` }
      : { id: 'app-nofile', level: 'ok', what: `app processes may open ${low} files` };
  });
}

// A full accept queue: on a Unix socket connect() does not wait, it fails at once.
function acceptQueue(facts) {
  return facts.sockets.filter((s) => s.queued != null && s.backlog != null && s.queued > s.backlog).map((s) => {
    const stopped = s.stopped && s.stopped.length;
    return { id: 'accept-queue', level: 'fail',
      what: `accept queue of ${s.path} is full (${s.queued} connections waiting, backlog ${s.backlog}): ${stopped ? `app processes ${s.stopped.join(', ')} are stopped (state T: SIGSTOP, a debugger)` : 'the app\'s workers are not accepting (a blocked event loop, or all busy)'}; nginx's connect() fails at once with "(11: Resource temporarily unavailable)" (EAGAIN; a Unix socket does not wait as TCP does): 502`,
      fix: stopped ? `resume them (kill -CONT ${s.stopped.join(' ')}) or restart the app; find what stopped them`
        : 'find what blocks the workers (their CPU, a synchronous call); a larger backlog (tunekit_listen_backlog, up to net.core.somaxconn) only absorbs bursts' };
  });
}

// The socket file is gone but the app still listens on the (deleted) path.
function socketDeleted(facts) {
  return facts.sockets.filter((s) => !s.exists && s.pids && s.pids.length).map((s) => ({ id: 'socket-deleted', level: 'fail',
    what: `socket file ${s.path} was deleted while app processes (pids ${[...new Set(s.pids)].join(', ')}) still listen on it: nginx's connect() fails with "(2: No such file or directory)" for every new upstream connection (502)`,
    fix: deletedSocketFix(facts.app && facts.app.settings) }));
}

// Nothing accepts on an existing socket: the app is stopped (a stale socket file).
function socketListener(facts) {
  const first = existing(facts)[0];
  if (!first || !facts.app || facts.app.healthzError !== 'ECONNREFUSED') return [];
  return [{ id: 'socket-listener', level: 'fail', what: `socket ${first.path} exists but nothing accepts on it (ECONNREFUSED): the app is not running; nginx answers 502 with "(111: Connection refused)"`,
    fix: 'start the app (systemctl start tunekit-app); its runner replaces a socket file nobody listens on' }];
}

/** What to do about a deleted socket file: the runner binds it again, unless it cannot. */
function deletedSocketFix(settings) {
  const restart = 'restart the app (systemctl restart tunekit-app) so that it binds the path again; find what deleted it (a tmpfiles rule, an rm)';
  if (!settings) return `the kit's runner binds the path again within socketCheckMs (1000 ms by default); if this persists: ${restart}`;
  if (settings.socketCheckMs == null) return `this app.json has no socketCheckMs: its runner, older than this kit, does not bind the path again by itself; ${restart}`;
  if (settings.socketCheckMs === 0) return `socketCheckMs is 0 in app.json (tunekit_app_socket_check_ms): the runner's check is off; ${restart}`;
  if (settings.strategy === 'round-robin') return `with strategy round-robin Node's cluster holds the socket and the runner does not bind the path again; ${restart}`;
  return `the runner binds the path again within socketCheckMs (${settings.socketCheckMs} ms) and logs socket-rebound; if this persists, the running runner is older than this app.json or its check failed (socket-rebind-failed in its log): ${restart}`;
}

module.exports = { octal, existing, socketDir, socketAccess, appNofile, acceptQueue, socketDeleted, socketListener };
