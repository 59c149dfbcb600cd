'use strict';
// The real side of `tunekit tune`: the search of tune.js run against local stacks
// (lib/stack.js, one per candidate, on loopback), measured by the harness
// (measure.js: wrk or autocannon at saturation, or the pacer at a fixed rate), every
// candidate checked by the kit's own rules first; then the vars file and the
// report document.

const fs = require('node:fs');
const config = require('../lib/config');
const { UsageError } = require('../lib/errors');
const { measure } = require('./measure');
const { nginxTarget, loadStack } = require('./targets');
const T = require('./tune');

// Unrecorded seconds of load on a new stack before its first measured run.
const WARMUP_S = 1;
// A paced run that reached less than this share of its rate missed the objective.
const RATE_REACHED = 0.98;
// With --gzip the load asks for compression as browsers do; without it nginx
// compresses nothing for the load, so the gzip level cannot matter in it.
const GZIP_HEADER = 'Accept-Encoding: gzip';

/** The --set pairs of a candidate's values. */
const setsOf = (values) => T.KEYS.map((k) => `${k}=${values[k]}`);

/** The start values (every key of tune.KEYS): the definition, or --from FILE over it. */
function startValues(from) {
  const vars = config.resolve({ varsFiles: from ? [from] : [] });
  return Object.fromEntries(['tunekit_nginx_gzip', ...T.KEYS].map((k) => [k, vars[k]]));
}

/** The kit's refusals of a candidate: render's rule table over the resolved set (type errors too). */
function refusals(values, from) {
  try {
    const vars = config.resolve({ varsFiles: from ? [from] : [], set: setsOf(values), check: false });
    return config.checkVars(vars);
  } catch (err) {
    if (err instanceof config.ConfigError) return [err.message];
    throw err;
  }
}

/**
 * A request mix: one path per line (a path listed twice is sent twice as often), or
 * the GET requests of an access log in nginx's combined format ("GET /x HTTP/1.1").
 */
function readPaths(file, kind) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--${kind} ${file}: cannot read it (${err.code || err.message}); give a readable file`);
  }
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const paths = kind === 'paths'
    ? lines.map((l) => l.split(/\s+/)[0])
    : lines.map((l) => /"GET (\/\S*) HTTP\/[\d.]+"/.exec(l)).filter(Boolean).map((m) => m[1]);
  const bad = paths.find((p) => !p.startsWith('/'));
  if (bad) throw new UsageError(`--${kind} ${file}: "${bad}" is not a path; each line must start with / (e.g. /api/items?id=1)`);
  if (!paths.length) {
    throw new UsageError(`--${kind} ${file}: no ${kind === 'paths' ? 'path' : 'GET request line ("GET /path HTTP/1.1")'} in it; ` +
      (kind === 'paths' ? 'write one path per line' : 'give an access log in nginx\'s combined format'));
  }
  // Kept in the file's order, bounded: autocannon cycles through them per connection.
  return paths.slice(0, 10000);
}

// The run as the search sees it: the objective's value, whether it met the bound, and
// the share of the cores other processes kept busy (the harness's "other load").
function runOf(r, o) {
  const clean = r.requests.ok > 0 && r.requests.errors + r.requests.timeouts + r.requests.non2xx === 0;
  const p99Us = r.latencyUs.p99;
  const meets = o.objective === 'rps'
    ? clean && (o.p99Us == null || p99Us <= o.p99Us)
    : clean && r.achievedRate >= RATE_REACHED * o.rate;
  const value = o.objective === 'rps' ? r.reqPerSec : r.server ? r.server.cpuUsPerReq : null;
  return {
    value, p99Us, meets, achievedRate: r.achievedRate,
    otherShare: r.machine.otherCores == null ? 0 : r.machine.otherCores / r.machine.cores,
    result: {
      mode: r.mode, reqPerSec: r.reqPerSec, achievedRate: r.achievedRate, p50Us: r.latencyUs.p50, p99Us,
      cpuUsPerReq: r.server ? r.server.cpuUsPerReq : null, errors: r.requests.errors + r.requests.timeouts, non2xx: r.requests.non2xx,
      otherCores: r.machine.otherCores, cores: r.machine.cores, warnings: r.warnings,
    },
  };
}

/** The real io of tune.js: a local stack per candidate; every stack it started is stopped by closeAll(). */
function realIo(o) {
  const { startStack } = loadStack();
  const stacks = new Set();
  const drive = (target, duration) => {
    const base = { driver: o.driver, connections: o.connections, procs: o.procs, timeoutS: 10, paths: o.paths, duration,
      headers: o.gzip ? [GZIP_HEADER] : [] };
    return o.objective === 'rps' ? measure(target, { ...base, mode: 'saturation' }) : measure(target, { ...base, mode: 'paced', rate: o.rate });
  };
  return {
    now: () => Date.now(),
    progress: (line) => o.progress.note(`tune [${Math.round((Date.now() - o.t0) / 1000)}/${o.budgetS} s] ${line}`),
    check: (values) => refusals(values, o.from),
    async open(values) {
      const stack = await startStack({
        upstream: values.tunekit_upstream_kind, workers: values.tunekit_app_workers, module: o.app || null,
        set: setsOf(values), varsFiles: o.from ? [o.from] : [], port: 0,
      });
      stacks.add(stack);
      const target = nginxTarget('tune', stack, T.labelOf(values, o.start));
      await drive(target, WARMUP_S);
      return { stack, target };
    },
    async measure(arm) {
      return runOf(await drive(arm.target, o.durationS), o);
    },
    async close(arm) {
      if (!stacks.delete(arm.stack)) return;
      await arm.stack.stop();
    },
    async closeAll() {
      for (const s of [...stacks]) {
        stacks.delete(s);
        await s.stop().catch(() => {});
      }
    },
  };
}

/**
 * Run the tuner: o = { app, objective, p99Us, rate, budgetS, durationS, paths, from,
 * otherLoad, connections, procs, minRounds, maxRounds, confirmRounds, cores, progress }.
 * An app that does not start is a UsageError (one line); so is an objective no run met.
 */
async function runTune(o) {
  o.start = startValues(o.from);
  o.t0 = Date.now();
  const io = realIo(o);
  let outcome;
  try {
    outcome = await T.tune(o, io);
  } catch (err) {
    if (err.name === 'StackError') {
      const first = err.message.split('\n').filter(Boolean).slice(-1)[0] || err.message;
      if (err.message.startsWith('nginx')) {
        throw new UsageError(`the start values${o.from ? ` (--from ${o.from})` : ''}: nginx did not start with them (${first.trim()}); ` +
          `check them with tunekit render --check --out DIR${o.from ? ` --vars ${o.from}` : ''}`);
      }
      throw new UsageError(`--app ${o.app || '(the example app)'}: the app did not start behind the stack (${first.trim()}); ` +
        `run it alone to see why: tunekit run ${o.app || ''}`.trim());
    }
    throw err;
  } finally {
    await io.closeAll();
  }
  return outcome;
}

module.exports = { runTune, realIo, startValues, refusals, readPaths, setsOf, runOf, WARMUP_S, GZIP_HEADER };
