'use strict';
// The shipped alerts (metrics/tunekit.rules.yml) on the faults this suite makes,
// through the parts a host runs: a real Prometheus (Debian's) scraping mtail over
// nginx's logs (metrics/nginx.mtail), Debian's node_exporter reading the queue
// sampler's textfile (metrics/queue-sampler.js: doctor's evaluation of every rule), prometheus-nginx-exporter on the
// stub_status listener and the runner's own endpoint, job names as
// docs/observability.md sets them up. Each case has a fresh stack, exporters and
// Prometheus (a fresh TSDB: one fault's counters never linger in the next one's
// windows). Each fault's expected alert must fire and no other; a healthy stack
// under the same kind of load fires none.
//
// What the test changes in the shipped file: every alert's `for:` becomes 0, so
// an alert fires on the first evaluation whose expression holds (the `for:` holds
// are covered by `promtool test rules`, metrics/tests/alerts.test.yml). The
// expressions, windows ([5m], [10m]) and thresholds are the shipped ones: the
// TSDB starts empty, so a window holds only this case's samples.
//
// Not here: node_exporter's netstat collector (ListenOverflows, the TCP half of
// TunekitAcceptQueueOverflow). That counter is the whole host's, and other tests
// on a shared machine overflow TCP queues on purpose; the promtool tests cover it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');
const YAML = require('yaml');
const { startStack } = require('../../lib/stack');
const { nginxBinary } = require('../../lib/nginx');
const { freePorts, alive, signal } = require('../../lib/proc');
const { startPrometheus } = require('../lib/prometheus');
const { until } = require('../lib/util');
const { stopAfter, startHashStack, nofileLowering, loadedChildren, doctor } = require('./stack');
const queueWait = require('../lib/queue-wait');
const { raceByHand } = require('../lib/race-by-hand');

const ROOT = path.resolve(__dirname, '../..');
const RULES = path.join(ROOT, 'metrics/tunekit.rules.yml');
const SAMPLER = path.join(ROOT, 'metrics/queue-sampler.js');
const MTAIL_PROG = path.join(ROOT, 'metrics/nginx.mtail');
const FIRE_WITHIN_MS = 60_000; // bound on the wait for an alert (and on each fault's load)
const QUIET_EVALUATIONS = 3; // rule-group evaluations that must pass, after the load was scraped, with nothing firing

/** The shipped rules with every alert's `for:` dropped (fires on the first evaluation that holds). */
function rulesWithoutHold(dir) {
  const doc = YAML.parse(fs.readFileSync(RULES, 'utf8'));
  for (const g of doc.groups) for (const r of g.rules) if (r.alert) delete r.for;
  const file = path.join(dir, 'tunekit.rules.yml');
  fs.writeFileSync(file, YAML.stringify(doc));
  return file;
}

// The stop functions of the helpers whose output is in a dir: the dir is
// removed only once they are stopped (t.after hooks run in the order they were
// added, so the dir's own hook, added first, stops them before it removes it; a
// sampler still writing into it made the removal fail with ENOTEMPTY).
const daemonsIn = new Map();

