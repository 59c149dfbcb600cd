'use strict';
// doctor's evaluation of a live host as node_exporter's textfile: the one
// extractor (live/index.js gather) and doctor's audit (doctor.js: each rule of
// roles/tunekit/vars/rules.yml by its check, else by live/evaluate.js), written
// as one gauge per rule, with the accept queues of the sockets asked for (the
// same `ss -l` read, live/sockets.js listeners). metrics/queue-sampler.js runs
// it on a host every interval; tunekit.rules.yml's TunekitRuleBroken alerts on it.
// Metric names: metrics/README.md.
//
//   tunekit_rule_broken{rule, level, says}   1 broken, 0 holds; absent for a rule
//                                            not evaluated here. says: the rule's
//                                            own text as doctor prints it ("" when it holds)
//   tunekit_rule_not_evaluated{rule, why}    1 for each rule the host gave no value for
//   tunekit_rule_input{rule, variable}       the numbers a rule was evaluated over
//   tunekit_listen_queue_length / _limit / tunekit_listen_sockets {socket, kind}
//   tunekit_queue_sampler_last_run_timestamp_seconds

const fs = require('node:fs');
const path = require('node:path');
const config = require('./config');
const doctor = require('./doctor');

const FILE_NAME = 'tunekit-queues.prom';

/** Whether a tcp local address (127.0.0.1:80, [::]:443, *:80) is what `spec` names: ADDR:PORT, or PORT on any address. */
function tcpMatches(spec, local) {
  return /^\d+$/.test(spec) ? local.endsWith(`:${spec}`) : local === spec;
}

function fileInode(file) {
  try {
    return fs.statSync(file).ino;
  } catch {
    return null;
  }
}

/**
 * One queue per socket asked for: { socket, kind, sockets, queued, limit }, from
 * live/sockets.js listeners(). With SO_REUSEPORT (nginx's reuseport: one socket
 * per worker) an address has several queues: queued and limit are those of the
 * fullest one, sockets how many there are.
 */
function queues(wanted, found, inodeOf = fileInode) {
  return wanted.map(({ kind, socket }) => {
    let mine = found.filter((s) => s.kind === kind && (kind === 'unix' ? s.local === socket : tcpMatches(socket, s.local)));
    // After the runner bound a deleted path again, its old socket still listens under
    // the same name; the one bound to the file at the path is the one nginx reaches.
    const ino = kind === 'unix' ? inodeOf(socket) : null;
    if (ino != null && mine.some((s) => s.ino === ino)) mine = mine.filter((s) => s.ino === ino);
    const fullest = mine.reduce((a, s) => (!a || s.queued / s.backlog > a.queued / a.backlog ? s : a), null);
    return { kind, socket, sockets: mine.length, queued: fullest ? fullest.queued : null, limit: fullest ? fullest.backlog : null };
  });
}

/** A label value as the text format writes it. */
const label = (v) => String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/** The sample in Prometheus text format 0.0.4: the queues and doctor's rule coverage (audit().rules). */
function format(qs, coverage, now = Date.now()) {
  const lines = [];
  const metric = (name, help, rows) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of rows) {
      const l = Object.entries(labels).map(([k, v]) => `${k}="${label(v)}"`).join(',');
      lines.push(`${name}${l ? `{${l}}` : ''} ${value}`);
    }
  };
  const seen = qs.filter((q) => q.sockets > 0);
  metric('tunekit_listen_queue_length', 'Connections waiting to be accepted on a listening socket (ss Recv-Q); with SO_REUSEPORT, the fullest of its sockets.',
    seen.map((q) => [{ socket: q.socket, kind: q.kind }, q.queued]));
  metric('tunekit_listen_queue_limit', 'How many connections that queue holds: min(listen backlog, net.core.somaxconn) (ss Send-Q).',
    seen.map((q) => [{ socket: q.socket, kind: q.kind }, q.limit]));
  metric('tunekit_listen_sockets', 'Listening sockets on that path or address (0: nothing listens; above 1: SO_REUSEPORT).',
    qs.map((q) => [{ socket: q.socket, kind: q.kind }, q.sockets]));
  metric('tunekit_rule_broken', "A rule of the kit's table (roles/tunekit/vars/rules.yml) as tunekit doctor evaluates it on this host: 1 broken, 0 holds; says is the rule's text when broken.",
    coverage.verdicts.map((v) => [{ rule: v.id, level: v.level, says: v.broken ? v.says : '' }, v.broken ? 1 : 0]));
  metric('tunekit_rule_not_evaluated', 'A rule of the table this host gave no value for (tunekit doctor names it the same way); why: the first value it lacks.',
    coverage.notEvaluated.map((r) => [{ rule: r.id, why: r.missing.map((m) => (m.variable ? `${m.variable}: ${m.why}` : m.why))[0] || '' }, 1]));
  metric('tunekit_rule_input', 'A number a rule was evaluated over, as the host has it now.',
    coverage.verdicts.flatMap((v) => Object.entries(v.values).filter(([, x]) => typeof x === 'number' && Number.isFinite(x)).map(([k, x]) => [{ rule: v.id, variable: k }, x])));
  metric('tunekit_queue_sampler_last_run_timestamp_seconds', 'When this file was written.', [[{}, (now / 1000).toFixed(3)]]);
  return `${lines.join('\n')}\n`;
}

/** Write text to dir/name whole: a temp file (not *.prom, which the collector would read), then rename. */
function writeAtomically(dir, name, text) {
  const tmp = path.join(dir, `.${name}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, text, { mode: 0o644 });
  fs.renameSync(tmp, path.join(dir, name));
}

// The kit's resolved definition (doctor's fix texts read it), once per process.
let resolved = null;

/**
 * One sample: what doctor reads of the host, audited, and the queues of `unix`
 * and `tcp` (ss's names). The app is sent nothing (no GET /healthz, no
 * black-box probe, lib/probe.js): a request every interval would be one of the
 * app's own, served by its code. Its values come from app.json (what the runner
 * was started with); an app with no app.json has its timeout rules not
 * evaluated here. table, definition: a copy, in tests.
 * Returns { text, errors (what could not be read), coverage }.
 */
async function sample({ nginxConf, nginxBin, appConfig, unix = [], tcp = [], table, definition } = {}) {
  const facts = await doctor.gather({ ...(nginxConf && { nginxConf }), ...(nginxBin && { nginxBin }), ...(appConfig && { appConfig }), probePath: false, askApp: false });
  if (!resolved) resolved = config.resolve();
  const { rules: coverage } = doctor.audit(facts, resolved, { ...(table && { table }), ...(definition && { definition }) });
  const wanted = [...unix.map((socket) => ({ kind: 'unix', socket })), ...tcp.map((socket) => ({ kind: 'tcp', socket }))];
  return { text: format(queues(wanted, facts.listeners), coverage), errors: facts.errors, coverage };
}

module.exports = { FILE_NAME, sample, format, queues, tcpMatches, writeAtomically };
