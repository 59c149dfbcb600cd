'use strict';
// Each app nginx proxies to, as the host runs it: one per address its proxied
// locations reach (an upstream block's first server, else proxy_pass's own
// address), with the processes that serve it (the listener's holders from `ss`,
// and the workers of a Node cluster primary among them: PM2's daemon in cluster
// mode), its GET /healthz, the runner's app.json when it names this address, and
// otherwise its timeouts measured (lib/probe.js). Gathered once (I/O); the live
// set of each app is then read from them (variables.js appViews).

const probe = require('../probe');
const { clusterWorkers } = require('./host');
const { healthz, appTimeouts } = require('./app');

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):(\d+)$/;

/** Whether app.json's "listen" (unix:PATH, tcp:HOST:PORT) is this target (unix:PATH, HOST:PORT). */
const listensOn = (settings, target) => Boolean(settings && settings.listen)
  && (settings.listen === target || settings.listen === `tcp:${target}`);

/**
 * The apps of this host: [{ target, socket, address, pids, workers, settings,
 * healthz, healthzError, probe }]. The first socket's /healthz and the probe
 * gather made already (facts.app) are reused for the app they belong to;
 * askApp: false sends no app a GET /healthz (gather's option).
 */
async function gatherApps(facts, { socket = null, probePath = '/', first = null, askApp = true } = {}) {
  const targets = [...new Set((facts.nginx ? facts.nginx.proxies : []).map((p) => p.target).filter(Boolean))];
  if (!targets.length && facts.sockets.length) targets.push(`unix:${facts.sockets[0].path}`);
  if (socket && !targets.includes(`unix:${socket}`)) targets.unshift(`unix:${socket}`);
  const settings = facts.app && facts.app.settings;
  // app.json is the settings of the app it names, else (as before several apps were read) of the first.
  const owner = targets.find((t) => listensOn(settings, t)) || targets[0];
  const apps = targets.map((target) => {
    const path = target.startsWith('unix:') ? target.slice(5) : null;
    const loop = path ? null : LOOPBACK.exec(target);
    const address = loop ? { host: loop[1].replace(/^\[|\]$/g, '').replace('localhost', '127.0.0.1'), port: Number(loop[2]) } : null;
    const sock = path && facts.sockets.find((s) => s.path === path);
    const listener = address && (facts.listeners || []).find((l) => l.kind === 'tcp' && l.local.endsWith(`:${address.port}`));
    const holders = [...new Set((sock && sock.pids) || (listener && listener.pids) || [])];
    const workers = [...new Set(holders.flatMap(clusterWorkers))].filter((p) => !holders.includes(p));
    return {
      target, socket: path, address,
      backlog: listener ? listener.backlog : null,
      pids: [...holders, ...workers],
      workers,
      settings: target === owner ? settings : null,
      healthz: null, healthzError: null, probe: null,
    };
  });
  await Promise.all(apps.map(async (app) => {
    const sock = app.socket && facts.sockets.find((s) => s.path === app.socket && s.exists && s.isSocket);
    if (sock && sock.path === first) {
      Object.assign(app, { healthz: facts.app.healthz, healthzError: facts.app.healthzError });
    } else if (sock && askApp) {
      const hz = await healthz(sock.path);
      facts.read.push(`GET /healthz on ${sock.path}`);
      Object.assign(app, { healthz: hz.status === 200 && hz.body ? hz.body : null, healthzError: hz.error || (hz.status !== 200 ? `HTTP ${hz.status}` : null) });
    }
    if (appTimeouts(app) || probePath === false) return;
    const name = sock ? sock.path : app.address ? `${app.address.host}:${app.address.port}` : null;
    if (!name) return;
    if (facts.app && facts.app.probe && facts.app.probe.target === name) {
      app.probe = facts.app.probe;
      return;
    }
    try {
      app.probe = { target: name, ...await probe.probeApp(sock ? { socketPath: sock.path } : app.address, { path: probePath || '/' }) };
      facts.read.push(`the app on ${name}, measured (HEAD ${probePath || '/'} then idle; a request whose headers never end; ${probe.BUDGET_MS / 1000} s at most)`);
    } catch (err) {
      facts.errors.push(`measuring the app on ${name}: ${err.message}`);
    }
  }));
  return apps;
}

module.exports = { gatherApps, listensOn };
