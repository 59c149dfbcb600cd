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
const { cmdline, childrenOf, alive } = require('../../lib/proc');
const { ProfileError } = require('./run');

const RENDERED_MARK = 'rendered by tunekit';
const RUNNER = /(?:^|\/)app\/cluster\.js(?: |$)|(?:^|\/)bin\/tunekit\.js run(?: |$)/;
const WORKER = /(?:^|\/)app\/worker\.js(?: |$)/;

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

// Pids and units -> { nginx: [workers], app: [workers], found: [...] }.
function groupsOf({ pids = [], units = [] }) {
  const found = [...pids, ...units.map(unitPid)].map(identify);
  const groups = { nginx: [], app: [] };
  for (const f of found) groups[f.kind].push(...f.workers);
  if (!groups.nginx.length && !groups.app.length) throw new ProfileError('no worker processes found to profile');
  return { ...groups, found };
}

module.exports = { identify, groupsOf, RENDERED_MARK };
