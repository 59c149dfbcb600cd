'use strict';
// The app on this host, for `tunekit reload` and `tunekit logs`: found from its
// app.json the way doctor finds it (the socket or port in its "listen", and the
// processes listening there, from ss), then who runs it, read from /proc:
//   - PM2: PM2's daemon ("PM2 vX: God Daemon ...") holds the socket in
//     cluster mode; the app's name is the PM2 app whose TUNEKIT_CONFIG is this app.json;
//   - systemd: the runner's primary is in a service's cgroup (/proc/PID/cgroup:
//     ".../NAME.service"); the unit is that service, whatever its name;
//   - a runner started by hand (`tunekit run`, `node app/cluster.js`): its primary;
//     its log is its standard output when that is a file (/proc/PID/fd/1).
// What to run for each is built here as data ({ cmd, args, env }), so the
// construction is tested without a booted systemd or a PM2 daemon.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT } = require('./template');
const { UsageError } = require('./errors');
const { listeners } = require('./live/sockets');
const { DEFAULT_APP_CONFIG } = require('./live/app');
const { cmdline, childrenOf, RUNNER_CMD, WORKER_CMD } = require('./proc');

// PM2's daemon sets its title to "PM2 vX: God Daemon (PM2_HOME)", cut to the
// length of its original command line, so PM2_HOME is read elsewhere (pm2Home()).
const PM2_DAEMON = /^PM2 v[\d.]+: God/;

/**
 * The system service a pid runs in, or null: its cgroup (v2, or v1's systemd
 * line) ends in NAME.service. Not a user manager's unit (".../user@UID.service/..."):
 * `systemctl` without --user does not manage it, and a scope (a login session) is no unit to reload.
 */
function serviceOf(pid, read = (f) => fs.readFileSync(f, 'utf8')) {
  let text = '';
  try {
    text = read(`/proc/${pid}/cgroup`);
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const m = /^(?:0::|\d+:name=systemd:)(\S*)$/.exec(line);
    const unit = m && !m[1].includes('/user@') && /\/([^/]+\.service)$/.exec(m[1]);
    if (unit) return unit[1];
  }
  return null;
}

/**
 * The PM2_HOME of PM2's daemon `pid`: the directory of the pm2.log it holds
 * open, else PM2_HOME in its environment, else its HOME's .pm2 (PM2's default).
 */
function pm2Home(pid) {
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      let target = '';
      try {
        target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch { continue; }
      if (target.startsWith('/') && path.basename(target) === 'pm2.log') return path.dirname(target);
    }
  } catch { /* below */ }
  let env = {};
  try {
    env = Object.fromEntries(fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  } catch { /* unreadable */ }
  return env.PM2_HOME || path.join(env.HOME || '/root', '.pm2');
}

/** Where a process's standard output goes when that is a regular file, else null. */
function stdoutFile(pid) {
  try {
    const target = fs.readlinkSync(`/proc/${pid}/fd/1`);
    return target.startsWith('/') && fs.statSync(`/proc/${pid}/fd/1`).isFile() ? target : null;
  } catch {
    return null;
  }
}

// The listeners serving `listen` ("unix:/p.sock" | "tcp:HOST:PORT"); with the
// per-worker strategy the sockets are PATH.1 .. PATH.N.
function listenersOf(listen, live) {
  if (listen.startsWith('unix:')) {
    const p = listen.slice(5);
    return live.filter((l) => l.kind === 'unix' && (l.local === p || (l.local.startsWith(`${p}.`) && /^\d+$/.test(l.local.slice(p.length + 1)))));
  }
  if (listen.startsWith('tcp:')) {
    const port = listen.slice(listen.lastIndexOf(':') + 1);
    return live.filter((l) => l.kind === 'tcp' && l.local.endsWith(`:${port}`));
  }
  return [];
}

/** The runners (primaries) whose command line reads appConfig (`--config FILE`). */
function runnersOf(appConfig, procDir = '/proc') {
  const want = path.resolve(appConfig);
  const pids = fs.readdirSync(procDir).filter((d) => /^\d+$/.test(d)).map(Number);
  return pids.filter((pid) => {
    const argv = cmdline(pid).split(' ');
    const at = argv.indexOf('--config');
    return RUNNER_CMD.test(argv.join(' ')) && at >= 0 && argv[at + 1] && path.resolve(argv[at + 1]) === want;
  });
}

