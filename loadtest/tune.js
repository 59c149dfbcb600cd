'use strict';
// The search of `tunekit tune`: which values of the variables that matter serve this
// app best on this host, found by measurement and then proved.
//
// Method (docs/tuning.md says why): a screen, then coordinate descent over SPACE. Each
// step measures challengers that differ from the current best (the incumbent) in one
// variable, each started as a stack of its own, in the same interleaved rounds as the
// incumbent (its stack started anew for the step: incumbentArm), the order rotated per
// round (stats.roundOrder), as the bench does. A round in which other processes kept
// too many cores busy is rejected and not counted. A
// challenger replaces the incumbent only if it wins EVERY counted round by more than
// the spread (the larger of the two arms' own relative spreads over these rounds, and
// at least the machine's noise as measured so far in this run: noiseFloor), and the
// 95% interval of its per-round gains lies wholly above 1 (interval.js, the bench's
// arithmetic): a gain the rounds cannot tell from none is no win.
//   The screen: one step per variable, in SPACE order, its challengers far from the
// incumbent on the ladder (its ends and its middle: screenValues); rounds are added,
// up to maxRounds, only while a challenger's median gain is beyond the spread and
// undecided. A large difference anywhere is found before the budget is spent on
// small ones; the one-rung walk alone spent 7 minutes on the first variables and never
// reached the upstream pool, the largest difference from poor values (docs/tuning.md,
// "Measured on this machine").
//   The descent: the variables in the order of the effect the screen saw (largest
// first), the neighbours of the incumbent's value as challengers; rounds are added, up
// to maxRounds, while the answer is unclear; a challenger that won is followed further
// in its direction.
//   When the budget leaves room only for the confirmation, the search stops, and the
// winner is measured against the start values in confirmRounds rounds: it is
// recommended only if it beats them in every one beyond the spread; otherwise the
// answer is "keep what you have".
//
// Everything that touches the machine is behind `io` (tune-run.js gives the real one,
// the unit tests a deterministic fake):
//   io.check(values)           -> [refusal]  the kit's own rules (render's table)
//   io.open(values)            -> arm        a stack serving these values, warmed up
//   io.measure(arm, ctx)       -> run        { value, p99Us, achievedRate, otherShare, result }
//   io.close(arm)
//   io.now()                   -> ms
//   io.progress(line)
//
// o: { objective: 'rps'|'cpu', budgetS, durationS, minRounds, maxRounds, confirmRounds,
//      otherLoad (share of the cores other processes may keep busy before a round is
//      rejected), cores, start (the start values, every key of KEYS), vary (the SPACE
//      names to vary; null: all), connections (the load's concurrent connections: a
//      candidate whose worker_connections cannot hold them is refused, loadRefusal) }

const { spread, roundOrder } = require('./stats');
const { interval } = require('./interval');
const { UsageError } = require('../lib/errors');

// A challenger must beat the incumbent by at least this much in every round, however
// steady both were: a 2-core machine shared with anything moves a few percent.
const MIN_MARGIN = 0.03;

const GZIP_LEVEL = 'tunekit_nginx_gzip_level';

