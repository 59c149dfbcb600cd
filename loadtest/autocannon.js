'use strict';
// The autocannon driver. One autocannon process saturates near 36k req/s
// through nginx on a 2-core machine (the client, not the server, is then the
// bottleneck), so the load is split over `procs` forked generator processes
// (autocannon-child.js), each with its own connections and histogram; the
// histograms merge exactly. autocannon's own `workers` option runs worker
// threads whose per-response events never reach the caller, so it cannot feed
// a microsecond histogram.

const path = require('node:path');
const { fork } = require('node:child_process');
const H = require('./histogram');
const { mergeCounts } = require('./workershare');

const CHILD = path.join(__dirname, 'autocannon-child.js');

// Split `total` into `parts` integers that differ by at most one.
function split(total, parts) {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

// ca: a CA file the generator trusts for https URLs (Node reads
// NODE_EXTRA_CA_CERTS at start, on top of its own roots).
function runChild(opts, onTick, ca = null) {
  return new Promise((resolve, reject) => {
    const env = ca ? { ...process.env, NODE_EXTRA_CA_CERTS: ca } : process.env;
    const child = fork(CHILD, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [], env });
    let result = null;
    // Bounded: a generator that outlives its duration by 30 s is killed.
    const guard = setTimeout(() => child.kill('SIGKILL'), (opts.duration + opts.timeoutS + 30) * 1000);
    child.on('message', (m) => {
      if (m.type === 'tick') onTick(child.pid, m.responses, m.elapsedS);
      else if (m.type === 'result') result = m;
      else if (m.type === 'error') result = new Error(`autocannon: ${m.message}`);
    });
    // 'close', not 'exit': it comes once the IPC channel is closed too, after every
    // message the generator sent (its result is the last).
    child.on('close', (code, signal) => {
      clearTimeout(guard);
      if (result instanceof Error) reject(result);
      else if (result) resolve(result);
      else reject(new Error(`autocannon generator ${child.pid} exited (${signal || code}) without a result`));
    });
    child.send({ opts });
  });
}

// Add up { kind: count } maps (an error code, 'timeout', or 'HTTP <status>').
function mergeKinds(maps) {
  const out = {};
  for (const m of maps) for (const [k, n] of Object.entries(m || {})) out[k] = (out[k] || 0) + n;
  return out;
}

// Drive `url` (or `socketPath`) for `duration` seconds with `connections`
// spread over `procs` processes; `rate` (req/s, optional) is autocannon's own
// per-second budget (-R), which sends in bursts. Returns a driver result
// (see README.md, "Result").
async function runAutocannon({ url, ca = null, socketPath = null, connections, duration, rate = 0, procs = 1, timeoutS = 10, workerShare = true, paths = null, headers = [], onProgress = () => {} }) {
  const n = Math.max(1, Math.min(procs, connections));
  const conns = split(connections, n);
  const rates = rate ? split(rate, n) : conns.map(() => 0);
  // The live rate sums each process's responses over its own elapsed time,
  // as the final rate does, once every process has reported.
  const ticks = new Map();
  const onTick = (pid, responses, elapsedS) => {
    ticks.set(pid, { responses, elapsedS });
    const all = [...ticks.values()];
    const rate = all.length === n ? all.reduce((a, x) => a + x.responses / x.elapsedS, 0) : null;
    onProgress(all.reduce((a, x) => a + x.responses, 0), rate);
  };
  const parts = await Promise.all(conns.map((c, i) => runChild({
    url, socketPath, connections: c, duration, rate: rates[i], timeoutS, workerShare, paths, headers,
  }, onTick, ca)));

  const histogram = H.merge(parts.map((p) => H.decode(p.histogram)));
  const sum = (k) => parts.reduce((a, p) => a + p[k], 0);
  const elapsedS = Math.max(...parts.map((p) => p.elapsedS));
  return {
    driver: 'autocannon',
    generator: {
      processes: n,
      cpuUs: sum('cpuUs'),
      perProcessCpuShare: parts.map((p) => p.cpuUs / 1e6 / p.elapsedS),
    },
    elapsedS,
    // Each process ran for its own elapsed time; rates add up.
    reqPerSec: parts.reduce((a, p) => a + p.responses / p.elapsedS, 0),
    requests: {
      completed: sum('responses'),
      ok: sum('ok'),
      non2xx: sum('non2xx'),
      errors: sum('errors'),
      timeouts: sum('timeouts'),
      kinds: mergeKinds(parts.map((p) => p.kinds)),
    },
    histogram,
    // A generator that stopped early because the target stopped answering
    // (autocannon-child.js): the earliest such stop.
    stalled: parts.map((p) => p.stalled).filter(Boolean).sort((a, b) => a.atS - b.atS)[0] || null,
    workers: workerShare ? mergeCounts(parts.map((p) => p.byPid), sum('sampled')) : null,
  };
}

module.exports = { runAutocannon, split, mergeKinds };