/**
 * The app of `appConfig` (default /etc/tunekit-app/app.json):
 * { kind: 'systemd', unit, pid } | { kind: 'pm2', pm2Home, pid } | { kind: 'runner', pid, logFile }
 * or { kind: null, why } saying where it looked.
 */
function find({ appConfig = DEFAULT_APP_CONFIG, live = listeners() } = {}) {
  let settings;
  try {
    settings = JSON.parse(fs.readFileSync(appConfig, 'utf8'));
  } catch (err) {
    const why = err.code === 'ENOENT' ? 'does not exist' : err.code ? `cannot be read (${err.code})` : `is not JSON (${err.message})`;
    return { kind: null, appConfig, why: `${appConfig} ${why}` };
  }
  const listen = String(settings.listen || '');
  const found = listenersOf(listen, live);
  // Socket activation ("listen": "systemd"): the socket is systemd's, so the
  // runner is found by the app.json its command line names.
  const pids = listen === 'systemd' ? runnersOf(appConfig) : [...new Set(found.flatMap((l) => l.pids))];
  const base = { appConfig, listen, settings };
  for (const pid of pids) {
    if (PM2_DAEMON.test(cmdline(pid))) return { ...base, kind: 'pm2', pid, pm2Home: pm2Home(pid) };
  }
  const primary = pids.find((p) => RUNNER_CMD.test(cmdline(p)));
  if (primary) {
    const unit = serviceOf(primary);
    if (unit) return { ...base, kind: 'systemd', unit, pid: primary };
    return { ...base, kind: 'runner', pid: primary, logFile: stdoutFile(primary) };
  }
  const what = listen === 'systemd' ? `no runner with --config ${appConfig} is running (socket activation: the service starts on the first connection)`
    : pids.length ? `${listen} is held by pid ${pids.join(', ')}, not by the kit's runner or PM2` : `nothing listens on ${listen.replace(/^unix:/, '')}`;
  return { ...base, kind: null, why: `${what} (the "listen" of ${appConfig})` };
}

/** The PM2 app whose TUNEKIT_CONFIG is appConfig, from `pm2 jlist`'s JSON. */
function pm2Name(jlist, appConfig) {
  const want = path.resolve(appConfig);
  const env = (p) => p.pm2_env || {};
  const hit = jlist.find((p) => [env(p).TUNEKIT_CONFIG, env(p).env && env(p).env.TUNEKIT_CONFIG].some((c) => c && path.resolve(c) === want));
  return hit ? hit.name : null;
}

/** What `tunekit reload` runs for a found app (runner: a signal, no command). */
function reloadCommand(app, { pm2 = 'pm2', name = null } = {}) {
  if (app.kind === 'systemd') return { cmd: 'systemctl', args: ['reload', app.unit] };
  if (app.kind === 'pm2') return { cmd: pm2, args: ['reload', name], env: { PM2_HOME: app.pm2Home } };
  if (app.kind === 'runner') return { signal: 'SIGHUP', pid: app.pid };
  throw new Error(`no app to reload: ${app.why}`);
}

/** What `tunekit logs` runs: { cmd, args, env } or null when the app's log is not in a file. */
function logsCommand(app, { lines = 50, follow = false, pm2 = 'pm2', name = null } = {}) {
  if (app.kind === 'systemd') return { cmd: 'journalctl', args: ['-u', app.unit, '-n', String(lines), '--no-pager', ...(follow ? ['-f'] : [])] };
  if (app.kind === 'pm2') return { cmd: pm2, args: ['logs', name, '--lines', String(lines), ...(follow ? [] : ['--nostream'])], env: { PM2_HOME: app.pm2Home } };
  if (app.kind === 'runner') return app.logFile ? { cmd: 'tail', args: ['-n', String(lines), ...(follow ? ['-F'] : []), app.logFile] } : null;
  throw new Error(`no app to show the logs of: ${app.why}`);
}