// The variables the search varies, in the order it tries them (nginx's connections
// first, see there; then the app's side: the workers decide how the cores are split
// between nginx and Node), each with the ladder of values it steps along. `keys` are the definition's variables one value sets.
const SPACE = [
  {
    // First: while nginx runs out of connections it resets clients' connections
    // (its error log: "worker_connections are not enough, reusing connections"),
    // runs miss the objective at random, and no other comparison means anything.
    name: 'tunekit_nginx_worker_connections',
    ladder: () => [64, 256, 1024, 4096, 16384],
    patch: (v) => ({ tunekit_nginx_worker_connections: v }),
    read: (s) => s.tunekit_nginx_worker_connections,
  },
  {
    name: 'tunekit_app_workers',
    ladder: (cores) => Array.from({ length: Math.max(4, 2 * cores) }, (_, i) => i + 1),
    patch: (v) => ({ tunekit_app_workers: v }),
    // 0 is one per core: its place on the ladder is the core count.
    read: (s, cores) => s.tunekit_app_workers || cores,
  },
  {
    // How the cluster shares the listener, and with it the upstream kind: one socket
    // every worker accepts from (shared), the primary handing out connections
    // (round-robin, Node's default), or one socket per worker balanced by nginx.
    name: 'tunekit_app_strategy',
    ladder: () => ['round-robin', 'shared', 'per-worker'],
    // per-worker lists one socket per worker, so the count is fixed: 0 (one per core)
    // becomes the core count it stands for.
    patch: (v, s, cores) => (v === 'per-worker'
      ? { tunekit_upstream_kind: 'per-worker', tunekit_app_strategy: 'per-worker', tunekit_app_workers: s.tunekit_app_workers || cores }
      : { tunekit_upstream_kind: s.tunekit_upstream_kind === 'per-worker' ? 'uds' : s.tunekit_upstream_kind, tunekit_app_strategy: v }),
    read: (s) => s.tunekit_app_strategy,
  },
  {
    // Not 0: the tuned upstream block writes `keepalive N;`, and nginx refuses N = 0
    // ("invalid value", measured with nginx 1.22 here) rather than turning the pool off.
    name: 'tunekit_nginx_upstream_keepalive',
    ladder: () => [1, 4, 16, 64, 256, 1024],
    patch: (v) => ({ tunekit_nginx_upstream_keepalive: v }),
    read: (s) => s.tunekit_nginx_upstream_keepalive,
  },
  {
    name: 'tunekit_nginx_worker_processes',
    ladder: (cores) => Array.from({ length: cores }, (_, i) => i + 1),
    patch: (v) => ({ tunekit_nginx_worker_processes: v }),
    // "auto" is one per core: its place on the ladder is the core count.
    read: (s, cores) => (s.tunekit_nginx_worker_processes === 'auto' ? cores : s.tunekit_nginx_worker_processes),
  },
  {
    // Only where gzip is on (tunekit_nginx_gzip); it matters only for responses at
    // least tunekit_nginx_gzip_min_length long to clients that ask for gzip: varied
    // only with --gzip, when the load asks for it (variedFor).
    name: GZIP_LEVEL,
    ladder: () => [1, 2, 4, 6, 9],
    patch: (v) => ({ tunekit_nginx_gzip_level: v }),
    read: (s) => s.tunekit_nginx_gzip_level,
    applies: (s) => s.tunekit_nginx_gzip === true,
  },
];

// What one nginx worker's worker_connections hold, for the load's rule (loadRefusal).
// Each proxied request holds two connections, the client's and the upstream one; each
// listening socket holds one in every worker; and nginx closes reusable connections (a
// client's accepted connection whose request has not arrived yet is one) while fewer
// than 1/16 are free ("Core: reusing connections in advance", nginx 1.19.2, ticket
// https://trac.nginx.org/nginx/ticket/2017). Measured with one worker and the kit's two
// listeners (node loadtest/held-requests.js): 64 held 29 at once, 128 held 59, 256 held
// 119, 512 held 239; the next were not answered, the error log saying "worker_connections
// are not enough, reusing connections" (docs/tuning.md). LISTENERS allows for more
// listeners than a plain site's two (TLS, HTTP/3, metrics).
const LISTENERS = 8;

/** How many proxied requests one nginx worker with `wc` worker_connections holds at once. */
const heldRequests = (wc, listeners = LISTENERS) => Math.max(0, Math.floor((wc - Math.floor(wc / 16) - listeners) / 2));

/** The least worker_connections that hold `connections` proxied requests on one worker. */
function connectionsNeeded(connections) {
  let wc = 2 * connections;
  while (heldRequests(wc) < connections) wc++;
  return wc;
}

/**
 * The load's own rule, beside the kit's: a candidate whose worker_connections cannot
 * hold every connection of the load on one nginx worker is refused. The kernel spreads
 * connections over the workers at random (reuseport hashes each one), so one worker may
 * get most of them: run 3 of the measurements in docs/tuning.md kept 64 from the poor
 * start, which passed every round of the search and failed 2 requests in one round of
 * the grid's comparison. A shortage that shows only sometimes cannot be measured away;
 * it is counted. null: allowed, or no load given (`connections`).
 */
function loadRefusal(values, connections) {
  const wc = values.tunekit_nginx_worker_connections;
  if (!connections || typeof wc !== 'number' || heldRequests(wc) >= connections) return null;
  return `tunekit_nginx_worker_connections=${wc} holds ${heldRequests(wc)} proxied requests at once on one nginx worker, ` +
    `fewer than the load's ${connections} connections (all may land on one worker); ${connectionsNeeded(connections)} or more hold them`;
}

/** The refusals of a candidate: the kit's rules (io.check), then the load's (loadRefusal). */
function refusalsOf(values, io, o) {
  const load = loadRefusal(values, o.connections);
  return load ? [...io.check(values), load] : io.check(values);
}

/** Every key a candidate may set: what the vars file holds. */
const KEYS = ['tunekit_app_workers', 'tunekit_upstream_kind', 'tunekit_app_strategy', 'tunekit_nginx_upstream_keepalive',
  'tunekit_nginx_worker_processes', 'tunekit_nginx_worker_connections', 'tunekit_nginx_gzip_level'];

/** The candidate's identity: its values of KEYS, in order. */
const idOf = (values) => KEYS.map((k) => `${k}=${values[k]}`).join(' ');

