'use strict';
// The engine of `tunekit bench`: every scenario side by side in one run, A/B interleaved.
// All stacks start first, and again before every round (startAll; --keep-stacks:
// once); each round then runs every scenario once, in an order rotated and
// alternated per round (stats.roundOrder), so slow drift of a noisy machine (other
// tenants, thermal, page cache) spreads over all scenarios instead of favouring one;
// the pairs with the tightest bounds run next to uds (roundUnits).
// Per round and scenario: one saturation run (the driver flat out) and, with
// cpuRate > 0, one paced run at a fixed rate (server CPU per request when
// nobody is saturated). Figures are medians with min–max over rounds; ratios
// are taken per round (same round, neighbouring minutes) and summarised, each
// with its 95% interval over the rounds (interval.js), which the verdicts follow.
// With rounds 'auto', rounds go on until every interval is narrow enough, or the
// round cap or the time budget ends them (interval.autoStop).

const { measure } = require('./measure');
const { spread, ratio, roundOrder } = require('./stats');
const { interval, autoStop } = require('./interval');
const path = require('node:path');
const { nginxTarget, directTarget, staticTarget, loadStack } = require('./targets');
const { pinStack, ownCoreOrThrow, placeOn, placeStack } = require('./pin');
const cpu = require('./cpu');

// The bare ceiling's program (started in place of the runner; loadtest/bare-cluster.js).
const BARE_PROGRAM = path.join(__dirname, 'bare-cluster.js');

// What the runner, and its meter, may cost per request against the same stack
// without them: medians over the rounds of uds/metrics-off and uds/bare.
const COST_TARGET = { reqPerSec: { min: 0.97 }, cpuUsPerReq: { max: 1.03 } };

