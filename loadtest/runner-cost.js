'use strict';
// What the runner costs per request, in CPU time rather than req/s: the app
// processes' CPU (the runner's primary, its workers and its spare, or the bare
// cluster's) per request over a fixed number of requests, sent through the
// stack's nginx by autocannon at a fixed rate (or flat out with --rate 0), each
// scenario measured in turn, in an order rotated every round (stats.roundOrder),
// and the ratio runner/bare taken per round with its 95% interval over the
// rounds (interval.js). CPU time per request moves less with other load on the
// machine than req/s does (a busy neighbour slows a run, it does not make each
// request cost more cycles, but for cache and frequency effects), so this ratio
// is what can be read on a shared machine; `bench` (req/s and server µs per
// request, nginx included) is the run to quote on a quiet one.
//
//   node loadtest/runner-cost.js [--rounds 6] [--requests 20000] [--rate 2000]
//        [--connections 20] [--workers 2] [--scenarios uds,metrics-off,bare]
//        [--set KEY=VALUE]... [--json FILE]
//
// The scenarios are the bench's (scenarios.js): uds (the runner, metrics on),
// metrics-off, bare (loadtest/bare-cluster.js); the last one listed is the base
// of the ratios. A scenario may be written NAME@DIR (the stack of another
// checkout of the kit, a git worktree of an older commit say: before against
// after in the same rounds) and NAME+KEY=VALUE (a tunable set for that stack
// only; repeatable, after any @DIR). Every stack starts once and stays up. CPU
// from /proc (cpu.js: the scheduler's runtime of every thread), split into the
// serving workers, the primary and the rest (the runner's warm spare), and
// nginx beside them.

const autocannon = require('autocannon');
const cpu = require('./cpu');
const { roundOrder } = require('./stats');
const { interval, intervalText } = require('./interval');
const { SCENARIOS } = require('./scenarios');
const fs = require('node:fs');
const path = require('node:path');

const DEFAULTS = { rounds: 6, requests: 20000, rate: 2000, connections: 20, workers: 2, scenarios: ['uds', 'metrics-off', 'bare'], set: [], json: null };
// Requests sent before the first round to each stack, not counted (JIT warm-up).
const WARMUP_REQUESTS = 5000;
// A run that takes longer than this many times its planned duration is stopped.
const RUN_TIMEOUT_FACTOR = 4;

function parseArgs(argv) {
  const o = { ...DEFAULTS, set: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--scenarios') o.scenarios = v.split(',');
    else if (a === '--set') o.set.push(v);
    else if (a === '--json') o.json = v;
    else if (['--rounds', '--requests', '--rate', '--connections', '--workers'].includes(a)) o[a.slice(2)] = Number(v);
    else throw new Error(`unknown option ${a}; see the head of loadtest/runner-cost.js`);
    i++;
  }
  o.specs = o.scenarios.map(scenarioSpec);
  return o;
}

/** NAME[@DIR][+KEY=VALUE...] → { label, name, dir (null: this checkout), set }. */
function scenarioSpec(text) {
  const [head, ...set] = text.split('+');
  const [name, dir = null] = head.split('@');
  if (!SCENARIOS[name] || !SCENARIOS[name].stack) {
    throw new Error(`--scenarios: ${name} is not a scenario with a stack of its own (${Object.keys(SCENARIOS).filter((k) => SCENARIOS[k].stack).join(', ')})`);
  }
  if (set.some((kv) => !/^\w+=/.test(kv))) throw new Error(`--scenarios: ${text}: expected NAME[@DIR][+KEY=VALUE...]`);
  return { label: text, name, dir: dir && path.resolve(dir), set };
}

/** Start the stack of a scenario spec, from its checkout. */
function startFor(spec, o) {
  const root = spec.dir || path.join(__dirname, '..');
  const stackSpec = require(path.join(root, 'loadtest', 'scenarios')).SCENARIOS[spec.name].stack;
  const { startStack } = require(path.join(root, 'lib', 'stack'));
  return startStack({ ...stackSpec, workers: o.workers, set: [...(stackSpec.set || []), ...o.set, ...spec.set] });
}

/** Send `requests` through nginx at `rate` req/s (0: flat out); resolves autocannon's result. */
function send(url, { requests, rate, connections }) {
  const plannedS = rate ? requests / rate : requests / 1000;
  return new Promise((resolve, reject) => {
    const inst = autocannon({ url, connections, amount: requests, overallRate: rate || undefined, timeout: 10 }, (err, res) => (err ? reject(err) : resolve(res)));
    const guard = setTimeout(() => inst.stop(), plannedS * RUN_TIMEOUT_FACTOR * 1000 + 10_000);
    inst.on('done', () => clearTimeout(guard));
  });
}

/** The app's pids by role: the serving workers (the ready line's), the primary, the rest. */
function appRoles(stack) {
  const [primary, ...children] = stack.pids().app;
  const serving = new Set(stack.ready && stack.ready.workers ? stack.ready.workers : children);
  return { primary: [primary], workers: children.filter((p) => serving.has(p)), other: children.filter((p) => !serving.has(p)), nginx: stack.pids().nginx };
}

function cpuOf(roles) {
  const out = {};
  for (const [role, pids] of Object.entries(roles)) out[role] = cpu.snapshot(pids);
  return out;
}

