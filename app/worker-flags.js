'use strict';
// The Node flags the runner starts its workers with, from the settings (app.json):
// one function, shared with the bench's bare cluster (loadtest/bare-cluster.js) so
// that both run V8 the same way. Requires nothing.

// Node's flags for the workers: the primary's own, plus, with perfMap, V8's
// perf map (/tmp/perf-PID.map) of compiled JavaScript functions, so `perf`
// (and `tunekit profile`) names JavaScript frames. Only functions, not V8's
// stubs and handlers: a smaller map, the same names for the app's code.
// See https://nodejs.org/en/learn/diagnostics/poor-performance/using-linux-perf
// With maxSemiSpaceMb, the young generation's bound (tunekit_app_max_semi_space_mb)
// in place of any the primary was started with.
// See https://nodejs.org/api/cli.html#--max-semi-space-sizesize-in-mib
// Without memoryReducer (tunekit_app_memory_reducer off), V8's memory reducer is
// off: an idle spell no longer leaves the worker's code slower for its life
// (docs/benchmarks.md, "A slow state that belongs to the app processes").
const PERF_MAP_FLAG = '--perf-basic-prof-only-functions';
const SEMI_SPACE_FLAG = '--max-semi-space-size';
const NO_MEMORY_REDUCER_FLAG = '--no-memory-reducer';

function workerExecArgv(s, own = process.execArgv) {
  const kept = own.filter((a) => a !== PERF_MAP_FLAG && a !== NO_MEMORY_REDUCER_FLAG && !(s.maxSemiSpaceMb && a.startsWith(`${SEMI_SPACE_FLAG}=`)));
  return [
    ...kept,
    ...(s.perfMap ? [PERF_MAP_FLAG] : []),
    ...(s.maxSemiSpaceMb ? [`${SEMI_SPACE_FLAG}=${s.maxSemiSpaceMb}`] : []),
    ...(s.memoryReducer === false ? [NO_MEMORY_REDUCER_FLAG] : []),
  ];
}

module.exports = { workerExecArgv };