// Every scenario is one entry: what it measures (describe), the stack it runs
// on — its own (stack: the startStack options; started once) or another
// scenario's (on: a function of the driver) — how it is driven (target; default
// through nginx), and the scenarios it is compared with (versus: a ratio
// this/that per round; the headline scenario's ratios lead the report; targets:
// the bounds some of those ratios are held to, printed with the report).
const SCENARIOS = {
  // Stock is the stock of the nginx it runs on (ansible/profiles/stock.yml follows
  // tunekit_nginx_version): its describe names that version and what it sends.
  stock: {
    describe: 'nginx as a new user has it: TCP upstream, no upstream keep-alive, Node defaults',
    describeFor: stockDescribe,
    stack: { upstream: 'tcp', profile: 'stock' },
  },
  tcp: {
    describe: 'kit-tuned nginx → Node cluster over TCP, upstream keep-alive',
    stack: { upstream: 'tcp', profile: 'tuned' },
    versus: ['stock'],
  },
  uds: {
    describe: 'kit-tuned nginx → Node cluster over a Unix socket, upstream keep-alive',
    stack: { upstream: 'uds', profile: 'tuned' },
    versus: ['stock', 'tcp', 'direct', 'metrics-off', 'bare'],
    targets: { 'metrics-off': COST_TARGET, bare: COST_TARGET },
    headline: true,
  },
  // Stickiness (tunekit_nginx_upstream_sticky) over the per-worker sockets. Every
  // connection of the generator comes from 127.0.0.1: with the default key
  // ($remote_addr) they would all be one client on one worker. Hashing the client's
  // address and port makes each connection stand for one client, as many clients
  // from many addresses would.
  sticky: {
    describe: 'as uds, one socket per worker, each client kept on one worker (hash of address:port)',
    stack: {
      upstream: 'per-worker',
      profile: 'tuned',
      set: ['tunekit_nginx_upstream_sticky=true', 'tunekit_nginx_upstream_sticky_key=$remote_addr:$remote_port'],
    },
    versus: ['uds'],
  },
  // The runner's stacks run its metrics (on by default), and every run reads the
  // endpoint before and after (measure.js, metered.js: who served, and what the
  // meter counted); this one turns them off: `uds/metrics-off` is what the meter costs.
  'metrics-off': {
    describe: 'as uds, with the runner\'s metrics off (tunekit_metrics=false)',
    stack: { upstream: 'uds', profile: 'tuned', set: ['tunekit_metrics=false'] },
  },
  // The same nginx, socket, worker count, app module and server timeouts, served
  // by a plain node:cluster program instead of the runner: `uds/bare` is what the
  // runner costs per request (its meter, drain bookkeeping, release header).
  bare: {
    describe: 'as uds, served by a plain node:cluster program, no runner (ceiling)',
    stack: { upstream: 'uds', profile: 'tuned', set: ['tunekit_metrics=false'], appProgram: BARE_PROGRAM },
  },
  'nginx-static': {
    describe: 'nginx alone, `return 200`, same nginx.conf (ceiling)',
    on: () => 'uds',
    target: (name, stack) => staticTarget(name, stack),
  },
  // The app's UDS with autocannon, its TCP port with wrk (wrk speaks TCP only).
  direct: {
    describe: 'straight to the Node cluster, no nginx (ceiling)',
    on: (driver) => (driver === 'wrk' ? 'tcp' : 'uds'),
    target: async (name, stack, describe) => ({ target: directTarget(name, stack, describe) }),
  },
  // A vars file measured side by side with the kit's values (`bench --try FILE`):
  // `tunekit tune`'s recommendation, say. Its upstream kind and app workers are the
  // file's (lib/config stackShape), else as uds; its values go over --vars and under
  // --set, as a later -e @file would. Only with --try: not in the default list.
  try: {
    describe: 'the kit\'s values with the --try vars file over them (its upstream kind and app workers, else as uds)',
    stack: { profile: 'tuned', withTry: true },
    versus: ['uds'],
  },
  // A/A (`bench --aa`): a second stack of exactly the uds values, started on its own.
  // Nothing differs, so `aa/uds` is 1 but for noise: its interval is the smallest
  // difference this run could tell from nothing, the noise floor of every other ratio.
  // Only with --aa: not in the default list.
  aa: {
    describe: 'A/A: a second stack of the uds values, started on its own (the run\'s noise floor)',
    stack: { upstream: 'uds', profile: 'tuned' },
    optIn: true,
    versus: ['uds'],
  },
};
/**
 * The stock scenario as rendered for the nginx found: `proxy_pass http://HOST:PORT`
 * (an implicit upstream: no pool on any version, 1.30 included), with the HTTP
 * version and Connection header that version sends by default.
 */
function stockDescribe(vars) {
  const connection = vars.tunekit_nginx_proxy_connection_default === 'close' ? '"Connection: close"' : 'no Connection header';
  return `nginx ${vars.tunekit_nginx_version} as a new user has it: proxy_pass to the app's TCP port (no upstream block, so no ` +
    `upstream keep-alive on any version), HTTP/${vars.tunekit_nginx_proxy_http_version} with ${connection}, Node defaults`;
}

const DEFAULT_SCENARIOS = Object.keys(SCENARIOS).filter((name) => !(SCENARIOS[name].stack || {}).withTry && !SCENARIOS[name].optIn);
// The headline scenario's ratios first (uds/stock leads the report), then the rest in table order.
const RATIOS = Object.entries(SCENARIOS).sort(([, x], [, y]) => Boolean(y.headline) - Boolean(x.headline))
  .flatMap(([a, s]) => (s.versus || []).map((b) => [a, b, (s.targets || {})[b] || null]));

// The scenarios whose ratio to uds has the tightest bound, nearest first: each round
// runs them next to uds (roundUnits), so a VM that slows for some minutes moves both
// runs of the pair together. Measured: in a slow spell of about nine minutes, the A/A
// pair, 3 to 6 runs apart then, came out at 0.89-1.07 in five rounds (docs/benchmarks.md).
const NEAR_UDS = ['aa', 'try', 'bare', 'metrics-off'];

