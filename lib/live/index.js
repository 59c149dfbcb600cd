'use strict';
// The host-side extractor: everything doctor reads of a live host, kit-deployed
// or not, gathered once (I/O only) into facts:
//   nginx.js    `nginx -T` into the nginx model, its processes' limits, its error log
//   sockets.js  the listening sockets (`ss -l`) and each app socket's file and listener
//   app.js      the app's own values: app.json, GET /healthz, else measured (lib/probe.js)
//   apps.js     each app nginx proxies to: its address, processes (a cluster primary's workers), values
//   host.js     /proc and the kernel (limits, process state, sysctls)
//   sources.js  the sysctls, /proc limits and systemd properties the `# Live:` lines name
//   variables.js  those facts as the rules' variables, by the definition's `# Live:` lines
//   evaluate.js   the rule table evaluated over them

const fs = require('node:fs');
const { findNginx } = require('../nginx');
const { UsageError } = require('../errors');
const { readInt } = require('./host');
const { listeners, socketFacts } = require('./sockets');
const { DEFAULT_NGINX_CONF, gatherNginx } = require('./nginx');
const { DEFAULT_APP_CONFIG, healthz, probeApp, gatherAppSettings, appTimeouts } = require('./app');
const { gatherSources } = require('./sources');
const { gatherApps } = require('./apps');

/**
 * Read what runs. Options: nginxConf, nginxBin, appConfig, socket; askApp:
 * false sends the app nothing (no GET /healthz; pass probePath: false too), the
 * sampler's way: a request every interval would be one of the app's. A path
 * given explicitly must exist (UsageError otherwise); a default path that does
 * not exist skips its layer. facts.read lists what was read, facts.skipped
 * every layer left out and why.
 */
async function gather({ nginxConf, nginxBin = findNginx() || 'nginx', appConfig, socket = null, probePath = '/', askApp = true } = {}) {
  for (const [flag, file] of [['--nginx-conf', nginxConf], ['--app-config', appConfig], ['--socket', socket]]) {
    if (file && !fs.existsSync(file)) throw new UsageError(`${flag} ${file}: no such file; pass the path of the live file`);
  }
  const facts = {
    read: ['/proc/sys/net/core/somaxconn', '/proc/sys/fs/nr_open'],
    skipped: [],
    kernel: {
      somaxconn: readInt('/proc/sys/net/core/somaxconn'),
      nrOpen: readInt('/proc/sys/fs/nr_open'),
    },
    nginx: null,
    app: null,
    sockets: [],
    errors: [],
  };
  gatherNginx(facts, nginxConf || DEFAULT_NGINX_CONF, nginxBin);
  facts.listeners = listeners();
  facts.read.push('ss -l (listening sockets)');
  const appSettings = gatherAppSettings(facts, appConfig || DEFAULT_APP_CONFIG, Boolean(appConfig));
  const socketPaths = socket ? [socket]
    : facts.nginx ? facts.nginx.upstreams.flatMap((u) => u.servers.filter((s) => s.startsWith('unix:')).map((s) => s.slice(5)))
      : appSettings && appSettings.listen.startsWith('unix:') ? [appSettings.listen.slice(5)] : [];
  if (!socketPaths.length) facts.skipped.push({ layer: 'app socket', why: 'no unix: server in nginx\'s upstreams and no app.json naming one (pass --socket PATH)' });
  for (const p of [...new Set(socketPaths)]) {
    facts.read.push(`socket ${p}`);
    facts.sockets.push(socketFacts(p, facts));
  }
  const first = facts.sockets.find((s) => s.exists && s.isSocket);
  const hz = first && askApp ? await healthz(first.path) : null;
  if (hz) facts.read.push(`GET /healthz on ${first.path}`);
  facts.app = {
    settings: appSettings,
    healthz: hz && hz.status === 200 && hz.body ? hz.body : null,
    healthzError: hz && (hz.error || (hz.status !== 200 ? `HTTP ${hz.status}` : null)),
    probe: null,
  };
  if (!appTimeouts(facts.app) && probePath !== false) await probeApp(facts, first, probePath);
  facts.apps = await gatherApps(facts, { socket, probePath, first: first && first.path, askApp });
  gatherSources(facts);
  return facts;
}

module.exports = { DEFAULT_NGINX_CONF, DEFAULT_APP_CONFIG, gather };
