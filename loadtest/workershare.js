'use strict';
// Per-worker share of requests, from one of two counts:
// - runner: the runner's meter, tunekit_app_requests_total per worker pid, read
//   before and after the run (metered.js): any app, every driver;
// - body: where the runner does not count (its metrics off, a bare node:cluster,
//   a deployment given by --url), the generators count the "pid": field in
//   response bodies (autocannon: every body, a byte search, no JSON parse; pacer:
//   every body), which only an app that writes it has (the kit's example app
//   answers {"ok":true,"worker":<id>,"pid":<pid>}). wrk reads no bodies (a Lua
//   response() callback halves its speed), so there wrk results carry no share.

// Merge several { pid: count } maps into one share record.
function mergeCounts(maps, sampled) {
  const byPid = {};
  for (const m of maps) for (const [pid, n] of Object.entries(m)) byPid[pid] = (byPid[pid] || 0) + n;
  return { sampled, byPid };
}

// Compare the share with the app workers that should have served:
// { source, sampled, byPid, expected, served, missing: [pids], share: { pid: fraction } }.
// byPid lists every expected worker, 0 for one that served nothing.
function assess(workers, appWorkerPids, source) {
  if (!workers) return null;
  const expected = appWorkerPids ? appWorkerPids.map(String) : null;
  const byPid = { ...Object.fromEntries((expected || []).map((p) => [p, 0])), ...workers.byPid };
  // A worker the runner still lists with nothing counted (its spare, one that
  // left before the run) is no worker of the run.
  for (const [pid, n] of Object.entries(byPid)) if (!n && !(expected || []).includes(pid)) delete byPid[pid];
  const total = Object.values(byPid).reduce((a, b) => a + b, 0);
  const share = {};
  for (const [pid, n] of Object.entries(byPid)) share[pid] = total ? n / total : 0;
  return {
    source,
    sampled: workers.sampled,
    byPid,
    share,
    expected: expected ? expected.length : null,
    served: Object.values(byPid).filter((n) => n > 0).length,
    missing: expected ? expected.filter((p) => !byPid[p]) : [],
  };
}

module.exports = { mergeCounts, assess };
