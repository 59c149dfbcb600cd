'use strict';
// The host values the definition's `# Live:` lines name beyond nginx's config and
// the app's own values, read once at gather time so that the live set
// (variables.js) is computed from facts alone: each sysctl a line names, each
// /proc/PID/limits field (nginx's master; the app's processes), each systemd
// property of the service the app runs in.

const { spawnSync } = require('node:child_process');
const { readDefinition } = require('../config/definition');
const { serviceOf } = require('../apphost');
const { readInt, limit, nodeVersionOf } = require('./host');

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

/** Each /proc/PID/limits field the lines name for `process`, over pids: the lowest among them counts (the first to run out). */
function limitsOf(process, pids, definition) {
  const out = {};
  for (const s of sourcesOf('limits', definition).filter((x) => x.process === process)) {
    const found = pids.map((pid) => limit(pid, s.field)).filter(Boolean);
    if (found.length) out[s.field] = { soft: Math.min(...found.map((l) => l.soft)), hard: Math.min(...found.map((l) => l.hard)), pids };
  }
  return out;
}

/** The systemd service pids run in and the properties the lines name, or null. */
function systemdOf(pids, definition, facts) {
  const unit = pids.map((pid) => serviceOf(pid)).find(Boolean);
  if (!unit) return null;
  const out = { unit, properties: {} };
  for (const s of sourcesOf('systemd', definition)) {
    const r = spawnSync('systemctl', ['show', '-p', s.property, '--value', unit], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) out.properties[s.property] = r.stdout.trim();
  }
  facts.read.push(`systemctl show ${unit}`);
  return out;
}

/**
 * Read what the lines name into facts.kernel.sysctl, facts.limits and
 * facts.systemd, and for each app (facts.apps) its own limits, service and Node
 * version (of its workers first: under a cluster primary they run the app).
 */
function gatherSources(facts, definition = readDefinition()) {
  facts.kernel.sysctl = {};
  for (const s of sourcesOf('sysctl', definition)) {
    const file = `/proc/sys/${s.name.replace(/\./g, '/')}`;
    facts.kernel.sysctl[s.name] = readInt(file);
  }
  facts.limits = { nginx: limitsOf('nginx', facts.nginx && facts.nginx.masterPid ? [facts.nginx.masterPid] : [], definition), app: {} };
  for (const app of facts.apps || []) {
    app.limits = limitsOf('app', app.pids, definition);
    if (app.pids.length) facts.read.push(`/proc/PID/limits of the app's processes on ${app.target} (${app.pids.join(', ')}${app.workers.length ? `; cluster workers ${app.workers.join(', ')}` : ''})`);
    app.systemd = systemdOf(app.pids, definition, facts);
    app.node = [...app.workers, ...app.pids].map(nodeVersionOf).find(Boolean) || null;
  }
  // The host's one app as before several were read: the first's (or the sockets' processes).
  const first = (facts.apps || [])[0];
  const pids = first ? first.pids : appPids(facts);
  facts.limits.app = first ? first.limits : limitsOf('app', pids, definition);
  if (!first && pids.length) facts.read.push(`/proc/PID/limits of the app's processes (${pids.join(', ')})`);
  facts.systemd = first ? first.systemd : systemdOf(pids, definition, facts);
}

module.exports = { sourcesOf, appPids, gatherSources, limitsOf };