/** A short label: only what differs from `base`. */
function labelOf(values, base) {
  const diff = KEYS.filter((k) => values[k] !== base[k]).map((k) => `${k.replace(/^tunekit_(app_|nginx_)?/, '')}=${values[k]}`);
  return diff.length ? diff.join(' ') : 'start values';
}

/**
 * The values next to the current one on a variable's ladder, nearest first in each
 * direction: [{ value, dir }] (dir -1 below, +1 above). A value between two rungs
 * has the rungs either side as its neighbours.
 */
function neighbours(dim, current, cores) {
  const ladder = dim.ladder(cores);
  const at = ladder.indexOf(current);
  if (at >= 0) {
    return [[at - 1, -1], [at + 1, 1]].filter(([i]) => i >= 0 && i < ladder.length).map(([i, dir]) => ({ value: ladder[i], dir }));
  }
  if (typeof current !== 'number') return ladder.map((value) => ({ value, dir: 0 }));
  const below = ladder.filter((v) => v < current).pop();
  const above = ladder.find((v) => v > current);
  return [below !== undefined && { value: below, dir: -1 }, above !== undefined && { value: above, dir: 1 }].filter(Boolean);
}

/** The next value further in `dir` after `value` on the ladder, or undefined. */
function further(dim, value, dir, cores) {
  const ladder = dim.ladder(cores);
  const at = ladder.indexOf(value);
  return at < 0 || dir === 0 ? undefined : ladder[at + dir];
}

/**
 * The values the screen tries for a variable: the ends and the middle of its ladder
 * without the current value, the two farthest from it when three remain (a neighbour
 * is the descent's to try). A value between two rungs is placed between them. Only
 * the rungs `allowed` passes count (the kit's rules: with worker_connections 64 the
 * pool's ladder ends at 64, so its far end is 64, not a refused 1024).
 */
function screenValues(dim, current, cores, allowed = () => true) {
  const ladder = dim.ladder(cores).filter((v) => v === current || allowed(v));
  const found = ladder.indexOf(current);
  const at = found >= 0 ? found : typeof current === 'number' ? ladder.filter((v) => v < current).length - 0.5 : -1;
  const picks = [...new Set([0, Math.floor((ladder.length - 1) / 2), ladder.length - 1])].filter((i) => i !== at);
  if (at < 0) return picks.map((i) => ({ value: ladder[i], dir: 0 }));
  return picks.sort((a, b) => Math.abs(b - at) - Math.abs(a - at)).slice(0, 2).sort((a, b) => a - b)
    .map((i) => ({ value: ladder[i], dir: Math.sign(i - at) }));
}

/**
 * How much better the challenger's run is than the incumbent's in the same round:
 * > 1 better. A run that misses the objective's bound (p99 above --p99; paced rate
 * not reached) loses to one that meets it (0 or Infinity); between two that miss,
 * the one nearer the bound is better, so the search walks toward it.
 */
function gain(chal, inc, objective) {
  if (chal.meets && !inc.meets) return Infinity;
  if (!chal.meets && inc.meets) return 0;
  if (!chal.meets) return objective === 'rps' ? inc.p99Us / chal.p99Us : chal.achievedRate / inc.achievedRate;
  return objective === 'rps' ? chal.value / inc.value : inc.value / chal.value;
}

/** (max − min) / median of the runs' values: how much an arm moved over the rounds. */
function relSpread(runs) {
  const s = spread(runs.map((r) => r.value));
  return s.n < 2 || !s.median ? 0 : (s.max - s.min) / s.median;
}

/**
 * The verdict on one challenger from the counted rounds: per-round gains, the margin
 * they must clear (the spread), and whether it won or lost, and how (`how`):
 *   faster: it beat the incumbent in every round beyond the spread;
 *   fixes:  it met the objective in every round, the incumbent missed it in some
 *           (errors, a p99 over the bound), and where both met it was not slower
 *           beyond the spread in any round, nor beyond the machine's noise in the
 *           median (a slow challenger's own wide spread must not excuse it: one
 *           ×0.71 and ×0.81 behind with a 31% spread once won here, 4 app workers
 *           on 2 cores, only because the incumbent's resets came and went);
 *   slower: it lost every round beyond the spread;
 *   breaks: it missed the objective in some round, the incumbent never did, and it
 *           was nowhere faster beyond the spread.
 * The margin is never below `floor`: the machine's noise seen so far (noiseFloor).
 * faster and slower need the interval too: `ci`, the 95% interval of the finite
 * per-round gains (interval.js, as the bench's ratios), wholly above 1 (faster) or
 * below 1 (slower). Rounds one side missed (gain Infinity or 0) are decided by
 * feasibility and carry no speed; with fewer than two finite gains they decide alone.
 * Feasibility first: a few connection resets in one run of five seconds are rare
 * enough to be a property of the values (nginx out of worker_connections), and a
 * comparison of speeds between runs that fail at random decides nothing.
 */