/**
 * The units of a round's order (stats.roundOrder): uds and those of NEAR_UDS that run
 * as one block, placed by turns right and left of uds (aa, bare at one slot, metrics-off
 * at two; with try: aa and try at one); every other scenario a unit of its own.
 */
function roundUnits(names) {
  if (!names.includes('uds')) return names;
  const block = ['uds'];
  NEAR_UDS.filter((n) => names.includes(n)).forEach((n, i) => (i % 2 ? block.unshift(n) : block.push(n)));
  return names.flatMap((n) => (n === 'uds' ? [block] : block.includes(n) ? [] : [n]));
}

/** The stack a scenario runs on: its own, or the one it borrows for this driver. */
function stackOf(name, driver) {
  const s = SCENARIOS[name];
  return s.stack ? name : s.on(driver);
}

// Which stacks the chosen scenarios need, each started once.
function stacksFor(scenarios, driver) {
  return [...new Set(scenarios.map((s) => stackOf(s, driver)))];
}

function summarise(results, scenarios) {
  return scenarios.map((name) => {
    const sat = results.filter((r) => r.scenario === name && r.mode === 'saturation');
    const paced = results.filter((r) => r.scenario === name && r.mode === 'paced');
    const s = (rs, path) => spread(rs.map((r) => path.split('.').reduce((o, k) => (o == null ? o : o[k]), r)));
    const sum = (rs, f) => rs.reduce((a, r) => a + f(r), 0);
    // The curve of the round whose req/s is the median one.
    const sorted = [...sat].sort((a, b) => a.reqPerSec - b.reqPerSec);
    const mid = sorted[sorted.length >> 1];
    return {
      scenario: name,
      describe: sat[0] ? sat[0].target.describe : SCENARIOS[name].describe,
      driver: sat[0] ? sat[0].driver : null,
      rounds: sat.length,
      reqPerSec: s(sat, 'reqPerSec'),
      latencyUs: {
        p50: s(sat, 'latencyUs.p50'), p90: s(sat, 'latencyUs.p90'), p99: s(sat, 'latencyUs.p99'),
        p999: s(sat, 'latencyUs.p999'), max: s(sat, 'latencyUs.max'),
      },
      curve: mid ? mid.latencyUs.curve : [],
      cpuUsPerReq: s(sat, 'server.cpuUsPerReq'),
      generatorMachineShare: s(sat, 'generator.machineShare'),
      otherCores: s(sat, 'machine.otherCores'),
      atRate: paced.length ? {
        driver: 'pacer',
        rate: paced[0].targetRate,
        // The curve of the round whose p99 is the median one.
        curve: [...paced].sort((a, b) => a.latencyUs.p99 - b.latencyUs.p99)[paced.length >> 1].latencyUs.curve,
        achievedRate: s(paced, 'achievedRate'),
        cpuUsPerReq: s(paced, 'server.cpuUsPerReq'),
        latencyUs: { p50: s(paced, 'latencyUs.p50'), p99: s(paced, 'latencyUs.p99'), p999: s(paced, 'latencyUs.p999') },
      } : null,
      errors: sum([...sat, ...paced], (r) => r.requests.errors + r.requests.timeouts),
      non2xx: sum([...sat, ...paced], (r) => r.requests.non2xx),
      errorLogLines: sum([...sat, ...paced], (r) => (r.errorLog ? r.errorLog.lines : 0)),
      clientBoundRounds: sat.filter((r) => r.warnings.some((w) => w.startsWith('client-bound'))).length,
    };
  });
}

