'use strict';
// The host values the definition's `# Live:` lines name beyond nginx's config and
// the app's own values, read once at gather time so that the live set
// (variables.js) is computed from facts alone: each sysctl a line names, each
// /proc/PID/limits field (nginx's master; the app's processes), each systemd
// property of the service the app runs in.

const { spawnSync } = require('node:child_process');
const { readDefinition } = require('../config/definition');
const { serviceOf } = require('../apphost');
const { readInt, limit } = require('./host');

/** Every source of one kind that the definition's `# Live:` lines name. */
function sourcesOf(kind, definition = readDefinition()) {
  return definition.flatMap((d) => (d.live || []).filter((s) => s.kind === kind));
}

/**
 * The app's processes: those that listen on its socket, else on the loopback
 * port of the upstream server the app was measured on.
 */
function appPids(facts) {
  const onSocket = facts.sockets.flatMap((s) => s.pids || []);
  if (onSocket.length) return [...new Set(onSocket)];
  const target = facts.app && facts.app.probe && facts.app.probe.target;
  const port = target && /:(\d+)$/.exec(target);
  const l = port && (facts.listeners || []).find((x) => x.kind === 'tcp' && x.local.endsWith(`:${port[1]}`));
  return l ? [...new Set(l.pids)] : [];
}

/** Read what the lines name into facts.kernel.sysctl, facts.limits and facts.systemd. */
function gatherSources(facts, definition = readDefinition()) {
  facts.kernel.sysctl = {};
  for (const s of sourcesOf('sysctl', definition)) {
    const file = `/proc/sys/${s.name.replace(/\./g, '/')}`;
    facts.kernel.sysctl[s.name] = readInt(file);
  }
  const pids = { nginx: facts.nginx && facts.nginx.masterPid ? [facts.nginx.masterPid] : [], app: appPids(facts) };
  facts.limits = { nginx: {}, app: {} };
  for (const s of sourcesOf('limits', definition)) {
    const found = pids[s.process].map((pid) => limit(pid, s.field)).filter(Boolean);
    // The app's processes: the lowest limit among them counts (the first to run out).
    if (found.length) facts.limits[s.process][s.field] = { soft: Math.min(...found.map((l) => l.soft)), hard: Math.min(...found.map((l) => l.hard)), pids: pids[s.process] };
  }
  if (pids.app.length) facts.read.push(`/proc/PID/limits of the app's processes (${pids.app.join(', ')})`);
  const unit = pids.app.map((pid) => serviceOf(pid)).find(Boolean);
  facts.systemd = unit ? { unit, properties: {} } : null;
  for (const s of unit ? sourcesOf('systemd', definition) : []) {
    const r = spawnSync('systemctl', ['show', '-p', s.property, '--value', unit], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) facts.systemd.properties[s.property] = r.stdout.trim();
  }
  if (unit) facts.read.push(`systemctl show ${unit}`);
}

module.exports = { sourcesOf, appPids, gatherSources };
