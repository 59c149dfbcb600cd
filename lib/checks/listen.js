'use strict';
// doctor's checks of nginx's listens and limits: each listen's backlog against
// net.core.somaxconn, the app socket's live accept queue, an Alt-Svc that
// advertises HTTP/3 with no quic listen, the open-files limits of nginx's workers.

/** nginx's TCP listen backlogs (a quic listen has no accept queue), unset ones at nginx's default (from the definition). */
function listens(facts, ctx) {
  const nginxDefault = ctx.upstream('tunekit_listen_backlog');
  return (facts.nginx ? facts.nginx.listens : []).filter((l) => !l.quic).map((l) => ({
    ...l, asked: l.backlog ?? nginxDefault, idle: (l.backlog ?? nginxDefault) === nginxDefault && facts.kernel.somaxconn > nginxDefault,
  }));
}

function listenBacklogCases(facts, ctx) {
  const somaxconn = facts.kernel.somaxconn;
  return listens(facts, ctx).map((l) => {
    const liveQ = (facts.listeners || []).find((x) => x.kind === 'tcp' && (x.local === l.address || x.local.endsWith(`:${l.address.split(':').pop()}`)));
    return {
      vars: { tunekit_listen_backlog: l.asked, tunekit_sysctl_net_core_somaxconn: somaxconn },
      where: `nginx listen ${l.address} asks backlog ${l.asked}, net.core.somaxconn is ${somaxconn}`,
      fix: `raise net.core.somaxconn to ${l.asked} (tunekit's sysctl drop-in sets them together)`,
      ok: l.idle ? null : `nginx listen ${l.address}: accept queue ${Math.min(l.asked, somaxconn)}${liveQ ? ` (live: ${liveQ.backlog})` : ''}`,
    };
  });
}

// Not a broken rule: somaxconn was raised for nothing, the listen keeps nginx's default.
function listenBacklogIdle(facts, ctx) {
  return listens(facts, ctx).filter((l) => l.idle).map((l) => ({ id: 'backlog', level: 'warn',
    what: `nginx listen ${l.address} uses backlog ${l.asked} (nginx's default), so net.core.somaxconn ${facts.kernel.somaxconn} buys nothing`,
    fix: `add backlog=${facts.kernel.somaxconn} to the listen directive` }));
}

/** Alt-Svc advertises HTTP/3 on a UDP port: a `listen PORT quic` must serve it. */
function altSvcServed(facts) {
  const n = facts.nginx;
  if (!n || !n.altSvc) return [];
  const portOf = (address) => String(address).split(':').pop();
  return n.altSvc.flatMap((value) => {
    const ports = [...String(value).matchAll(/h3=":(\d+)"/g)].map((m) => m[1]);
    if (!ports.length) return [];
    const missing = ports.filter((p) => !n.listens.some((l) => l.quic && portOf(l.address) === p));
    return missing.length
      ? [{ id: 'http3-advertised', level: 'fail',
        what: `Alt-Svc "${value}" advertises HTTP/3 on UDP port ${missing.join(', ')}, but no \`listen ... quic\` serves it: clients try QUIC, wait for it to time out, and fall back to TCP`,
        fix: 'add `listen PORT quic` beside the TLS listen (tunekit_nginx_http3: true renders both), or remove the Alt-Svc header' }]
      : [{ id: 'http3-advertised', level: 'ok', what: `Alt-Svc h3 on UDP port ${ports.join(', ')} is served by a quic listen` }];
  });
}

function appSocketBacklog(facts) {
  if (!facts.nginx) return [];
  const somaxconn = facts.kernel.somaxconn;
  const asked = facts.app && facts.app.settings ? facts.app.settings.backlog : null;
  return facts.sockets.filter((s) => s.backlog != null).map((s) => (s.backlog < Math.min(somaxconn, 1024) && (asked == null || asked > s.backlog)
    ? { id: 'backlog', level: 'warn', what: `app socket ${s.path}: live accept queue ${s.backlog}, somaxconn ${somaxconn}`, fix: 'pass the listen backlog the sysctl allows (tunekit_listen_backlog)' }
    : { id: 'backlog', level: 'ok', what: `app socket ${s.path}: live accept queue ${s.backlog} (somaxconn ${somaxconn})` }));
}

/**
 * nginx's workers held under 2 x worker_connections by the master's hard limit:
 * it is below what they ask (worker_rlimit_nofile, else the soft limit they
 * inherit), so their setrlimit() fails and they keep at most that limit. One
 * cause, which the rule nginx-limit-nofile names: { low, need } of the workers'
 * live limits, or null when the hard limit does not explain them.
 */
function workersCapped(facts) {
  const n = facts.nginx;
  const l = facts.limits && facts.limits.nginx && facts.limits.nginx['Max open files'];
  if (!n || !l || !n.workerNofile || !n.workerNofile.length) return null;
  const low = Math.min(...n.workerNofile);
  const need = n.workerConnections * 2;
  return l.hard < (n.workerRlimitNofile ?? l.soft) && low <= l.hard && low < need ? { low, need } : null;
}

/**
 * What the running workers (and nginx's error log, where it said so) show of the
 * rule nginx-limit-nofile's cause, folded into its finding.
 */
function nginxLimitEvidence(facts) {
  const c = workersCapped(facts);
  if (!c) return null;
  const a = facts.nginx.alerts && facts.nginx.alerts['nginx-rlimit'];
  return `nginx's running workers show it: their open-files limit is ${c.low} (/proc of its workers), under 2 x worker_connections ${facts.nginx.workerConnections}` +
    `${a ? `; its error log: "${a.last}"` : ''}`;
}

function nginxNofile(facts) {
  const n = facts.nginx;
  if (!n) return [];
  const need = n.workerConnections * 2;
  const out = [];
  if (n.workerRlimitNofile == null) {
    out.push({ id: 'nofile', level: 'warn', what: 'worker_rlimit_nofile is not set; workers inherit the service\'s limit', fix: `set worker_rlimit_nofile ${need} (2 x worker_connections ${n.workerConnections})` });
  }
  // Capped by the master's hard limit: the rule nginx-limit-nofile reports it, with this as its evidence.
  if (n.workerNofile && n.workerNofile.length && !workersCapped(facts)) {
    const low = Math.min(...n.workerNofile);
    out.push(low < need
      ? { id: 'nofile', level: 'fail', what: `a running nginx worker has an open-files limit of ${low} < ${need}`, fix: 'raise LimitNOFILE in nginx.service.d and worker_rlimit_nofile, then reload' }
      : { id: 'nofile', level: 'ok', what: `running nginx workers may open ${low} files` });
  }
  return out;
}

module.exports = { listenBacklogCases, listenBacklogIdle, altSvcServed, appSocketBacklog, nginxNofile, nginxLimitEvidence, workersCapped };
