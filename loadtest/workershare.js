'use strict';
// Per-worker share of requests. The example app answers
// {"ok":true,"worker":<id>,"pid":<pid>}; generators count the pids they see
// in response bodies (autocannon: every body, a byte search, no JSON parse;
// pacer: every body). wrk does not read bodies unless a Lua response()
// callback is defined, which halves its speed, so wrk results carry no share.

// Merge several { pid: count } maps into one share record.
function mergeCounts(maps, sampled) {
  const byPid = {};
  for (const m of maps) for (const [pid, n] of Object.entries(m)) byPid[pid] = (byPid[pid] || 0) + n;
  return { sampled, byPid };
}

// Compare the share with the app workers that should have served:
// { sampled, byPid, expected, served, missing: [pids], share: { pid: fraction } }.
function assess(workers, appWorkerPids) {
  if (!workers) return null;
  const total = Object.values(workers.byPid).reduce((a, b) => a + b, 0);
  const share = {};
  for (const [pid, n] of Object.entries(workers.byPid)) share[pid] = total ? n / total : 0;
  const expected = appWorkerPids ? appWorkerPids.map(String) : null;
  const missing = expected ? expected.filter((p) => !workers.byPid[p]) : [];
  return {
    sampled: workers.sampled,
    byPid: workers.byPid,
    share,
    expected: expected ? expected.length : null,
    served: Object.keys(workers.byPid).length,
    missing,
  };
}

module.exports = { mergeCounts, assess };
