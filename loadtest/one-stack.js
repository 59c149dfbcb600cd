'use strict';
// The engine of `tunekit loadtest`: one stack (or an existing deployment), one driver.
// Without --rate: a saturation run. With --rate R: the kit's paced run at R
// (even arrivals, latency from the intended send time) and, beside it, an
// autocannon -R R run (bursty per-second budget, latency from the actual
// send), so the two p99s can be compared in one report.

const { measure } = require('./measure');
const { stackShape } = require('../lib/config');
const { nginxTarget, remoteTarget, loadStack, probeTarget, PROBE_TIMEOUT_S } = require('./targets');

async function runLoadtest(o) {
  const progress = o.progress;
  let stack = null;
  let target;
  const results = [];
  try {
    if (o.url || o.socket) {
      target = remoteTarget({ url: o.url, socket: o.socket, errorLog: o.errorLog });
      await probeTarget(target, Math.min(PROBE_TIMEOUT_S, o.timeoutS));
    } else {
      const { startStack } = loadStack();
      const shape = stackShape({ upstream: o.upstream, workers: o.workers, profile: o.profile, varsFiles: o.varsFiles });
      progress.note(`loadtest: starting the local stack (${o.profile}, upstream ${o.upstream}, ${shape.workers} workers${o.https ? ', HTTPS' : ''})`);
      stack = await startStack({ upstream: o.upstream, profile: o.profile, workers: o.workers, module: o.app || null, set: o.set, varsFiles: o.varsFiles, port: 0, tls: Boolean(o.https) });
      target = nginxTarget(o.http2 ? `${o.upstream}-h2` : o.https ? `${o.upstream}-https` : o.upstream, stack, `nginx (${o.profile}${o.https ? ', HTTPS' : ''}) → ${stack.appListen}`);
    }
    const base = { driver: o.driver, connections: o.connections, procs: o.procs, timeoutS: o.timeoutS, duration: o.duration, onProgress: (n, rate) => progress.update(n, rate) };
    if (o.rate) {
      progress.start(`${target.name} paced at ${o.rate} req/s (pacer)`, o.duration);
      results.push(await measure(target, { ...base, mode: 'paced', rate: o.rate }));
      progress.done();
      progress.start(`${target.name} autocannon -R ${o.rate}`, o.duration);
      results.push(await measure(target, { ...base, driver: 'autocannon', mode: 'rate', rate: o.rate }));
      progress.done();
    } else {
      progress.start(`${target.name} saturation (${o.driver})`, o.duration);
      const h2 = o.http2 ? { h2loadKind: 'h2', streams: o.streams, unverifiedTls: true } : {};
      results.push(await measure(target, { ...base, ...h2, mode: 'saturation' }));
      progress.done();
    }
  } finally {
    progress.done();
    if (stack) await stack.stop();
  }
  return { results, stack: stack ? { url: stack.url, appListen: stack.appListen, renderDir: stack.renderDir } : null };
}

module.exports = { runLoadtest };