function verdict(incRuns, chalRuns, objective, floor = MIN_MARGIN) {
  const gains = incRuns.map((inc, i) => gain(chalRuns[i], inc, objective));
  const margin = Math.max(floor, relSpread(incRuns), relSpread(chalRuns));
  const n = gains.length;
  const chalMissed = chalRuns.some((r) => !r.meets);
  const incMissed = incRuns.some((r) => !r.meets);
  const both = gains.filter((g, i) => incRuns[i].meets && chalRuns[i].meets);
  const finite = gains.filter(Number.isFinite);
  const ci = interval(finite);
  const clears = (side) => finite.length < 2 || (side > 0 ? ci.low > 1 : ci.high < 1);
  let how = null;
  if (n && gains.every((g) => g > 1 + margin) && clears(1)) how = 'faster';
  else if (n && !chalMissed && incMissed && both.every((g) => g > 1 - margin) &&
    (!both.length || spread(both).median >= 1 - floor)) how = 'fixes';
  else if (n && gains.every((g) => g < 1 - margin) && clears(-1)) how = 'slower';
  else if (n && chalMissed && !incMissed && both.every((g) => g < 1 + margin)) how = 'breaks';
  return {
    gains,
    gain: spread(finite),
    ci,
    margin,
    rounds: n,
    missed: { incumbent: incRuns.filter((r) => !r.meets).length, challenger: chalRuns.filter((r) => !r.meets).length },
    how,
    wins: how === 'faster' || how === 'fixes',
    loses: how === 'slower' || how === 'breaks',
  };
}

// Until a stack has started and a run has ended here, their cost is guessed: a
// stack's start (render, runner ready, nginx answering) and the few seconds around a
// run (generator processes start, CPU snapshots) on a busy 2-core machine.
const GUESS_OPEN_S = 5;
const RUN_OVERHEAD_S = 1.5;
// Passes over SPACE at most: another pass only after one moved a value.
const MAX_PASSES = 3;

// Seconds one comparison of `arms` arms over `rounds` rounds needs (opening `opens` stacks).
const cost = (st, arms, rounds, opens) => opens * st.openS + rounds * arms * st.runS;

/** The least budget for one step of the search (its first rounds) and the confirmation. */
function minimumBudgetS(o) {
  const st = { openS: GUESS_OPEN_S, runS: o.durationS + RUN_OVERHEAD_S };
  return Math.ceil(cost(st, 2, o.minRounds, 2) + cost(st, 2, o.confirmRounds, 2));
}

function newState(o, io) {
  const st = {
    t0: io.now(),
    deadline: io.now() + o.budgetS * 1000,
    openS: GUESS_OPEN_S,
    runS: o.durationS + RUN_OVERHEAD_S,
    opened: [],
    ran: [],
    trials: [],
    steps: [],
    candidates: new Map(),
    compared: new Set(),
    noise: [],
    stoppedBy: 'converged',
  };
  st.reserveS = () => cost(st, 2, o.confirmRounds, 2);
  st.fits = (seconds, reserve = true) => io.now() + (seconds + (reserve ? st.reserveS() : 0)) * 1000 <= st.deadline;
  st.atS = () => (io.now() - st.t0) / 1000;
  return st;
}

const mean = (xs) => xs.reduce((a, x) => a + x, 0) / xs.length;

// The candidate's entry in the list of everything tried; every one passed the rules
// before it was started (or is listed with the refusal and never started).
function entry(st, values, start, refusal = null) {
  const id = idOf(values);
  if (!st.candidates.has(id)) {
    st.candidates.set(id, { id, label: labelOf(values, start), values, rules: refusal ? `refused: ${refusal}` : 'passed',
      rounds: 0, rejectedRounds: 0, failed: null, firstAtS: Math.round(st.atS()) });
  }
  return st.candidates.get(id);
}

async function openArm(st, io, values, start) {
  const t = io.now();
  const arm = await io.open(values);
  st.opened.push((io.now() - t) / 1000);
  st.openS = Math.max(GUESS_OPEN_S / 2, mean(st.opened));
  return { values, arm, entry: entry(st, values, start) };
}

/**
 * The least margin a win must clear: MIN_MARGIN, or the median relative spread of the
 * arms of the steps so far (each arm's own counted rounds in one step), once there are
 * three. Two rounds are a poor estimate of one arm's spread; the search compares many
 * arms, and the more it compares, the more often noise alone lines up in every round
 * (TUNA's trap): the machine's noise, measured over the whole run, is the better floor.
 */