// Per-round ratios a/b of req/s, CPU per request (saturation and at rate) and
// p50/p99, summarised as median (min–max) over rounds, with the per-round values
// (`perRound`) and their 95% interval (`ci`, interval.js).
function ratios(results, scenarios) {
  const out = [];
  for (const [a, b, target] of RATIOS) {
    if (!scenarios.includes(a) || !scenarios.includes(b)) continue;
    const per = (mode, path) => {
      const vals = [];
      const rounds = new Set(results.map((r) => r.round));
      for (const round of rounds) {
        const ra = results.find((r) => r.round === round && r.scenario === a && r.mode === mode);
        const rb = results.find((r) => r.round === round && r.scenario === b && r.mode === mode);
        const get = (r) => path.split('.').reduce((o, k) => (o == null ? o : o[k]), r);
        if (ra && rb) vals.push(ratio(get(ra), get(rb)));
      }
      return { ...spread(vals), perRound: vals, ci: interval(vals) };
    };
    out.push({
      name: `${a}/${b}`,
      reqPerSec: per('saturation', 'reqPerSec'),
      cpuUsPerReq: per('saturation', 'server.cpuUsPerReq'),
      cpuUsPerReqAtRate: per('paced', 'server.cpuUsPerReq'),
      p50: per('saturation', 'latencyUs.p50'),
      p99: per('saturation', 'latencyUs.p99'),
      p50AtRate: per('paced', 'latencyUs.p50'),
      p99AtRate: per('paced', 'latencyUs.p99'),
      ...(target && { target }),
    });
  }
  return out;
}

// `--rounds auto` looks at the intervals of what the targets judge: every ratio's
// req/s and server CPU per request at saturation.
function autoIntervals(rs) {
  return rs.flatMap((x) => [{ name: `${x.name} req/s`, ci: x.reqPerSec.ci }, { name: `${x.name} server µs/req`, ci: x.cpuUsPerReq.ci }]);
}

// Rounds before `--rounds auto` may stop at the width: two rounds that happen to agree
// are not yet a spread.
const AUTO_MIN_ROUNDS = 3;

// What the try scenario ran, as the report names it: the file, and the stack's shape it gave.
function tryDescribe(file, vars) {
  const n = vars.tunekit_app_workers;
  return `the kit's values with ${file} over them: ${vars.tunekit_upstream_kind} upstream, ${n} app worker${n === 1 ? '' : 's'}`;
}

// Run the whole bench. `o`: { scenarios, rounds (a number, or 'auto' with width (%),
// budgetS and maxRounds), duration, connections,
// driver, procs, cpuRate, cpuDuration, warmup, workers, set, varsFiles,
// try (the vars file of the try scenario), timeoutS, progress }.
// Start every stack the scenarios need, once (each stop pushed on cleanups);
// with --pin, its workers pinned (pin.js).
async function startStacks(o, stacks, pinned, cleanups) {
  const { startStack } = loadStack();
  for (const name of stacksFor(o.scenarios, o.driver)) {
    const { withTry, ...stack } = SCENARIOS[name].stack;
    o.progress.note(`bench: starting the ${name} stack (${stack.profile}, ${withTry ? `the values of ${o.try}` : stack.upstream})`);
    const set = [...(stack.set || []), ...o.set];
    const varsFiles = withTry ? [...o.varsFiles, o.try] : o.varsFiles;
    const started = await startStack({ ...stack, workers: o.workers, module: o.app || null, set, varsFiles, port: 0 });
    cleanups.push(() => started.stop());
    stacks[name] = started;
    if (o.pin) pinned[name] = pinStack(started.pids());
    if (o.split) placeStack(started, o.split.stacks);
  }
}

// Start every stack and target the scenarios need, and warm each up: the cleanups
// stop them. Before every round (fresh processes each round: an offset a stack
// keeps for its life becomes round-to-round noise the interval sees); with
// o.keepStacks, once.
async function startAll(o, pinned, base) {
  const stacks = {};
  const cleanups = [];
  try {
    await startStacks(o, stacks, pinned, cleanups);
    const targets = {};
    for (const name of o.scenarios) {
      const { target } = SCENARIOS[name];
      const stack = stacks[stackOf(name, o.driver)];
      const s = SCENARIOS[name];
      const describe = (s.stack || {}).withTry ? tryDescribe(o.try, stack.vars) : s.describeFor ? s.describeFor(stack.vars) : s.describe;
      if (!target) {
        targets[name] = nginxTarget(name, stack, describe);
        continue;
      }
      const made = await target(name, stack, describe);
      if (made.stop) cleanups.push(made.stop);
      targets[name] = made.target;
    }
    if (o.warmup > 0) {
      for (const name of o.scenarios) {
        o.progress.start(`warm-up ${name}`, o.warmup);
        await measure(targets[name], { ...base, mode: 'saturation', duration: o.warmup });
        o.progress.done();
      }
    }
    return { targets, cleanups };
  } catch (err) {
    await stopAll(cleanups, o.progress);
    throw err;
  }
}