/**
 * Times the main threads of `pids` went to sleep (voluntary context switches, from
 * /proc/PID/status): each is a wakeup later, and on a VM a wakeup costs about what
 * a small request does. A count, so other load on the machine hardly moves it.
 */
function sleeps(pids) {
  let n = 0;
  for (const pid of pids) {
    try {
      n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
    } catch { /* gone */ }
  }
  return n;
}

async function measureOne(stack, o) {
  const roles = appRoles(stack);
  const sleeps0 = sleeps([...roles.primary, ...roles.workers, ...roles.other]);
  const before = cpuOf(roles);
  const res = await send(stack.url, o);
  const after = cpuOf(roles);
  const slept = sleeps([...roles.primary, ...roles.workers, ...roles.other]) - sleeps0;
  const us = Object.fromEntries(Object.keys(roles).map((role) => [role, cpu.delta(before[role], after[role]).us]));
  const n = res.requests.total;
  const perReq = (x) => (n ? x / n : null);
  return {
    requests: n,
    non2xx: res.non2xx,
    errors: res.errors + res.timeouts,
    seconds: res.duration,
    appUsPerReq: perReq(us.primary + us.workers + us.other),
    workersUsPerReq: perReq(us.workers),
    primaryUsPerReq: perReq(us.primary),
    otherUsPerReq: perReq(us.other),
    nginxUsPerReq: perReq(us.nginx),
    appWakeupsPerReq: perReq(slept),
  };
}

const FIELDS = ['appUsPerReq', 'workersUsPerReq', 'nginxUsPerReq', 'appWakeupsPerReq'];

function summarise(rows, scenarios) {
  const base = scenarios[scenarios.length - 1];
  const lines = [];
  for (const s of scenarios) {
    const mine = rows.filter((r) => r.scenario === s);
    const med = (f) => mine.map((r) => r[f]).sort((a, b) => a - b)[mine.length >> 1];
    lines.push(`${s.padEnd(12)} app µs/req ${med('appUsPerReq').toFixed(1)}  workers ${med('workersUsPerReq').toFixed(1)}  primary ${med('primaryUsPerReq').toFixed(2)}  ` +
      `other ${med('otherUsPerReq').toFixed(2)}  nginx ${med('nginxUsPerReq').toFixed(1)}  app wakeups/req ${med('appWakeupsPerReq').toFixed(3)}  (median of ${mine.length}; errors ${mine.reduce((a, r) => a + r.errors + r.non2xx, 0)})`);
  }
  const ratios = {};
  for (const s of scenarios.filter((x) => x !== base)) {
    for (const f of FIELDS) {
      const per = [...new Set(rows.map((r) => r.round))].map((round) => {
        const a = rows.find((r) => r.round === round && r.scenario === s);
        const b = rows.find((r) => r.round === round && r.scenario === base);
        return a && b ? a[f] / b[f] : null;
      });
      const ci = interval(per);
      ratios[`${s}/${base} ${f}`] = { perRound: per, ci };
      lines.push(`${s}/${base} ${f}: ${intervalText(ci, 3)}  rounds ${per.map((x) => x.toFixed(3)).join(' ')}`);
    }
  }
  return { lines, ratios };
}

async function main(argv) {
  const o = parseArgs(argv);
  const stacks = {};
  const say = (m) => process.stderr.write(`${m}\n`);
  try {
    for (const spec of o.specs) {
      const s = spec.label;
      stacks[s] = await startFor(spec, o);
      say(`${s}: ${stacks[s].url} app ${stacks[s].pids().app.join(',')}`);
      await send(stacks[s].url, { ...o, requests: WARMUP_REQUESTS, rate: 0 });
    }
    const rows = [];
    const machine0 = cpu.machineSnapshot();
    for (let round = 0; round < o.rounds; round++) {
      for (const s of roundOrder(o.scenarios, round)) {
        const m0 = cpu.machineSnapshot();
        const r = await measureOne(stacks[s], o);
        const busy = cpu.machineBusyCores(m0, cpu.machineSnapshot());
        rows.push({ round, scenario: s, ...r, machineBusyCores: busy });
        say(`round ${round + 1} ${s.padEnd(12)} app ${r.appUsPerReq.toFixed(1)} µs/req (workers ${r.workersUsPerReq.toFixed(1)}, primary ${r.primaryUsPerReq.toFixed(2)}, ` +
          `other ${r.otherUsPerReq.toFixed(2)}), nginx ${r.nginxUsPerReq.toFixed(1)}, app wakeups/req ${r.appWakeupsPerReq.toFixed(3)}; ${r.requests} req in ${r.seconds.toFixed(1)} s, machine ${busy.toFixed(2)} cores busy`);
      }
    }
    const { lines, ratios } = summarise(rows, o.scenarios);
    const wholeBusy = cpu.machineBusyCores(machine0, cpu.machineSnapshot());
    process.stdout.write(`${lines.join('\n')}\nmachine: ${wholeBusy.toFixed(2)} of ${cpu.cores()} cores busy on average (everything, this run included)\n`);
    if (o.json) fs.writeFileSync(o.json, `${JSON.stringify({ options: o, rows, ratios }, null, 2)}\n`);
  } finally {
    for (const s of Object.values(stacks)) await s.stop();
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`runner-cost: ${err.message}\n`);
    process.exitCode = 1;
  });
}

module.exports = { parseArgs, summarise };