function noiseFloor(st) {
  if (st.noise.length < 3) return MIN_MARGIN;
  return Math.max(MIN_MARGIN, spread(st.noise).median);
}

// A challenger that won or lost every round beyond the spread needs no more rounds.
const decided = (v) => v.wins || v.loses;
// For the screen, neither does one whose median gain is within the spread: there is no
// large difference to find there, and the descent tries the values between.
const screenSettled = (v) => decided(v) || (v.gain.median != null && Math.abs(Math.log(v.gain.median)) <= v.margin);

/**
 * Interleaved rounds of arms[0] (the incumbent) against the others. A round with too
 * much other load is rejected (listed, not counted); rounds go on until every
 * challenger is settled (ctx.settled, by default: won or lost every round beyond the
 * spread) after at least minRounds, or
 * maxRounds are counted, or the budget has no room for another.
 */
async function compare(arms, st, io, o, ctx) {
  const counted = arms.map(() => []);
  const verdicts = () => arms.slice(1).map((_, i) => verdict(counted[0], counted[i + 1], o.objective, noiseFloor(st)));
  let rejected = 0;
  for (let round = 0; counted[0].length < ctx.maxRounds && rejected <= ctx.maxRounds; round++) {
    if (!st.fits(arms.length * st.runS, ctx.reserve)) {
      ctx.outOfBudget = true;
      break;
    }
    const runs = [];
    for (const i of roundOrder(arms.map((_, k) => k), round)) {
      io.progress(`${ctx.what} | round ${round + 1} (${counted[0].length} counted): ${arms[i].entry.label} | leads: ${arms[0].entry.label}`);
      const t = io.now();
      runs[i] = await io.measure(arms[i].arm, { step: ctx.step, round: round + 1, label: arms[i].entry.label });
      st.ran.push((io.now() - t) / 1000);
      st.runS = mean(st.ran.slice(-8));
    }
    const noisy = runs.some((r) => r.otherShare >= o.otherLoad);
    runs.forEach((r, i) => {
      st.trials.push({ step: ctx.step, round: round + 1, candidate: arms[i].entry.id, label: arms[i].entry.label, atS: Math.round(st.atS()),
        value: r.value, p99Us: r.p99Us, meets: r.meets, otherShare: r.otherShare, rejected: noisy, result: r.result });
      if (noisy) arms[i].entry.rejectedRounds++;
      else arms[i].entry.rounds++;
    });
    if (noisy) {
      rejected++;
      continue;
    }
    runs.forEach((r, i) => counted[i].push(r));
    if (counted[0].length >= ctx.minRounds && verdicts().every(ctx.settled || decided)) break;
  }
  for (const runs of counted) if (runs.length >= 2) st.noise.push(relSpread(runs));
  return { verdicts: verdicts(), rejected };
}

// The incumbent's stack for a step: the one started first to see that the app starts
// (st.ready, the start values', used once), else a new one. Never the stack of an
// earlier step: a stack keeps for its whole life whatever state its start drew, and one
// that drew a fast one would beat every challenger step after step (measured: a stack
// of one app worker served 67,000-75,000 req/s through a whole search, as fast as the
// grid's best, and new stacks of the same values 41,000-44,000; docs/tuning.md).
async function incumbentArm(inc, st, io, o) {
  const ready = st.ready;
  st.ready = null;
  if (ready && idOf(ready.values) === idOf(inc.values)) return ready;
  if (ready) await io.close(ready.arm);
  return openArm(st, io, inc.values, o.start);
}

// One step (`phase` 'screen' or 'descent'): the incumbent ({ values, entry }) against
// the candidates in `cands` (values differing in one variable), each on a stack started
// for this step, the incumbent's too; every one is closed when the step ends. Returns
// the challenger that won every round beyond the spread (winner()), or null.
async function step(dim, inc, cands, st, io, o, phase) {
  const arms = [await incumbentArm(inc, st, io, o)];
  try {
    return await stepOn(arms, dim, cands, st, io, o, phase);
  } finally {
    for (const a of arms) await io.close(a.arm);
  }
}

