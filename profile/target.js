'use strict';
// Which processes `tunekit profile` may attach to, found from a pid or a
// systemd unit. Only the kit's own, decided from /proc:
//  - the app: a process whose command line runs the kit's runner
//    (app/cluster.js, `bin/tunekit.js run`) or one of its workers (app/worker.js);
//    its workers are its children running app/worker.js;
//  - nginx: a master process ("nginx: master process ...") whose configuration
//    (its -c file, else /etc/nginx/nginx.conf) was rendered by tunekit (the
//    header line every rendered nginx.conf starts with); its workers are its children.
// Anything else is refused with what was found.

const fs = require('node:fs');
const { spawnSync } = require('node:child_process');
const { cmdline, childrenOf, alive, RUNNER_CMD: RUNNER, WORKER_CMD: WORKER } = require('../lib/proc');
const { ProfileError } = require('./run');

const RENDERED_MARK = 'rendered by tunekit';

function nginxConf(cmd) {
  const m = / -c (\S+)/.exec(cmd);
  return m ? m[1] : '/etc/nginx/nginx.conf';
}

// pid -> { kind: 'app' | 'nginx', main, workers } or a ProfileError.
function identify(pid) {
  if (!Number.isInteger(pid) || pid < 1 || !alive(pid)) throw new ProfileError(`pid ${pid}: no such process`);
  const cmd = cmdline(pid);
  if (RUNNER.test(cmd)) {
    // The primary too: with the round-robin strategy it accepts the connections.
    return { kind: 'app', main: pid, workers: [pid, ...childrenOf(pid).filter((k) => WORKER.test(cmdline(k)))] };
  }
  if (WORKER.test(cmd)) return { kind: 'app', main: pid, workers: [pid] };
  if (cmd.startsWith('nginx: master process')) {
    const conf = nginxConf(cmd);
    let text = '';
    try {
      text = fs.readFileSync(conf, 'utf8').slice(0, 400);
    } catch { /* unreadable: not the kit's for us */ }
    if (text.includes(RENDERED_MARK)) {
      return { kind: 'nginx', main: pid, workers: childrenOf(pid).filter((k) => cmdline(k).startsWith('nginx: worker process')) };
    }
    throw new ProfileError(`pid ${pid} is nginx, but its configuration ${conf} was not rendered by tunekit (no "${RENDERED_MARK}" header); refusing to trace it`);
  }
  throw new ProfileError(`pid ${pid} (${cmd.slice(0, 80) || 'no command line'}) is not the kit's: ` +
    'expected the runner (app/cluster.js, tunekit run), an app worker (app/worker.js) or an nginx master with a tunekit-rendered config');
}

function unitPid(unit) {
  const r = spawnSync('systemctl', ['show', '-p', 'MainPID', '--value', unit], { encoding: 'utf8' });
  const pid = Number(String(r.stdout || '').trim());
  if (r.status !== 0 || !pid) throw new ProfileError(`systemd unit ${unit} has no running main process (systemctl show -p MainPID ${unit})`);
  return pid;
}

/**
 * A deployed stack as `tunekit doctor` reads it (lib/doctor.js gather(): the
 * app.json, nginx's config and pid file, the listening sockets): the processes
 * listening on the app's sockets (the runner's primary when it is among them)
 * and nginx's master. `endpoint`: the app.json's parsed listen address
 * (app/settings.js). { pids, notes }: what was found, and what was left out.
 */
function deployedPids(facts, { endpoint, nginxExplicit = false }) {
  const notes = [];
  const listening = [...new Set(facts.sockets.flatMap((s) => s.pids || []))];
  if (endpoint.kind === 'tcp') {
    for (const l of facts.listeners || []) if (l.kind === 'tcp' && l.local.endsWith(`:${endpoint.port}`)) listening.push(...l.pids);
  }
  const primaries = listening.filter((p) => RUNNER.test(cmdline(p)));
  const pids = primaries.length ? primaries : listening;
  if (!pids.length) notes.push('no process listens on the app\'s socket: is the app running?');
  const master = facts.nginx && facts.nginx.masterPid;
  if (master) {
    try {
      identify(master);
      pids.push(master);
    } catch (err) {
      if (nginxExplicit) throw err;
      notes.push(`nginx left out: ${err.message}`);
    }
  } else {
    notes.push('nginx left out: no running nginx master for its config (pass --nginx-conf PATH)');
  }
  return { pids: [...new Set(pids)], notes };
}

// Pids and units -> { nginx: [workers], app: [workers], found: [...] }.
function groupsOf({ pids = [], units = [] }) {
  const found = [...pids, ...units.map(unitPid)].map(identify);
  const groups = { nginx: [], app: [] };
  for (const f of found) for (const w of f.workers) if (!groups[f.kind].includes(w)) groups[f.kind].push(w);
  if (!groups.nginx.length && !groups.app.length) throw new ProfileError('no worker processes found to profile');
  return { ...groups, found };
}

module.exports = { identify, groupsOf, deployedPids, RENDERED_MARK };