/** Spawn a long-running helper, its output in dir/NAME.log, killed by its pid in t.after. */
function daemon(t, dir, name, cmd, args) {
  const log = path.join(dir, `${name}.log`);
  const out = fs.openSync(log, 'a');
  const child = spawn(cmd, args, { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    signal(child.pid, 'SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000).unref())]);
    if (alive(child.pid)) signal(child.pid, 'SIGKILL');
  };
  if (!daemonsIn.has(dir)) daemonsIn.set(dir, []);
  daemonsIn.get(dir).push(stop);
  t.after(stop);
  return { child, log };
}

/** A scratch dir for helpers' files, removed after the helpers in it are stopped. */
function scratchDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(async () => {
    await Promise.all((daemonsIn.get(dir) || []).map((stop) => stop()));
    daemonsIn.delete(dir);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/**
 * mtail on the stack's two nginx logs, the queue sampler into a textfile directory
 * read by node_exporter (textfile collector only), the nginx exporter on
 * stub_status, and Prometheus with the rules over all of them and the runner.
 */
async function observe(t, stack) {
  const dir = scratchDir(t, 'tunekit-alerts-');
  const progs = path.join(dir, 'progs');
  const textfiles = path.join(dir, 'textfile');
  fs.mkdirSync(progs);
  fs.mkdirSync(textfiles);
  fs.copyFileSync(MTAIL_PROG, path.join(progs, 'nginx.mtail'));
  const [mtailPort, nodePort, nginxExpPort] = await freePorts(3);
  const v = stack.vars;
  daemon(t, dir, 'mtail', '/usr/bin/mtail', ['-progs', progs, '-logs', `${stack.errorLogPath},${stack.accessLogPath}`,
    '-address', '127.0.0.1', '-port', String(mtailPort), '-logtostderr', '-poll_interval', '250ms']);
  daemon(t, dir, 'sampler', process.execPath, [SAMPLER, '--textfile-dir', textfiles, '--unix', stack.socketPath,
    '--tcp', `127.0.0.1:${stack.port}`, '--app-config', v.tunekit_app_config_path,
    '--nginx-conf', path.join(stack.renderDir, 'etc/nginx/nginx.conf'), '--nginx-bin', nginxBinary(), '--interval-s', '1']);
  daemon(t, dir, 'node_exporter', '/usr/bin/prometheus-node-exporter', ['--collector.disable-defaults', '--collector.textfile',
    `--collector.textfile.directory=${textfiles}`, `--web.listen-address=127.0.0.1:${nodePort}`]);
  daemon(t, dir, 'nginx_exporter', '/usr/bin/prometheus-nginx-exporter',
    ['-nginx.scrape-uri', `http://127.0.0.1:${v.tunekit_nginx_status_port}${v.tunekit_nginx_status_path}`,
      '-web.listen-address', `127.0.0.1:${nginxExpPort}`]);
  const jobs = {
    tunekit_app: [new URL(stack.metrics[0].url).host],
    nginx: [`127.0.0.1:${nginxExpPort}`],
    mtail: [`127.0.0.1:${mtailPort}`],
    node: [`127.0.0.1:${nodePort}`],
  };
  const prom = await startPrometheus(t, { jobs, rules: [rulesWithoutHold(dir)] });
  // Every source answers, the sampler's file is read and nginx's stub_status is up.
  const since = Date.now();
  for (const job of Object.keys(jobs)) await prom.scrapedAfter(job, since, FIRE_WITHIN_MS);
  await until('the sampler\'s tunekit_rule_broken and nginx_up = 1 in Prometheus', async () => (
    (await prom.query('tunekit_rule_broken')).length > 0 && (await prom.query('nginx_up == 1')).length === 1), FIRE_WITHIN_MS, 250);
  return { prom, dir };
}

/** The alert names Prometheus has pending or firing now. */
async function active(prom) {
  return (await prom.api('/api/v1/alerts')).alerts.map((a) => a.labels.alertname);
}

/** The latest lastEvaluation of the rule group (ms since the epoch). */
async function lastEvaluation(prom) {
  const groups = (await prom.api('/api/v1/rules')).groups;
  return Math.max(...groups.map((g) => Date.parse(g.lastEvaluation)));
}

/**
 * Runs `round()` (one bounded piece of load) again and again until every alert of
 * `expected` fires (or FIRE_WITHIN_MS); then QUIET_EVALUATIONS more evaluations.
 * Returns the seconds to firing and every alert seen active on the way.
 */
async function untilFiring(prom, expected, round) {
  const seen = new Set();
  const started = Date.now();
  let firedAt = null;
  while (!firedAt && Date.now() - started < FIRE_WITHIN_MS) {
    if (round) await round();
    for (const name of await active(prom)) seen.add(name);
    if (expected.every((n) => seen.has(n))) firedAt = Date.now();
    else if (!round) await new Promise((r) => setTimeout(r, 250));
  }
  assert.ok(firedAt, `within ${FIRE_WITHIN_MS / 1000} s ${expected.join(', ')} fired (seen: ${[...seen].join(', ') || 'none'})`);
  await evaluationsAfter(prom, Date.now(), seen);
  return { seconds: (firedAt - started) / 1000, seen: [...seen].sort() };
}

/** Waits until the rule group was evaluated QUIET_EVALUATIONS times after `sinceMs`, noting the active alerts. */
async function evaluationsAfter(prom, sinceMs, seen) {
  const evaluations = new Set();
  await until(`${QUIET_EVALUATIONS} rule evaluations after ${new Date(sinceMs).toISOString()}`, async () => {
    const at = await lastEvaluation(prom);
    if (at >= sinceMs) evaluations.add(at);
    for (const name of await active(prom)) seen.add(name);
    return evaluations.size >= QUIET_EVALUATIONS;
  }, FIRE_WITHIN_MS, 200);
}

/** n GETs of url at once, each on its own connection: { status or error code: count }. */
async function burst(url, n = 16, timeoutMs = 10_000) {
  const out = {};
  const one = () => new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve(err.code || err.message));
  });
  for (const s of await Promise.all(Array.from({ length: n }, one))) out[s] = (out[s] || 0) + 1;
  return out;
}

/** Runs the case: asserts `expected` fired, nothing outside expected + `may` did; reports the time. */
async function expectAlerts(t, prom, expected, may, round) {
  const r = await untilFiring(prom, expected, round);
  t.diagnostic(`${expected.join(' + ')} fired after ${r.seconds.toFixed(1)} s; active on the way: ${r.seen.join(', ')}`);
  const others = r.seen.filter((n) => !expected.includes(n) && !may.includes(n));
  assert.deepEqual(others, [], `no other alert fired (seen: ${r.seen.join(', ')})`);
  return r;
}

test('healthy stack under a bounded load: no alert fires', { timeout: 180_000 }, async (t) => {
  // With a queue budget: the bursts of a healthy stack wait milliseconds, far below
  // it, so nothing is shed and TunekitShedding stays quiet.
  const stack = await startHashStack(t, { workers: 2, set: ['tunekit_app_queue_budget_ms=10000'] });
  const { prom } = await observe(t, stack);
  const seen = new Set();
  for (let i = 0; i < 20; i++) {
    const b = await burst(stack.url);
    assert.deepEqual(b, { 200: 16 }, 'every request answered 200');
    for (const name of await active(prom)) seen.add(name);
  }
  // The load's lines in Prometheus (nginx may buffer its access log: until it flushed
  // them and mtail read them and a scrape took them), then evaluations after that.
  await until('mtail\'s count of 2xx responses to reach the load\'s 320', async () => {
    for (const name of await active(prom)) seen.add(name);
    const n = await prom.query('sum(tunekit_nginx_responses_total{status_class="2xx"})');
    return n.length === 1 && n[0].value >= 320;
  }, FIRE_WITHIN_MS, 250);
  await evaluationsAfter(prom, Date.now(), seen);
  assert.deepEqual([...seen], [], `no alert fired on a healthy stack (seen: ${[...seen].join(', ')})`);
  // doctor's rules, evaluated by the sampler: every one holds, the keep-alive race among them.
  const verdicts = await prom.query('tunekit_rule_broken');
  assert.ok(verdicts.some((v) => v.labels.rule === 'keepalive-race'), `keepalive-race is evaluated: ${verdicts.map((v) => v.labels.rule).join(', ')}`);
  assert.deepEqual(verdicts.filter((v) => v.value !== 0).map((v) => v.labels.rule), [], 'no rule is broken');
});

test('socket file deleted under load: TunekitSocketRebound and TunekitSocketMissing fire', { timeout: 180_000 }, async (t) => {
  const stack = await startHashStack(t, { workers: 2 });
  const { prom } = await observe(t, stack);
  let deleted = false;
  // The outage lasts until the runner's next check (tunekit_app_socket_check_ms):
  // its ENOENT lines may all come before the first scrape that sees mtail's
  // enoent series (the rules count such a new series whole).
  // TunekitAppRefusing may fire too, not must: the re-bind creates the file at
  // bind() and listens after it, and a connect() that falls between the two is
  // refused (111) — whether one does is the machine's timing (seen once in four
  // runs here).
  await expectAlerts(t, prom, ['TunekitSocketRebound', 'TunekitSocketMissing'], ['TunekitAppRefusing'], async () => {
    if (!deleted) {
      fs.unlinkSync(stack.socketPath);
      deleted = true;
    }
    await burst(stack.url);
  });
});

test('accept queue full (workers stopped, backlog 2): TunekitAcceptQueueOverflow and TunekitAcceptQueueNearFull fire', { timeout: 180_000 }, async (t) => {
  const stopped = [];
  // Registered before the stack's stop, so it runs first: a stopped worker never drains.
  t.after(() => { for (const pid of stopped) signal(pid, 'SIGCONT'); });
  const stack = await startStack({ upstream: 'uds', workers: 2, set: ['tunekit_app_backlog=2'] });
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  stopped.push(...stack.pids().app.slice(1));
  for (const pid of stopped) signal(pid, 'SIGSTOP');
  // Each round: a burst whose connections past the queue are refused at once (EAGAIN);
  // the ones in the queue wait, bounded by the client's timeout.
  await expectAlerts(t, prom, ['TunekitAcceptQueueOverflow', 'TunekitAcceptQueueNearFull'], [], () => burst(stack.url, 16, 1000));
});

test('app open-files limit too low (EMFILE): TunekitWorkerNearFileLimit and TunekitKeepaliveRace (resets) fire', { timeout: 180_000 }, async (t) => {
  const lower = nofileLowering(t);
  const stack = await startStack({ upstream: 'uds', workers: 1 });
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  const children = await loadedChildren(stack);
  lower(children);
  await expectAlerts(t, prom, ['TunekitWorkerNearFileLimit', 'TunekitKeepaliveRace'], [],
    () => burst(`${stack.url}?delay_ms=500`, 40));
  // Prometheus's scrapes of a worker at its limit did not kill it.
  assert.deepEqual(stack.pids().app.slice(1), children, 'the app workers are the same processes');
});

test('the keep-alive race by hand (no keepalive_timeout line: nginx\'s 60 s; the app at 5 s): doctor fails keepalive-race, TunekitRuleBroken fires with its text', { timeout: 180_000 }, async (t) => {
  // Files edited by hand (test/lib/race-by-hand.js). The sampler is doctor's evaluation:
  // it must count the line left out at nginx's default, as doctor does.
  const stack = await startHashStack(t, { workers: 1, beforeStart: raceByHand });
  const fails = doctor(stack).filter((f) => f.level === 'fail');
  assert.deepEqual(fails.map((f) => f.id), ['keepalive-race'], `doctor fails keepalive-race alone: ${JSON.stringify(fails)}`);
  const { prom } = await observe(t, stack);
  // The race itself (TunekitKeepaliveRace) needs a request to meet the app's close:
  // it may fire; the values in force say so every time.
  await expectAlerts(t, prom, ['TunekitRuleBroken'], ['TunekitKeepaliveRace'], () => burst(stack.url, 8));
  const alerts = (await prom.api('/api/v1/alerts')).alerts.filter((a) => a.labels.alertname === 'TunekitRuleBroken');
  assert.deepEqual(alerts.map((a) => a.labels.rule), ['keepalive-race'], 'the one broken rule is the one alerted on');
  const [alert] = alerts;
  // The same rule, with the same text: doctor's finding is where it read the values, then the rule's text.
  assert.ok(alert.labels.says && fails[0].what.includes(`: ${alert.labels.says}`), `doctor's finding holds the alert's text:\n${fails[0].what}\n${alert.labels.says}`);
  assert.ok(alert.annotations.description.startsWith(alert.labels.says), alert.annotations.description);
  assert.equal(alert.labels.severity, 'critical', 'a fail rule is critical');
  assert.equal(alert.annotations.runbook, 'docs/variables.md#rule-keepalive-race');
  t.diagnostic(`TunekitRuleBroken{rule="keepalive-race"}: ${alert.annotations.description}`);
});

test('nginx worker_connections too low: TunekitNginxOutOfConnections fires', { timeout: 180_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 1, set: ['tunekit_nginx_worker_processes=1', 'tunekit_nginx_worker_connections=32', 'tunekit_nginx_upstream_keepalive=8'] });
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  await expectAlerts(t, prom, ['TunekitNginxOutOfConnections'], [], () => burst(`${stack.url}?delay_ms=500`, 40, 3000));
});

