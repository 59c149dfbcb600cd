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
//        [--set KEY=VALUE]... [--json FILE] [--instructions]
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
//
// --instructions: the same rounds counted in instructions instead of CPU time,
// which a VM's speed does not move. Each stack's app processes run under
// valgrind's callgrind (lib/stack.js appWrapper; every forked worker followed):
// a run zeroes their counters, sends the requests flat out, and dumps them; the
// user-space instructions of the primary, the workers and the spare per request
// are the figure (the kernel's side of each syscall and nginx are not counted:
// both are the same code for every scenario). The stacks warm in turns until
// each one's batches agree (warmAll). Timers tick by the wall clock and the app
// runs some 30-50x slower under callgrind, so each process's idle rate
// (instructions a second, measured after the rounds) times a run's seconds is
// taken off before dividing. Needs valgrind (apt-get install -y valgrind).

const autocannon = require('autocannon');
const cpu = require('./cpu');
const { roundOrder } = require('./stats');
const { interval, intervalText } = require('./interval');
const { SCENARIOS } = require('./scenarios');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');

const DEFAULTS = { rounds: 6, requests: 20000, rate: 2000, connections: 20, workers: 2, scenarios: ['uds', 'metrics-off', 'bare'], set: [], json: null, instructions: false };
// Under callgrind V8 reaches its optimised code only after tens of thousands of
// requests (a batch of 2,000 cost 934k instructions a request first, 124k after
// 10,000 and 65-70k after 30,000, on the example app): the warm-up goes on in
// batches of --requests until two in a row agree within WARM_AGREE, at most
// WARM_BATCHES of them.
const WARM_AGREE = 0.02;
const WARM_BATCHES = 12;
const IDLE_S = 10;
const DUMP_WAIT_MS = 30000;
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
    else if (a === '--instructions') {
      o.instructions = true;
      continue;
    }
    else if (['--rounds', '--requests', '--rate', '--connections', '--workers'].includes(a)) o[a.slice(2)] = Number(v);
    else throw new Error(`unknown option ${a}; see the head of loadtest/runner-cost.js`);
    i++;
  }
  o.specs = o.scenarios.map(scenarioSpec);
  if (o.instructions && o.specs.some((spec) => spec.dir)) throw new Error('--instructions: NAME@DIR is not supported (the stacks of another checkout start without callgrind)');
  if (o.instructions && argv.includes('--rate') && o.rate) throw new Error('--instructions sends flat out (the app runs some 30-50x slower under callgrind): drop --rate');
  if (o.instructions) o.rate = 0;
  return o;
}

/** The command an app runs under with --instructions: callgrind, writing into `dir`. */
function callgrindWrapper(dir) {
  const probe = spawnSync('valgrind', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) throw new Error('--instructions needs valgrind: apt-get install -y valgrind');
  return ['valgrind', '--tool=callgrind', '--trace-children=yes', '--smc-check=all-non-file', '--callgrind-out-file=' + path.join(dir, 'cg.%p')];
}

/** Zero (-z) or dump (-d) the callgrind counters of each pid; a pid gone is skipped. */
function callgrindControl(flag, pids) {
  for (const pid of pids) {
    try {
      execFileSync('callgrind_control', [flag, String(pid)], { stdio: 'ignore', timeout: 60000 });
    } catch { /* gone */ }
  }
}

/**
 * The instructions in the dumps written since the last call, by pid: callgrind
 * names them cg.PID.N, each with a "totals:" line. `seen` holds the files read.
 */
function newDumps(dir, seen) {
  const byPid = {};
  for (const f of fs.readdirSync(dir)) {
    const m = /^cg\.(\d+)\.\d+$/.exec(f);
    if (!m || seen.has(f)) continue;
    const t = /^totals: (\d+)/m.exec(fs.readFileSync(path.join(dir, f), 'utf8'));
    if (!t) continue; // still being written
    seen.add(f);
    byPid[m[1]] = (byPid[m[1]] || 0) + Number(t[1]);
  }
  return byPid;
}

/**
 * Instructions of `pids` while `fn` runs (zeroed before, dumped after), by pid.
 * callgrind_control can return before a process idle in a syscall has written its
 * dump: wait for one from each pid (bounded).
 */
