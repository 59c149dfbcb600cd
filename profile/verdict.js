'use strict';
// The decision rule of `tunekit profile`, in the order it is applied (the
// first that holds wins; each verdict carries the figures that made it):
//
// 1. queue-bound: a listener's accept queue filled up (its Recv-Q reached its
//    Send-Q, the backlog, in a sample taken during the load) or the kernel
//    counted TCP ListenOverflows/ListenDrops during the run. A full queue makes
//    every other figure a symptom: clients wait in the queue or are refused.
// 2. proxy-bound: nginx's workers used at least PROXY_CORE_SHARE of a core each
//    on average while the app's workers used less than that: the proxy saturates first.
// 3. generator-bound: the profile sent the load itself (--demo), its
//    generator's busiest process was busy (at least GENERATOR_BUSY of a core) and
//    used at least GENERATOR_LEAD times the CPU of the busiest server worker
//    (nginx's or the app's, each below PROXY_CORE_SHARE): the client, not the
//    server, sets the pace, so the server's samples say little about its limit.
//    Mostly a ratio of measured shares: on a machine shared with other work every
//    process gets less CPU and the ratio stays. The floor keeps a starved machine
//    (every process at a few % of a core, other tenants holding the cores) from
//    passing for it: there the generator is no more the limit than the server.
// 4. app-bound: JavaScript and GC hold at least APP_SHARE of the app workers'
//    samples; the hottest JavaScript functions are named.
// 5. transport-bound: the app workers' samples inside syscalls hold at least
//    TRANSPORT_SHARE (the socket syscalls dominate their time).
// 6. otherwise: undetermined, with the same figures, for a person to read.
//
// Each verdict comes with its advice: what to do about it.

const { CLIENT_BOUND_CORE_SHARE, OTHER_LOAD_CORES } = require('../loadtest/measure');

const PROXY_CORE_SHARE = 0.9;
const GENERATOR_LEAD = 2;
const GENERATOR_BUSY = 0.5;
const APP_SHARE = 0.5;
const TRANSPORT_SHARE = 0.5;

const ADVICE = {
  'queue-bound': 'raise the listen backlog and net.core.somaxconn together (tunekit_listen_backlog), or add workers so the queue drains faster',
  'proxy-bound': 'give nginx more worker processes (tunekit_nginx_worker_processes: one per core) or more cores; check that upstream keep-alive is on (no new connection per request)',
  'generator-bound': 'the server was not the limit: profile a deployment with --pid/--unit/--app-config while the load comes from another host, ' +
    'or measure with `tunekit loadtest --procs 2` or `--driver wrk` (a generator that costs less per request); more --connections only help when the generator has CPU to spare',
  'app-bound': 'the named JavaScript functions are where the time goes: make them cheaper, or add app workers (tunekit_app_workers) if cores are free',
  'transport-bound': 'the app spends its time in socket syscalls: keep upstream keep-alive on, use the Unix socket upstream, and compare with `tunekit bench`',
  undetermined: 'no rule held: read the figures below (CPU shares, top symbols, syscalls); a longer --duration or more --connections gives a clearer picture',
};

/**
 * @param {object} f
 * @param {{local:string, recvQ:number, sendQ:number, maxRecvQ:number}[]} f.queues  listeners, with the largest Recv-Q seen
 * @param {{ListenOverflows:number, ListenDrops:number}} f.tcpDelta  counter increase during the run
 * @param {{nginx:number, app:number}} f.coreShare  mean CPU per worker, in cores (1 = one core busy)
 * @param {{js:number, gc:number, syscall:number, native:number}} f.appShares  sample shares of the app workers
 * @param {{name:string, share:number, js:boolean}[]} f.appTop  the app workers' top symbols
 * @param {number|null} [f.generatorCore]  the load generator's busiest process, in cores (null: no load was sent)
 * @param {{cores:number, otherCores:number|null}|null} [f.machine]  cores busy with neither side meanwhile (loadtest/measure.js)
 * @returns {{verdict:string, evidence:string[], advice:string}}
 */