test('a route that kills its worker, hit again and again: TunekitCrashLoop fires while the app keeps serving', { timeout: 180_000 }, async (t) => {
  const stack = await startStack({ upstream: 'uds', workers: 2, module: path.join(ROOT, 'test/fixtures/runner/crash-route.js') });
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  // Each round kills a worker (the request that does is answered 500) and sends a
  // burst of good requests, which the replaced workers answer.
  // TunekitKeepaliveRace may fire too, not must: a request nginx had just sent on a
  // pooled connection of the worker that died is reset ("recv() failed (104:
  // Connection reset by peer)", the line the race leaves); nginx sends it again on
  // another connection, so no client sees it. Whether one is in flight at the crash
  // is the machine's timing.
  await expectAlerts(t, prom, ['TunekitCrashLoop'], ['TunekitKeepaliveRace'], async () => {
    assert.deepEqual(await burst(`${stack.url}crash`, 1), { 500: 1 }, 'the request that killed its worker is answered 500');
    const good = await burst(stack.url, 8);
    assert.equal(good[200] || 0, 8, `the app keeps serving: ${JSON.stringify(good)}`);
  });
});

test('requests shed past the runner\'s queue budget, round after round: TunekitShedding fires', { timeout: 180_000 }, async (t) => {
  const dir = queueWait.holdDir(t);
  const budgetMs = 100;
  const stack = await startStack({
    upstream: 'uds', workers: 1, module: queueWait.FIXTURE, env: { HOLD_DIR: dir },
    set: ['tunekit_nginx_worker_processes=1', `tunekit_app_queue_budget_ms=${budgetMs}`],
  });
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  // Each round: the app's only worker blocked while 4 requests wait past the
  // budget behind it; the runner answers each 503 (test/lib/queue-wait.js).
  await expectAlerts(t, prom, ['TunekitShedding'], [], async () => {
    const r = await queueWait.queueBehindBlockedWorker(stack, dir, { queued: 4, budgetMs });
    assert.deepEqual(r.queued.map((q) => q.status), [503, 503, 503, 503], 'every queued request was shed');
  });
  const shed = await prom.query('sum(tunekit_app_shed_total{reason="queue_time"})');
  assert.ok(shed.length === 1 && shed[0].value >= 4, `Prometheus has the runner's shed count: ${JSON.stringify(shed)}`);
});