async function stepOn(arms, dim, cands, st, io, o, phase) {
  const inc = arms[0];
  for (const c of cands) {
    try {
      arms.push(await openArm(st, io, c.values, o.start));
    } catch (err) {
      entry(st, c.values, o.start).failed = err.message.split('\n')[0];
    }
  }
  const challengers = arms.slice(1);
  const n = st.steps.length + 1;
  const what = `step ${n} (${phase}) ${dim.name}: ${dim.read(inc.values, o.cores)} vs ${cands.map((c) => c.value).join(', ')}`;
  // The screen adds rounds only while a challenger's median gain is beyond the spread.
  const settled = phase === 'screen' ? screenSettled : decided;
  const { verdicts, rejected } = challengers.length
    ? await compare(arms, st, io, o, { step: n, what, minRounds: o.minRounds, maxRounds: o.maxRounds, settled, reserve: true })
    : { verdicts: [], rejected: 0 };
  challengers.forEach((a, i) => {
    cands.find((c) => c.values === a.values).verdict = verdicts[i];
  });
  const best = winner(dim, inc, challengers.map((a, i) => ({ ...a, verdict: verdicts[i] })), o.cores);
  for (const c of cands) st.compared.add(`${idOf(inc.values)}|${idOf(c.values)}`);
  st.steps.push({
    step: n, phase, variable: dim.name, atS: Math.round(st.atS()), incumbent: inc.entry.label, rejectedRounds: rejected,
    challengers: cands.map((c) => ({ value: c.value, label: entry(st, c.values, o.start).label, verdict: c.verdict || null })),
    kept: best ? best.entry.label : inc.entry.label, changed: Boolean(best),
  });
  if (!best) return null;
  const { value, dir } = cands.find((c) => c.values === best.values);
  return { values: best.values, entry: best.entry, value, dir };
}

/**
 * Of the challengers that won, the one whose worst round gained most; but if one
 * nearer the incumbent on the ladder did as well within MIN_MARGIN, that one: the
 * smaller change (a pool of 64 over one of 1024 that serves the same). The worst
 * round, not the median: of two winners, an unstable one (×1.53 and ×2.32 in its two
 * rounds) has the higher median of two rounds, a steady one (×1.82 in both) the
 * better floor, and it is the floor that holds once deployed (a pool of 16 chosen that
 * way served 0.77 of the grid's best side by side; docs/tuning.md). Within MIN_MARGIN,
 * not within the arms' spreads: with a band of the smaller spread (12.4%), a pool of 16
 * (×1.96 and ×2.47) still beat one of 1024 (×2.53 and ×2.20) as "the same", and served
 * 0.89 of it side by side; two rounds cannot tell values apart within their spread, so
 * the better floor wins unless the two are even within the least margin of any win.
 */
function winner(dim, inc, arms, cores) {
  const won = arms.filter((a) => a.verdict.wins);
  if (!won.length) return null;
  const ladder = dim.ladder(cores);
  const gainOf = (a) => (a.verdict.gain.min == null ? Infinity : a.verdict.gain.min);
  const top = won.reduce((b, a) => (gainOf(a) > gainOf(b) ? a : b));
  const from = ladder.indexOf(dim.read(inc.values, cores));
  const distance = (a) => (from < 0 ? 0 : Math.abs(ladder.indexOf(dim.read(a.values, cores)) - from));
  return won.filter((a) => gainOf(a) * (1 + MIN_MARGIN) >= gainOf(top))
    .reduce((b, a) => (distance(a) < distance(b) ? a : b));
}

/**
 * How large a difference a step saw, for the order of the descent: the largest
 * |ln gain| of its challengers' median gains; one that fixed or broke the objective
 * counts as the largest there is.
 */
function effectOf(s) {
  return Math.max(0, ...s.challengers.filter((c) => c.verdict).map((c) => (c.verdict.how === 'fixes' || c.verdict.how === 'breaks'
    ? Infinity : c.verdict.gain.median ? Math.abs(Math.log(c.verdict.gain.median)) : 0)));
}

/**
 * A value the kit's rules refuse only because of another variable (a pool of 1024
 * beside worker_connections 64) with that variable raised to the nearest rung up
 * its ladder that the rules allow: the smallest joint change, or null. Without it
 * the pool stays capped by connections that cost nothing while the pool is 1 (the
 * screen keeps 64 then), and the search never finds the two together (measured:
 * docs/tuning.md).
 */
function repaired(values, dim, io, o) {
  for (const other of SPACE) {
    if (other === dim || !varies(other, values, o.vary)) continue;
    const from = other.read(values, o.cores);
    if (typeof from !== 'number') continue;
    for (const rung of other.ladder(o.cores).filter((r) => r > from)) {
      const joint = { ...values, ...other.patch(rung, values, o.cores) };
      if (!refusalsOf(joint, io, o).length) return joint;
    }
  }
  return null;
}

