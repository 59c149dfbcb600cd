'use strict';
// `tunekit profile`'s measuring part: given the pids of nginx's and the app's
// workers and (optionally) a load to drive through nginx, it runs bounded
// phases, one tool at a time so that no tool's cost lands in another's figures:
//
//   warm-up      the load, not counted (JIT, upstream connections)
//   baseline     the load alone: req/s without any tracer
//   perf record  cpu-clock samples with call stacks of every worker; queues
//                (ss -l) and TCP counters (/proc/net/netstat) sampled meanwhile
//   perf trace   `perf trace -s`: syscall counts and wall time per thread
//   strace       `strace -c -f -w` (loadtest/syscalls.js's counter)
//
// A phase's load starts once its tracer is attached (strace: every target's
// TracerPid is set; perf: its output file exists, plus SETTLE_MS) and the
// tracer is stopped with SIGINT when the load ends. Each tracer is also bounded
// by itself (`perf … -- sleep S`, S a little over the phase) and killed by pid
// if it outlives that. The syscall table comes from
// the tracer that slowed the load down least (the slowdowns are in the result).

const fs = require('node:fs');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { UsageError } = require('../lib/errors');
const { parseStraceC, attach } = require('../loadtest/syscalls');
const P = require('./parse');
const cpu = require('../loadtest/cpu');

// The syscalls the table shows (the socket path of a request), in this order.
const SYSCALLS = ['epoll_wait', 'epoll_pwait', 'accept4', 'read', 'write', 'readv', 'writev', 'recvfrom', 'sendto', 'recvmsg', 'sendmsg', 'close'];
const SAMPLE_HZ = 999;
const QUEUE_POLL_MS = 50;
// A tracer still running this long after its phase is killed.
const STOP_GRACE_MS = 10000;
// perf has opened its events shortly after creating its output file; waiting
// this long after that keeps the start of the load inside the traced window.
const SETTLE_MS = 1000;
// The longest a tracer may take to attach before the profile gives up.
const ATTACH_TIMEOUT_MS = 20000;

// What the operator must fix (a missing tool, a pid that is not the kit's):
// one line from the CLI, exit 2.
class ProfileError extends UsageError {}

// The tools, overridable for hosts where they live elsewhere (and for tests).
function tools(env = process.env) {
  return { perf: env.TUNEKIT_PERF || 'perf', strace: env.TUNEKIT_STRACE || 'strace' };
}

const INSTALL = { perf: 'apt-get install -y linux-perf', strace: 'apt-get install -y strace' };

function which(bin) {
  if (bin.includes('/')) return fs.existsSync(bin) ? bin : null;
  for (const dir of (process.env.PATH || '').split(':')) {
    const f = path.join(dir || '.', bin);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch { /* next */ }
  }
  return null;
}