/** PM2's command: $TUNEKIT_PM2, else pm2 on PATH, else the kit's own (node_modules/.bin/pm2). */
function pm2Bin(env = process.env) {
  if (env.TUNEKIT_PM2) return env.TUNEKIT_PM2;
  const onPath = (env.PATH || '').split(':').some((d) => d && fs.existsSync(path.join(d, 'pm2')));
  const own = path.join(ROOT, 'node_modules/.bin/pm2');
  return onPath || !fs.existsSync(own) ? 'pm2' : own;
}

/**
 * find(), and for PM2 the app's name from `pm2 jlist` run on the daemon's
 * PM2_HOME: { app, pm2, name }. app.kind is null when there is nothing to act on.
 */
function locate(appConfig) {
  const app = find({ appConfig: appConfig || DEFAULT_APP_CONFIG });
  if (app.kind !== 'pm2') return { app };
  const pm2 = pm2Bin();
  const r = spawnSync(pm2, ['jlist'], { encoding: 'utf8', env: { ...process.env, PM2_HOME: app.pm2Home }, timeout: 30000 });
  let list = [];
  try {
    list = JSON.parse(String(r.stdout).slice(String(r.stdout).indexOf('[')));
  } catch { /* below */ }
  const name = pm2Name(list, app.appConfig);
  if (!name) {
    return { app: { ...app, kind: null, why: `PM2's daemon (PM2_HOME ${app.pm2Home}) holds ${app.listen}, but \`${pm2} jlist\` names no app whose TUNEKIT_CONFIG is ${app.appConfig}` } };
  }
  return { app, pm2, name };
}

/** The one line said when there is no app to act on: where it looked, how to point it. */
function notFound(app) {
  return `no app found: ${app.why}; start it, or point to its settings with --app-config FILE (the app.json its runner or PM2 app reads), ` +
    'or to a stack kept by `tunekit demo --keep` with --stack DIR';
}

/** Who runs the app, in words: "systemd unit tunekit-app.service (main pid 12)". */
function describe(app, name = null) {
  if (app.kind === 'systemd') return `systemd unit ${app.unit} (main pid ${app.pid})`;
  if (app.kind === 'pm2') return `PM2 app ${name} (PM2_HOME ${app.pm2Home})`;
  return `the runner started by hand (pid ${app.pid})`;
}

/** The app's worker processes now: the runner's children running app/worker.js. */
function workersOf(pid) {
  return childrenOf(pid).filter((k) => WORKER_CMD.test(cmdline(k)));
}

/**
 * The app.json of the app named `name` on this host (several apps, tunekit_apps):
 * the settings file under etcDir/*\/app.json whose "name" it is.
 * @returns {string} its path; throws a UsageError naming the apps found otherwise
 */
function appConfigByName(name, etcDir = '/etc') {
  const found = [];
  let dirs = [];
  try {
    dirs = fs.readdirSync(etcDir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  } catch {
    // no such directory: nothing found
  }
  for (const d of dirs) {
    const file = path.join(etcDir, d, 'app.json');
    let settings;
    try {
      settings = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch {
      continue; // not the runner's settings, or not readable
    }
    if (!settings || typeof settings.name !== 'string' || !('listen' in settings)) continue;
    if (settings.name === name) return file;
    found.push(settings.name);
  }
  const here = found.length ? `the apps here: ${found.join(', ')}` : `no runner settings (app.json) under ${etcDir}/*/`;
  throw new UsageError(`--app ${name}: no ${etcDir}/*/app.json is the settings of an app named ${name} (${here}); give its settings file with --app-config FILE`);
}

/**
 * The app.json a command reads from its flags (doctor, status): --app NAME's,
 * --app-config FILE, or undefined (the command's default).
 */
function appConfigOf({ app, appConfig }) {
  if (app === undefined) return appConfig;
  if (appConfig) throw new UsageError('--app NAME and --app-config FILE name the same thing; give one');
  return appConfigByName(app);
}

module.exports = { appConfigOf, appConfigByName, find, locate, pm2Bin, pm2Home, serviceOf, stdoutFile, listenersOf, pm2Name, reloadCommand, logsCommand, workersOf, notFound, describe, DEFAULT_APP_CONFIG };