// The candidates one variable's step tries: its neighbours on the ladder, those the
// kit's rules refuse tried with another variable raised where that makes them
// allowed (repaired), else listed (with the refusal) and never started, those
// already measured against this incumbent left out.
function candidates(dim, inc, st, io, o, values = null) {
  const list = values || neighbours(dim, dim.read(inc.values, o.cores), o.cores);
  const out = [];
  const seen = (v) => st.compared.has(`${idOf(inc.values)}|${idOf(v)}`) || idOf(v) === idOf(inc.values);
  for (const n of list) {
    const cand = { ...n, values: { ...inc.values, ...dim.patch(n.value, inc.values, o.cores) } };
    if (seen(cand.values)) continue;
    const refusals = refusalsOf(cand.values, io, o);
    if (refusals.length) {
      entry(st, cand.values, o.start, refusals[0]);
      st.compared.add(`${idOf(inc.values)}|${idOf(cand.values)}`);
      const joint = repaired(cand.values, dim, io, o);
      if (joint && !seen(joint)) out.push({ ...n, values: joint });
      continue;
    }
    out.push(cand);
  }
  return out;
}

// Whether the search varies this variable for these values: it applies to them, and
// --vary (null: all) names it. Asked before each variable's step: a winner may change
// what applies.
const varies = (dim, values, vary) => !(dim.applies && !dim.applies(values)) && !(vary && !vary.includes(dim.name));

// Whether a step with these candidates fits the budget: both if they fit, else the
// first alone, else none (the search is over: st.stoppedBy). Every arm's stack is
// started for the step, the incumbent's too (incumbentArm).
function fitting(cands, st, o) {
  const fit = st.fits(cost(st, cands.length + 1, o.minRounds, cands.length + 1)) ? cands : cands.slice(0, 1);
  if (st.fits(cost(st, 2, o.minRounds, 2))) return fit;
  st.stoppedBy = 'budget';
  return null;
}

// Passes of the screen at most: a second only after the first moved a value.
const SCREEN_PASSES = 2;

/**
 * The screen: one step per variable with its far values (screenValues), a winner
 * taken at once; then, if that moved a value, once more from the new values. A
 * variable screened before a later one moved was judged under values that no longer
 * hold, and the descent alone walks back from a far value one rung at a time, each
 * rung a small difference the noise can hide: from poor values (an upstream pool of
 * one) two app workers and four served alike, four was taken, and with the pool at
 * 1,024 the descent's one rung (three workers) stayed unclear, so the search ended at
 * four, 0.82 of the grid's best (docs/tuning.md, 2026-12-06). The second pass skips
 * what it has already measured against these values (a variable screened after the
 * last move). Returns the incumbent and each variable's effect (effectOf) as its
 * latest step saw it.
 */
async function screen(start, st, io, o) {
  let inc = start;
  const effects = new Map();
  for (let pass = 0; pass < SCREEN_PASSES; pass++) {
    const from = inc;
    for (const dim of SPACE) {
      if (!varies(dim, inc.values, o.vary)) continue;
      const allowed = (v) => {
        const values = { ...inc.values, ...dim.patch(v, inc.values, o.cores) };
        return !refusalsOf(values, io, o).length || Boolean(repaired(values, dim, io, o));
      };
      let cands = candidates(dim, inc, st, io, o, screenValues(dim, dim.read(inc.values, o.cores), o.cores, allowed));
      if (!cands.length) continue;
      cands = fitting(cands, st, o);
      if (!cands) return { inc, effects };
      const won = await step(dim, inc, cands, st, io, o, 'screen');
      effects.set(dim.name, effectOf(st.steps[st.steps.length - 1]));
      if (won) inc = won;
    }
    if (inc === from) break;
  }
  return { inc, effects };
}

/**
 * Coordinate descent from the screen's incumbent (`from`), the variables in the
 * order of the effect the screen saw (`effects`: largest first, SPACE order among
 * equals); returns the incumbent at the end.
 */
async function descend(from, effects, st, io, o) {
  let inc = from;
  const effect = (dim) => effects.get(dim.name) || 0;
  const order = [...SPACE].sort((a, b) => effect(b) - effect(a));
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    let moved = false;
    for (const dim of order) {
      if (!varies(dim, inc.values, o.vary)) continue;
      let cands = candidates(dim, inc, st, io, o);
      while (cands.length) {
        cands = fitting(cands, st, o);
        if (!cands) return inc;
        const won = await step(dim, inc, cands, st, io, o, 'descent');
        if (!won) break;
        inc = won;
        moved = true;
        // Follow a winner further the way it went.
        const next = further(dim, won.value, won.dir, o.cores);
        cands = next === undefined ? [] : candidates(dim, inc, st, io, o, [{ value: next, dir: won.dir }]);
      }
    }
    if (!moved) return inc;
  }
  return inc;
}

/**
 * The winner against the start values in confirmRounds counted rounds (reserved from
 * the budget), both on stacks started for it, as a deployment starts them: the search's
 * stacks are closed. Recommended only if it beat them in every one beyond the spread.
 */