async function counted(stack, pids, fn) {
  callgrindControl('-z', pids);
  const t0 = process.hrtime.bigint();
  const out = await fn();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  callgrindControl('-d', pids);
  const byPid = {};
  const deadline = Date.now() + DUMP_WAIT_MS;
  for (;;) {
    Object.assign(byPid, newDumps(stack.callgrindDir, stack.callgrindSeen));
    const missing = pids.filter((pid) => !(pid in byPid));
    if (!missing.length) break;
    if (Date.now() > deadline) throw new Error(`callgrind wrote no dump for ${missing.join(', ')} within ${DUMP_WAIT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { out, seconds, byPid };
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
async function startFor(spec, o) {
  const root = spec.dir || path.join(__dirname, '..');
  const stackSpec = require(path.join(root, 'loadtest', 'scenarios')).SCENARIOS[spec.name].stack;
  const { startStack } = require(path.join(root, 'lib', 'stack'));
  const callgrindDir = o.instructions ? fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-callgrind-')) : null;
  try {
    const stack = await startStack({
      ...stackSpec, workers: o.workers, set: [...(stackSpec.set || []), ...o.set, ...spec.set],
      appWrapper: callgrindDir ? callgrindWrapper(callgrindDir) : null,
    });
    if (!callgrindDir) return stack;
    const stop = stack.stop;
    return Object.assign(stack, { callgrindDir, callgrindSeen: new Set(), stop: async () => { await stop(); fs.rmSync(callgrindDir, { recursive: true, force: true }); } });
  } catch (err) {
    if (callgrindDir) fs.rmSync(callgrindDir, { recursive: true, force: true });
    throw err;
  }
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

/** The sum of a {pid: count} map. */
const sumOf = (byPid) => Object.values(byPid).reduce((a, b) => a + b, 0);

/** --instructions: one run's instructions by pid (the timers are taken off at the end: netInstructions). */
async function measureInstructions(stack, o) {
  const roles = appRoles(stack);
  const app = [...roles.primary, ...roles.workers, ...roles.other];
  const { out: res, seconds, byPid } = await counted(stack, app, () => send(stack.url, o));
  return { requests: res.requests.total, non2xx: res.non2xx, errors: res.errors + res.timeouts, seconds, byPid, roles };
}

/** A run's instructions per request by role, each pid's idle rate times the run's seconds taken off. */
function netInstructions(r, idleIrPerS) {
  const { byPid, roles, seconds, requests: n } = r;
  const app = [...roles.primary, ...roles.workers, ...roles.other];
  const net = (pids) => pids.reduce((a, pid) => a + (byPid[pid] || 0) - (idleIrPerS[pid] || 0) * seconds, 0);
  const perReq = (x) => (n ? x / n : null);
  return {
    appIrPerReq: perReq(net(app)), workersIrPerReq: perReq(net(roles.workers)),
    primaryIrPerReq: perReq(net(roles.primary)), otherIrPerReq: perReq(net(roles.other)),
    idleIrShare: (app.reduce((a, pid) => a + (idleIrPerS[pid] || 0), 0) * seconds) / app.reduce((a, pid) => a + (byPid[pid] || 0), 0),
  };
}

/**
 * Every stack warmed in turns, a batch of --requests each, until its last two
 * batches agree within WARM_AGREE (at most WARM_BATCHES): in turns, because V8
 * drops optimised code a stack left idle for minutes (measured: a warm stack's
 * first run after the others' warm-ups cost 106-150k instructions a request
 * against 75-78k in every later round).
 */
async function warmAll(stacks, o, say) {
  const warm = Object.fromEntries(Object.keys(stacks).map((s) => [s, []]));
  const done = (s) => {
    const [a, b] = warm[s].slice(-2);
    return warm[s].length >= WARM_BATCHES || (warm[s].length >= 2 && Math.abs(b / a - 1) <= WARM_AGREE);
  };
  while (Object.keys(stacks).some((s) => !done(s))) {
    // A stack already warm takes its turn too (unrecorded), so that none sits idle.
    for (const s of Object.keys(stacks)) {
      const { out, byPid } = await counted(stacks[s], stacks[s].pids().app, () => send(stacks[s].url, o));
      if (!done(s)) warm[s].push(sumOf(byPid) / out.requests.total);
    }
  }
  for (const s of Object.keys(stacks)) say(`${s}: warm after ${warm[s].length} batches of ${o.requests} (instructions a request: ${warm[s].map((x) => Math.round(x)).join(', ')})`);
}

/**
 * What each app process's timers cost a second with nothing to serve: the least
 * of two windows per stack, after the rounds (everything compiled by then).
 */
async function idleRates(stack) {
  const app = stack.pids().app;
  const idle = [];
  for (let w = 0; w < 2; w++) {
    const { byPid, seconds } = await counted(stack, app, () => new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000)));
    idle.push(Object.fromEntries(app.map((pid) => [pid, (byPid[pid] || 0) / seconds])));
  }
  return Object.fromEntries(app.map((pid) => [pid, Math.min(...idle.map((x) => x[pid]))]));
}

async function measureOne(stack, o) {
  if (o.instructions) return measureInstructions(stack, o);
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
const IR_FIELDS = ['appIrPerReq', 'workersIrPerReq'];

function summarise(rows, scenarios, { instructions = false } = {}) {
  const base = scenarios[scenarios.length - 1];
  const lines = [];
  for (const s of scenarios) {
    const mine = rows.filter((r) => r.scenario === s);
    const med = (f) => mine.map((r) => r[f]).sort((a, b) => a - b)[mine.length >> 1];
    if (instructions) {
      lines.push(`${s.padEnd(12)} app instructions/req ${Math.round(med('appIrPerReq'))}  workers ${Math.round(med('workersIrPerReq'))}  primary ${Math.round(med('primaryIrPerReq'))}  ` +
        `other ${Math.round(med('otherIrPerReq'))}  (median of ${mine.length}; the timers' share taken off ${(100 * med('idleIrShare')).toFixed(1)}%; errors ${mine.reduce((a, r) => a + r.errors + r.non2xx, 0)})`);
      continue;
    }
    lines.push(`${s.padEnd(12)} app µs/req ${med('appUsPerReq').toFixed(1)}  workers ${med('workersUsPerReq').toFixed(1)}  primary ${med('primaryUsPerReq').toFixed(2)}  ` +
      `other ${med('otherUsPerReq').toFixed(2)}  nginx ${med('nginxUsPerReq').toFixed(1)}  app wakeups/req ${med('appWakeupsPerReq').toFixed(3)}  (median of ${mine.length}; errors ${mine.reduce((a, r) => a + r.errors + r.non2xx, 0)})`);
  }
  const ratios = {};
  for (const s of scenarios.filter((x) => x !== base)) {
    for (const f of instructions ? IR_FIELDS : FIELDS) {
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
    if (o.instructions) await warmAll(stacks, o, say);
    const rows = [];
    const machine0 = cpu.machineSnapshot();
    for (let round = 0; round < o.rounds; round++) {
      for (const s of roundOrder(o.scenarios, round)) {
        const m0 = cpu.machineSnapshot();
        const r = await measureOne(stacks[s], o);
        const busy = cpu.machineBusyCores(m0, cpu.machineSnapshot());
        rows.push({ round, scenario: s, ...r, machineBusyCores: busy });
        if (o.instructions) {
          const total = sumOf(r.byPid);
          say(`round ${round + 1} ${s.padEnd(12)} app ${Math.round(total / r.requests)} instructions/req (the timers not yet taken off); ${r.requests} req in ${r.seconds.toFixed(1)} s`);
          continue;
        }
        say(`round ${round + 1} ${s.padEnd(12)} app ${r.appUsPerReq.toFixed(1)} µs/req (workers ${r.workersUsPerReq.toFixed(1)}, primary ${r.primaryUsPerReq.toFixed(2)}, ` +
          `other ${r.otherUsPerReq.toFixed(2)}), nginx ${r.nginxUsPerReq.toFixed(1)}, app wakeups/req ${r.appWakeupsPerReq.toFixed(3)}; ${r.requests} req in ${r.seconds.toFixed(1)} s, machine ${busy.toFixed(2)} cores busy`);
      }
    }
    if (o.instructions) {
      for (const s of o.scenarios) {
        const idle = await idleRates(stacks[s]);
        say(`${s}: idle ${Math.round(sumOf(idle))} instructions a second (the timers)`);
        for (const r of rows.filter((x) => x.scenario === s)) Object.assign(r, netInstructions(r, idle));
      }
    }
    const { lines, ratios } = summarise(rows, o.scenarios, { instructions: o.instructions });
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

module.exports = { parseArgs, summarise, newDumps, netInstructions };