function decide(f) {
  const v = rule(f);
  return { ...v, advice: ADVICE[v.verdict] };
}

function rule({ queues = [], tcpDelta = {}, coreShare = {}, appShares = null, appTop = [], generatorCore = null, machine = null }) {
  const full = queues.filter((q) => q.sendQ > 0 && q.maxRecvQ >= q.sendQ);
  const overflows = (tcpDelta.ListenOverflows || 0) + (tcpDelta.ListenDrops || 0);
  if (full.length || overflows > 0) {
    return {
      verdict: 'queue-bound',
      evidence: [
        ...full.map((q) => `accept queue of ${q.local} full: Recv-Q reached ${q.maxRecvQ} of a backlog of ${q.sendQ}`),
        ...(overflows ? [`TCP ListenOverflows +${tcpDelta.ListenOverflows || 0}, ListenDrops +${tcpDelta.ListenDrops || 0} during the run`] : []),
      ],
    };
  }
  const nginx = coreShare.nginx || 0;
  const app = coreShare.app || 0;
  if (nginx >= PROXY_CORE_SHARE && app < PROXY_CORE_SHARE) {
    return { verdict: 'proxy-bound', evidence: [`nginx workers at ${pct(nginx)} of a core each, app workers at ${pct(app)}`] };
  }
  const server = Math.max(nginx, app);
  if (generatorCore != null && generatorCore >= GENERATOR_BUSY && server < PROXY_CORE_SHARE && generatorCore >= GENERATOR_LEAD * server) {
    return {
      verdict: 'generator-bound',
      evidence: [
        `the load generator's busiest process at ${pct(generatorCore)} of a core${generatorCore >= CLIENT_BOUND_CORE_SHARE ? ' (saturated)' : ''}; ` +
          `nginx workers at ${pct(nginx)} of a core each, app workers at ${pct(app)}: nothing on the server side is saturated`,
      ],
    };
  }
  const hot = appTop.filter((s) => s.js).slice(0, 3);
  if (appShares && appShares.js + appShares.gc >= APP_SHARE) {
    return {
      verdict: 'app-bound',
      evidence: [
        `JavaScript ${pct(appShares.js)} + GC ${pct(appShares.gc)} of the app workers' samples`,
        ...(hot.length ? [`hottest functions: ${hot.map((s) => `${s.name.replace(/ \[js\]$/, '')} (${pct(s.share)})`).join(', ')}`] : []),
      ],
    };
  }
  if (appShares && appShares.syscall >= TRANSPORT_SHARE) {
    return { verdict: 'transport-bound', evidence: [`syscalls hold ${pct(appShares.syscall)} of the app workers' samples`] };
  }
  return {
    verdict: 'undetermined',
    evidence: [appShares ? `app samples: JavaScript ${pct(appShares.js)}, GC ${pct(appShares.gc)}, syscalls ${pct(appShares.syscall)}, other native ${pct(appShares.native)}` : 'no app samples',
      `nginx workers at ${pct(nginx)} of a core each, app workers at ${pct(app)}${generatorCore != null ? `, the load generator at ${pct(generatorCore)}` : ''}`,
      // Nothing busy and the cores taken by others: the machine, not the stack, set the figures.
      ...(machine && machine.otherCores != null && machine.otherCores >= OTHER_LOAD_CORES * machine.cores
        ? [`other processes kept ${machine.otherCores.toFixed(1)} of ${machine.cores} cores busy meanwhile: on a machine this shared, run it again when it is quieter`] : []),
    ],
  };
}

function pct(x) {
  return `${(x * 100).toFixed(0)}%`;
}

module.exports = { decide, ADVICE, PROXY_CORE_SHARE, GENERATOR_LEAD, GENERATOR_BUSY, APP_SHARE, TRANSPORT_SHARE };