// Refuse to start without perf or strace, naming the install command.
function requireTools(t = tools()) {
  for (const [name, bin] of Object.entries(t)) {
    if (!which(bin)) throw new ProfileError(`${name} not found (${bin}); install it with: ${INSTALL[name]}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(test, what) {
  const end = Date.now() + ATTACH_TIMEOUT_MS;
  while (!test()) {
    if (Date.now() > end) throw new Error(`${what} did not attach within ${ATTACH_TIMEOUT_MS / 1000} s`);
    await sleep(50);
  }
}

function tracerPid(pid) {
  try {
    return Number(/^TracerPid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  } catch {
    return 0;
  }
}

// Start `perf <args> -o out -p pids -- sleep S` (S = the phase plus the
// attach allowance: it ends by itself); remember it; ready once attached,
// stop() sends SIGINT and resolves when it has exited.
function perfTracer(bin, args, out, pids, duration, children) {
  const bound = duration + (SETTLE_MS + ATTACH_TIMEOUT_MS) / 1000;
  // perf and its `sleep` form a process group of their own, signalled as one:
  // perf trace leaves its workload running when it is interrupted, and that
  // sleep holds perf's stderr open, so waiting for perf's output to close would
  // wait out the whole bound (20 s of a 1 s phase).
  const child = spawn(bin, [...args, '-o', out, '-p', pids.join(','), '--', 'sleep', String(bound)], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  children.add(child);
  const signal = (sig) => {
    try { process.kill(-child.pid, sig); } catch { /* the group is gone */ }
  };
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => signal('SIGKILL'), bound * 1000 + STOP_GRACE_MS);
  let exited = false;
  const closed = new Promise((resolve) => {
    child.on('error', (err) => { stderr += err.message; });
    child.on('close', (code, sig) => {
      exited = true;
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, sig, stderr });
    });
  });
  return {
    ready: until(() => exited || fs.existsSync(out), `perf ${args[0]}`).then(() => sleep(SETTLE_MS)),
    stop: () => {
      if (!exited) signal('SIGINT');
      return closed;
    },
  };
}

// strace -c -f -w on each group (loadtest/syscalls.js); ready once every target
// shows a tracer; stop() detaches and resolves to the parsed tables per group.
function straceTracer(bin, groups, dir, children) {
  const files = Object.fromEntries(Object.keys(groups).filter((g) => groups[g].length).map((g) => [g, path.join(dir, `strace-${g}`)]));
  const tracers = Object.entries(files).map(([g, f]) => {
    const a = attach(groups[g], f, { wall: true, bin });
    children.add(a.child);
    return a;
  });
  const pids = Object.values(groups).flat();
  return {
    ready: until(() => pids.every((p) => tracerPid(p) !== 0 || !fs.existsSync(`/proc/${p}`)), 'strace'),
    stop: async () => {
      for (const a of tracers) {
        await a.stop();
        children.delete(a.child);
      }
      return Object.fromEntries(Object.keys(groups).map((g) => [g, files[g] && fs.existsSync(files[g]) ? parseStraceC(fs.readFileSync(files[g], 'utf8')) : []]));
    },
  };
}

function tids(pids) {
  const map = new Map();
  for (const pid of pids) {
    let list = [];
    try {
      list = fs.readdirSync(`/proc/${pid}/task`).map(Number);
    } catch { /* gone */ }
    for (const t of list) map.set(t, pid);
  }
  return map;
}

function sh(cmd, args) {
  return new Promise((resolve) => execFile(cmd, args, { encoding: 'utf8' }, (err, out) => resolve(err ? '' : out)));
}

// Poll `ss -l` for the listeners in `watch` (their "Local Address:Port" as ss
// prints it) until stop(); keeps the largest Recv-Q seen per listener.
function watchQueues(watch) {
  const seen = new Map();
  let running = true;
  const loop = (async () => {
    while (running) {
      const text = (await sh('ss', ['-lxn'])) + (await sh('ss', ['-ltn'])).split('\n').slice(1).join('\n');
      for (const q of P.parseSsListen(text)) {
        if (!watch.includes(q.local)) continue;
        const s = seen.get(q.local) || { local: q.local, recvQ: 0, sendQ: q.sendQ, maxRecvQ: 0, polls: 0 };
        s.recvQ = q.recvQ;
        s.sendQ = q.sendQ;
        s.maxRecvQ = Math.max(s.maxRecvQ, q.recvQ);
        s.polls++;
        seen.set(q.local, s);
      }
      await new Promise((r) => setTimeout(r, QUEUE_POLL_MS));
    }
  })();
  return async () => {
    running = false;
    await loop;
    return [...seen.values()];
  };
}

function tcpCounters() {
  try {
    const t = P.parseNetstat(fs.readFileSync('/proc/net/netstat', 'utf8')).TcpExt || {};
    return { ListenOverflows: t.ListenOverflows || 0, ListenDrops: t.ListenDrops || 0 };
  } catch {
    return { ListenOverflows: 0, ListenDrops: 0 };
  }
}

// Rows of one group -> the table: per syscall calls, calls per request (or per
// second without a load), the calls that failed (an accept4 or a read that
// found nothing: EAGAIN), share of the group's syscall time, µs per call. The
// failed ones matter for accept4: each of a worker's listening descriptors
// tries a new connection and all but one fail, so its calls count the
// descriptors' wake-ups and its calls less its failures the new connections.
function table(rows, { requests, seconds }) {
  const total = rows.reduce((a, r) => a + r.seconds, 0);
  const by = new Map();
  for (const r of rows) {
    const x = by.get(r.name) || { name: r.name, calls: 0, errors: 0, seconds: 0 };
    x.calls += r.calls;
    x.errors += r.errors;
    x.seconds += r.seconds;
    by.set(r.name, x);
  }
  const per = requests ? requests : seconds;
  return {
    per: requests ? 'request' : 'second',
    totalCalls: [...by.values()].reduce((a, r) => a + r.calls, 0),
    perUnit: [...by.values()].reduce((a, r) => a + r.calls, 0) / per,
    rows: SYSCALLS.filter((n) => by.has(n)).map((n) => {
      const r = by.get(n);
      return { name: n, calls: r.calls, perUnit: r.calls / per, errors: r.errors, errorsPerUnit: r.errors / per, timeShare: total ? r.seconds / total : 0, usPerCall: r.calls ? (r.seconds * 1e6) / r.calls : 0 };
    }),
  };
}

/**
 * @param {object} o
 * @param {{nginx:number[], app:number[]}} o.groups  worker pids per process group
 * @param {number} o.duration                         seconds per phase
 * @param {(phase:string)=>Promise<{reqPerSec:number, requests:number, coreShare?:object}>} [o.load]
 * @param {string[]} [o.watch]                        listeners to read queues of (ss "Local Address:Port")
 * @param {string} o.dir                              where perf's files go
 */
async function profile({ groups, duration, load = null, watch = [], dir, tools: t = tools() }) {
  requireTools(t);
  const children = new Set();
  const all = [...groups.nginx, ...groups.app];
  const group = (pid) => (groups.app.includes(pid) ? 'app' : groups.nginx.includes(pid) ? 'nginx' : null);
  const phase = async (name, start) => {
    const tracer = start ? start() : null;
    if (tracer) await tracer.ready;
    const cpu0 = cpu.snapshot(all);
    const t0 = process.hrtime.bigint();
    const l = load ? await load(name) : await sleep(duration * 1000).then(() => null);
    const traced = tracer ? await tracer.stop() : null;
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu1 = cpu.snapshot(all);
    // Mean CPU per worker of each group, in cores.
    const cores = Object.fromEntries(['nginx', 'app'].map((g) => {
      const ids = new Set(groups[g]);
      const pick = (m) => new Map([...m].filter(([p]) => ids.has(p)));
      return [g, groups[g].length ? cpu.delta(pick(cpu0), pick(cpu1)).us / 1e6 / s / groups[g].length : 0];
    }));
    return { load: l, traced, cores };
  };
  const out = { duration, phases: {}, warnings: [] };
  try {
    if (load) {
      // Not counted: V8 compiles the hot paths and nginx opens its upstream
      // connections here, or the first measured phase would be the slowest.
      await load('warm-up');
      const b = await phase('baseline');
      out.phases.baseline = b.load;
      out.coreShare = b.cores;
    }

    // perf record, with queues and TCP counters.
    const data = path.join(dir, 'perf.data');
    const stopQueues = watchQueues(watch);
    const tcp0 = tcpCounters();
    const rec = await phase('perf record', () => perfTracer(t.perf, ['record', '-q', '-e', 'cpu-clock', '-F', String(SAMPLE_HZ), '-g'], data, all, duration, children));
    const tcp1 = tcpCounters();
    out.queues = await stopQueues();
    out.tcpDelta = { ListenOverflows: tcp1.ListenOverflows - tcp0.ListenOverflows, ListenDrops: tcp1.ListenDrops - tcp0.ListenDrops };
    out.phases.perfRecord = rec.load;
    if (!out.coreShare) out.coreShare = rec.cores;
    if (!fs.existsSync(data)) throw new Error(`perf record wrote no samples: ${rec.traced.stderr.trim()}`);
    const text = await scriptText(t.perf, data);
    out.folded = {};
    out.top = {};
    out.shares = {};
    // The stacks themselves (for the flame graph) stay out of the JSON.
    Object.defineProperty(out, 'stacks', { value: {}, enumerable: false });
    for (const g of ['app', 'nginx']) {
      const f = P.foldPerfScript(text, { keep: (pid) => group(pid) === g, group: (comm) => `${g} (${comm})` });
      out.folded[g] = f.samples;
      out.stacks[g] = f.stacks;
      out.top[g] = P.topSymbols(f.stacks);
      out.shares[g] = P.shares(f.stacks);
    }

    // Syscalls: perf trace -s, then strace -c -f -w.
    const tidMap = tids(all);
    const trOut = path.join(dir, 'perf-trace.txt');
    const tr = await phase('perf trace', () => perfTracer(t.perf, ['trace', '-s'], trOut, all, duration, children));
    const trThreads = fs.existsSync(trOut) ? P.parsePerfTraceSummary(fs.readFileSync(trOut, 'utf8')) : [];
    const st = await phase('strace', () => straceTracer(t.strace, { nginx: groups.nginx, app: groups.app }, dir, children));

    const unit = (l) => ({ requests: l ? l.requests : 0, seconds: duration });
    const perfRows = { nginx: [], app: [] };
    for (const th of trThreads) {
      const g = group(tidMap.get(th.tid));
      if (g) perfRows[g].push(...th.rows);
    }
    out.syscalls = {
      'perf trace': { nginx: table(perfRows.nginx, unit(tr.load)), app: table(perfRows.app, unit(tr.load)) },
      strace: { nginx: table(st.traced.nginx, unit(st.load)), app: table(st.traced.app, unit(st.load)) },
    };
    chooseTracer(out, { load, rec, tr, st, summarised: trThreads.length > 0 });
    return out;
  } finally {
    for (const c of children) {
      // perf's group (with its sleep), or the strace child alone.
      try { process.kill(-c.pid, 'SIGKILL'); } catch { c.kill('SIGKILL'); }
    }
  }
}

// The slowdown each tracer caused (req/s under it / req/s at baseline), and
// whose syscall table the report shows: the tracer that slowed the load least,
// strace when perf trace gave no summary.
function chooseTracer(out, { load, rec, tr, st, summarised }) {
  if (load) {
    const base = out.phases.baseline.reqPerSec;
    out.phases.perfTrace = tr.load;
    out.phases.strace = st.load;
    out.slowdown = {
      'perf record': base ? rec.load.reqPerSec / base : null,
      'perf trace': base ? tr.load.reqPerSec / base : null,
      strace: base ? st.load.reqPerSec / base : null,
    };
    out.tracer = out.slowdown['perf trace'] >= out.slowdown.strace ? 'perf trace' : 'strace';
  } else {
    out.tracer = 'perf trace';
  }
  if (!summarised) {
    out.tracer = 'strace';
    out.warnings.push(`perf trace gave no summary (${tr.traced.stderr.trim().split('\n').pop() || 'no output'}); the table is strace's`);
  }
}

function scriptText(perf, data) {
  return new Promise((resolve, reject) => {
    execFile(perf, ['script', '-i', data, '-F', 'comm,pid,tid,time,event,ip,sym,dso'], { encoding: 'utf8', maxBuffer: 512 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && !stdout) reject(new Error(`perf script failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

module.exports = { profile, requireTools, tools, table, ProfileError, SYSCALLS, INSTALL };