test('requests refused at nginx\'s max_conns, round after round: counted as cause max_conns, TunekitShedding fires', { timeout: 180_000 }, async (t) => {
  const dir = queueWait.holdDir(t);
  const bound = 2;
  const stack = await startStack({
    upstream: 'uds', workers: 1, module: path.join(ROOT, 'test/fixtures/overload/hold-app.js'), env: { HOLD_DIR: dir },
    set: [`tunekit_nginx_upstream_max_conns=${bound}`],
  });
  // Registered after the stack's stop, so it runs first: the held requests end before the drain.
  t.after(() => fs.rmSync(path.join(dir, 'hold'), { force: true }));
  stopAfter(t, stack);
  const { prom } = await observe(t, stack);
  // The bound's slots held by the app for the whole case (hold-app.js answers once the file goes).
  const held = Array.from({ length: bound }, () => queueWait.get({ url: `${stack.url}held` }));
  await until(`the app to hold ${bound} requests`, () => queueWait.seen(dir) >= bound, FIRE_WITHIN_MS, 20);
  await expectAlerts(t, prom, ['TunekitShedding'], [], async () => {
    assert.deepEqual(await burst(`${stack.url}excess`, 8), { 503: 8 }, 'every request past the bound refused 503');
  });
  const refused = await prom.query('sum(tunekit_nginx_upstream_errors_total{cause="max_conns"})');
  assert.ok(refused.length === 1 && refused[0].value >= 8, `mtail counted the refusals as cause max_conns: ${JSON.stringify(refused)}`);
  fs.rmSync(path.join(dir, 'hold'));
  assert.deepEqual((await Promise.all(held)).map((r) => r.status), Array(bound).fill(200));
});