async function confirm(start, best, st, io, o) {
  if (idOf(best.values) === idOf(start.values)) {
    const counted = st.trials.filter((t) => !t.rejected).length;
    const most = Math.max(0, ...st.trials.map((t) => t.otherShare));
    const why = st.trials.length && !counted
      ? `every round was rejected: other processes kept up to ${(most * 100).toFixed(0)}% of the cores busy (--other-load allows ` +
        `${(o.otherLoad * 100).toFixed(0)}%), so nothing could be compared; run it on a quiet machine`
      : 'no candidate beat the start values in every round of the search beyond the spread';
    return { rounds: 0, verdict: null, recommend: false, why };
  }
  const what = `confirmation: ${best.entry.label} vs the start values`;
  const ctx = { step: 'confirmation', what, minRounds: o.confirmRounds, maxRounds: o.confirmRounds, reserve: false };
  const arms = [];
  let result;
  try {
    arms.push(await incumbentArm(start, st, io, o));
    arms.push(await openArm(st, io, best.values, o.start));
    result = await compare(arms, st, io, o, ctx);
  } finally {
    for (const a of arms) await io.close(a.arm);
  }
  const { verdicts, rejected } = result;
  const v = verdicts[0];
  const recommend = v.rounds === o.confirmRounds && v.wins;
  let why = null;
  if (!recommend) {
    why = v.rounds < o.confirmRounds
      ? `only ${v.rounds} of ${o.confirmRounds} confirmation rounds fitted in the budget or passed the other-load check (${rejected} rejected)`
      : `it did not beat the start values in every confirmation round by more than the spread (${(v.margin * 100).toFixed(1)}%), ` +
        `nor meet the objective in every round where they missed it without being slower`;
  }
  return { rounds: v.rounds, rejected, verdict: v, recommend, why };
}

/**
 * Search, then confirm. Returns everything the report and the vars file need; closes
 * every stack it opened, also on failure. Throws what io.open throws for the start
 * values (an app that does not start is the caller's error to report).
 */
async function tune(o, io) {
  const st = newState(o, io);
  // Started first, to see that the app starts with the start values; the first step
  // measures on it (incumbentArm).
  st.ready = await openArm(st, io, o.start, o.start);
  const start = { values: st.ready.values, entry: st.ready.entry };
  try {
    const screened = await screen(start, st, io, o);
    const best = st.stoppedBy === 'budget' ? screened.inc : await descend(screened.inc, screened.effects, st, io, o);
    const confirmation = await confirm(start, best, st, io, o);
    const chosen = confirmation.recommend ? best : start;
    return {
      objective: o.objective,
      start: o.start,
      best: { values: best.values, label: best.entry.label },
      recommended: chosen.values,
      recommend: confirmation.recommend,
      confirmation,
      steps: st.steps,
      trials: st.trials,
      candidates: [...st.candidates.values()],
      stoppedBy: st.stoppedBy,
      elapsedS: st.atS(),
      openS: st.openS,
      // The bound was met by no run of any candidate (rejected rounds included).
      unmet: !st.trials.some((t) => t.meets),
    };
  } finally {
    if (st.ready) await io.close(st.ready.arm);
  }
}

/**
 * Every combination of the ladders' values (the variables that apply to `start`),
 * over the start values: what an exhaustive grid over the same values measures
 * (tune-grid.js). Refusals are the caller's (the kit's rules).
 */
function grid(start, cores, vary = null) {
  let points = [start];
  for (const dim of SPACE) {
    if (!varies(dim, start, vary)) continue;
    points = points.flatMap((p) => dim.ladder(cores).map((v) => ({ ...p, ...dim.patch(v, p, cores) })));
  }
  return [...new Map(points.map((p) => [idOf(p), p])).values()];
}

/**
 * The variables a search varies: --vary's (null: all of SPACE), without the gzip level
 * unless the load asks for gzip (--gzip): without it nginx compresses nothing for the
 * load, so a step over the level would measure noise only. Used by `tune` and the grid.
 */
function variedFor(vary, gzip) {
  if (vary && vary.includes(GZIP_LEVEL) && !gzip) {
    throw new UsageError(`--vary ${GZIP_LEVEL} without --gzip: the load would not ask for compression, so nginx compresses nothing and the level cannot matter; add --gzip`);
  }
  return gzip ? vary : (vary || SPACE.map((d) => d.name)).filter((n) => n !== GZIP_LEVEL);
}

module.exports = {
  grid, variedFor, GZIP_LEVEL, SPACE, KEYS, MIN_MARGIN, GUESS_OPEN_S, RUN_OVERHEAD_S,
  idOf, labelOf, neighbours, further, screenValues, gain, verdict, relSpread, minimumBudgetS, tune, winner,
  heldRequests, connectionsNeeded, loadRefusal, refusalsOf,
};