async function stopAll(cleanups, progress) {
  for (const stop of cleanups.reverse()) {
    try {
      await stop();
    } catch (err) {
      progress.note(`bench: cleanup failed: ${err.message}`);
    }
  }
  cleanups.length = 0;
}

async function runBench(o) {
  const progress = o.progress;
  const t0 = Date.now();
  const auto = o.rounds === 'auto' ? { width: o.width / 100, budgetS: o.budgetS, maxRounds: o.maxRounds, minRounds: AUTO_MIN_ROUNDS } : null;
  let stopped = null;
  const pinned = {};
  const results = [];
  const base = { driver: o.driver, connections: o.connections, procs: o.procs, timeoutS: o.timeoutS, onProgress: (n, rate) => progress.update(n, rate) };
  let up = null;
  if (o.ownCore) o = { ...o, split: ownCoreOrThrow(cpu.cores()) };
  try {
    up = await startAll(o, pinned, base);
    // The generator from here on: this process, and what it starts (wrk, the pacer's clock).
    if (o.split) placeOn([process.pid], o.split.generator);
    const roundsT0 = Date.now();
    for (let round = 0; auto || round < o.rounds; round++) {
      if (auto) {
        const elapsedS = (Date.now() - t0) / 1000;
        stopped = autoStop({ ...auto, rounds: round, elapsedS, roundS: round ? (Date.now() - roundsT0) / 1000 / round : 0,
          intervals: autoIntervals(ratios(results, o.scenarios)) });
        if (stopped) break;
      }
      if (!o.keepStacks && round > 0) {
        await stopAll(up.cleanups, progress);
        up = await startAll(o, pinned, base);
      }
      const { targets } = up;
      const of = auto ? `${round + 1} (auto, at most ${auto.maxRounds})` : `${round + 1}/${o.rounds}`;
      for (const name of roundOrder(roundUnits(o.scenarios), round)) {
        progress.start(`round ${of} ${name} saturation (${o.driver})`, o.duration);
        const sat = await measure(targets[name], { ...base, mode: 'saturation', duration: o.duration });
        progress.done();
        results.push({ round: round + 1, ...sat });
        if (o.cpuRate > 0) {
          progress.start(`round ${of} ${name} at ${o.cpuRate} req/s (pacer)`, o.cpuDuration);
          const paced = await measure(targets[name], { ...base, mode: 'paced', rate: o.cpuRate, duration: o.cpuDuration });
          progress.done();
          results.push({ round: round + 1, ...paced });
        }
      }
    }
  } finally {
    if (up) await stopAll(up.cleanups, progress);
  }
  const rounds = new Set(results.map((r) => r.round)).size;
  return {
    results, rounds, summary: summarise(results, o.scenarios), ratios: ratios(results, o.scenarios),
    ...(o.pin && { pinned }),
    ...(o.split && { placement: o.split }),
    auto: stopped && { ...stopped, width: auto.width, budgetS: auto.budgetS, maxRounds: auto.maxRounds },
  };
}

module.exports = {
  stockDescribe, runBench, summarise, ratios, autoIntervals, stacksFor, roundUnits, SCENARIOS, DEFAULT_SCENARIOS, RATIOS, BARE_PROGRAM, COST_TARGET, AUTO_MIN_ROUNDS };
