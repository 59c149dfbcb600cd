'use strict';
// The crash policy: what an unplanned worker death means, how soon it is
// replaced, when the cluster stops instead, and how repeated crashes are said.
//
// A worker *proves* the app once it has listened and stayed up
// settings.minUptimeMs (tunekit_app_min_uptime_ms; PM2's min_uptime). A death
// has a stage:
//   starting  it never listened (loading, or a warm spare waiting);
//   young     it listened for less than minUptimeMs and had no request open:
//             it died on its own, right after its start;
//   serving   it had stayed up minUptimeMs, or it had a request open when it
//             died (it answered those 500 on its way out, app/worker.js): a
//             request, or work done for one, killed it.
// What follows from it:
//   - Until a worker has proved the app, every death counts toward a broken
//     deploy: the youngDeathLimit-th stops the cluster (crash-loop, exit 1).
//     PM2 likewise counts unstable restarts only in an app's first
//     min_uptime x max_restarts.
//   - Once one has, no number of deaths stops the cluster: each dead worker is
//     replaced (the warm spare at once, a fork after the delay). The other
//     workers still serve, and a restart of the whole runner cannot fix a
//     request that kills the worker taking it.
//   - The delay: respawnBackoffMs x 2^(n-1), at most respawnBackoffMaxMs, n the
//     starting and young deaths since a worker last stayed up minUptimeMs (that
//     resets it). A serving death does not grow it: backing off from deaths that
//     requests cause lets the slots empty, the killing requests queue on the
//     socket meanwhile and kill each new worker at once (young, so the delay
//     grows again): a crash per request turns into an outage. Measured through
//     the kit's nginx at 2 such requests a second (test/faults/crash-storm.test.js,
//     30 s, a busy 2-core machine): with every death counted, the delay reached
//     its 5 s ceiling after 6 deaths, the 30 s took 53 s and the good load got 53
//     answers a second; counting only the deaths on their own, 162 a second,
//     every delay 100 ms.
// Reports: the first death of each distinct error (its fingerprint: name,
// message with digits masked, top stack frames) is logged in full
// (worker-crash); its repeats are counted, and said in one crash-summary line
// per error every REPORT_MS and when the runner stops. Every death keeps its
// short worker-exit line (the process record the metrics count), which names
// the fingerprint.
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.s, p.log, p.infos, p.proven, p.deathsSinceStable, p.unstableDeaths,
//   p.crashKinds, p.crashTimer.
// A worker's info (app/lifecycle.js) gets listeningAt, stable, stableTimer; `open`
// comes with its fatal error.

const crypto = require('node:crypto');

// How often the repeats of an error are summed up in one crash-summary line.
const REPORT_MS = 60_000;
// Distinct errors remembered at once. An app whose errors never repeat (an id in
// every message) would otherwise grow the table for ever; past this, a new
// error is logged in full and not remembered.
const MAX_KINDS = 100;

/** The worker listens: once it has for minUptimeMs, it proves the app. */
function onListening(p, info) {
  info.listeningAt = Date.now();
  clearTimeout(info.stableTimer);
  info.stableTimer = setTimeout(() => {
    if (p.infos.get(info.id) === info) becameStable(p, info);
  }, p.s.minUptimeMs);
  info.stableTimer.unref();
}

function becameStable(p, info) {
  if (info.stable) return;
  info.stable = true;
  p.deathsSinceStable = 0;
  p.unstableDeaths = 0;
  if (p.proven) return;
  p.proven = true;
  p.log('info', 'stable', {
    worker: info.id, worker_pid: info.pid, min_uptime_ms: p.s.minUptimeMs,
    message: 'a worker stayed up tunekit_app_min_uptime_ms after it listened: from now on every dead worker is replaced, and crashes never stop the cluster',
  });
}

/** starting | young | serving, for a worker that just died. */
function stageOf(p, info) {
  clearTimeout(info.stableTimer);
  if (!info.stable && info.listeningAt && Date.now() - info.listeningAt >= p.s.minUptimeMs) becameStable(p, info);
  if (info.stable || info.open > 0) return 'serving';
  return info.listeningAt ? 'young' : 'starting';
}

