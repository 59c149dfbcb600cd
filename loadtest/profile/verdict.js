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
// 3. app-bound: JavaScript and GC hold at least APP_SHARE of the app workers'
//    samples; the hottest JavaScript functions are named.
// 4. transport-bound: the app workers' samples inside syscalls hold at least
//    TRANSPORT_SHARE (the socket syscalls dominate their time).
// 5. otherwise: undetermined, with the same figures, for a person to read.

const PROXY_CORE_SHARE = 0.9;
const APP_SHARE = 0.5;
const TRANSPORT_SHARE = 0.5;

/**
 * @param {object} f
 * @param {{local:string, recvQ:number, sendQ:number, maxRecvQ:number}[]} f.queues  listeners, with the largest Recv-Q seen
 * @param {{ListenOverflows:number, ListenDrops:number}} f.tcpDelta  counter increase during the run
 * @param {{nginx:number, app:number}} f.coreShare  mean CPU per worker, in cores (1 = one core busy)
 * @param {{js:number, gc:number, syscall:number, native:number}} f.appShares  sample shares of the app workers
 * @param {{name:string, share:number, js:boolean}[]} f.appTop  the app workers' top symbols
 */
function decide({ queues = [], tcpDelta = {}, coreShare = {}, appShares = null, appTop = [] }) {
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
      `nginx workers at ${pct(nginx)} of a core each, app workers at ${pct(app)}`],
  };
}

function pct(x) {
  return `${(x * 100).toFixed(0)}%`;
}

module.exports = { decide, PROXY_CORE_SHARE, APP_SHARE, TRANSPORT_SHARE };