/**
 * An unplanned death counted: the delay before its replacement is forked, and
 * `stop`, true when the app has not proved itself and this death reaches
 * youngDeathLimit.
 */
function afterDeath(p, stage) {
  p.deathsSinceStable += 1;
  if (stage !== 'serving') p.unstableDeaths += 1;
  return {
    delay: Math.min(p.s.respawnBackoffMs * 2 ** Math.max(0, p.unstableDeaths - 1), p.s.respawnBackoffMaxMs),
    stop: !p.proven && p.deathsSinceStable >= p.s.youngDeathLimit,
  };
}

/** The crash-loop line's message: why the cluster stops. */
function crashLoopMessage(p, lastError) {
  return `crash loop: ${p.deathsSinceStable} worker deaths and no worker stayed up ${p.s.minUptimeMs} ms after it listened ` +
    `(tunekit_app_young_death_limit ${p.s.youngDeathLimit}, tunekit_app_min_uptime_ms); stopping the cluster. Last worker error: ${lastError}`;
}

/** Masks digits (ids, ports, counts) in a message, so one error with varying numbers is one kind. */
const maskDigits = (text) => String(text || '').replace(/\d+/g, '#');

/** The fingerprint of a death: its error (name, message, top frames), or how it ended when no error was reported. */
function fingerprint(info, code, signal) {
  const e = info.error;
  const text = e
    ? [e.name || '', maskDigits(e.message), e.code || '', ...(e.frames || [e.at || ''])].join('\n')
    : `${info.timedOut ? 'start timeout, ' : ''}${signal ? `signal ${signal}` : `exit code ${code}`}`;
  return crypto.createHash('sha256').update(text).digest('hex').slice(0, 12);
}

/**
 * Count a death by its error. Returns the fingerprint; the first of a kind (or
 * one past MAX_KINDS) is logged in full here, after its worker-exit line.
 * `head`: the error in one line (lifecycle.errorText).
 */
function record(p, info, { code, signal, head }) {
  const id = fingerprint(info, code, signal);
  const now = Date.now();
  const kind = p.crashKinds.get(id);
  if (kind) {
    kind.pending += 1;
    kind.total += 1;
    kind.last = now;
    if (!p.crashTimer) {
      p.crashTimer = setTimeout(() => report(p), REPORT_MS);
      p.crashTimer.unref();
    }
    return { id, first: false };
  }
  if (p.crashKinds.size < MAX_KINDS) p.crashKinds.set(id, { id, head, total: 1, pending: 0, first: now, last: now, reported: now });
  return { id, first: true };
}

/** The full line of a first occurrence (after its worker-exit line). */
function logFirst(p, info, { id, stage, head, code, signal }) {
  p.log('error', 'worker-crash', {
    crash: id, worker: info.id, worker_pid: info.pid, stage, code, signal,
    error: info.error || null,
    message: `${head}; its repeats are counted in one crash-summary line every ${REPORT_MS / 1000} s`,
  });
}

/**
 * One crash-summary line per error that repeated since its last line; an error
 * that has not come back for a whole period is forgotten (logged in full again
 * if it does).
 */
function report(p) {
  clearTimeout(p.crashTimer);
  p.crashTimer = null;
  const now = Date.now();
  for (const kind of p.crashKinds.values()) {
    if (kind.pending > 0) {
      const seconds = Math.max(1, Math.round((now - kind.reported) / 1000));
      p.log('error', 'crash-summary', {
        crash: kind.id, count: kind.pending, total: kind.total, since: new Date(kind.first).toISOString(), period_s: seconds,
        message: `${kind.head}: ${kind.pending} more worker deaths in the last ${seconds} s, ${kind.total} since ${new Date(kind.first).toISOString()}`,
      });
      kind.pending = 0;
      kind.reported = now;
    } else if (now - kind.last >= REPORT_MS) {
      p.crashKinds.delete(kind.id);
    }
  }
}

module.exports = { REPORT_MS, MAX_KINDS, onListening, stageOf, afterDeath, crashLoopMessage, fingerprint, record, logFirst, report };
