'use strict';
// `tunekit bench`, short: every scenario (stock, tcp, uds, sticky, metrics-off,
// bare, nginx-static, direct) in interleaved rounds, medians and ratios computed, reports
// written, everything torn down. Invariants only — the speed figures of a
// 1-second run on a shared machine mean nothing, and no test asserts them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { alive } = require('../../lib/proc');
const { startStack } = require('../../lib/stack');
const { BARE_PROGRAM } = require('../../loadtest/scenarios');
const { runCommand } = require('../lib/util');

const ROOT = path.resolve(__dirname, '../..');

/** A temp dir removed after the test, its bench.json path, and `tunekit bench ARGS` run in it. */
function benchDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const bench = (args) => runCommand(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'bench', ...args], { cwd: dir, timeoutMs: 300000 });
  return { dir, json: path.join(dir, 'bench.json'), bench };
}


test('bench: interleaved rounds of every scenario, ratios, reports, nothing left running', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lt-bench-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = (ext) => path.join(dir, `bench.${ext}`);
  const args = ['bench', '--duration', '1', '--rounds', '2', '--connections', '8', '--driver', 'autocannon', '--procs', '1',
    '--cpu-rate', '200', '--cpu-duration', '1', '--warmup', '0', '--no-progress',
    '--json', out('json'), '--md', out('md'), '--html', out('html')];
  const r = await new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 300000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(fs.readFileSync(out('json'), 'utf8'));
  const names = ['stock', 'tcp', 'uds', 'sticky', 'metrics-off', 'bare', 'nginx-static', 'direct'];
  assert.deepEqual(doc.summary.map((s) => s.scenario), names);
  assert.equal(doc.results.length, names.length * 2 * 2, 'saturation + paced, per scenario, per round');

  // Interleaved: each round runs every scenario once, in a different order.
  const order = (round) => doc.results.filter((x) => x.round === round && x.mode === 'saturation').map((x) => x.scenario);
  assert.deepEqual([...order(1)].sort(), [...names].sort());
  assert.deepEqual([...order(2)].sort(), [...names].sort());
  assert.notDeepEqual(order(1), order(2));

  for (const x of doc.results) {
    const q = x.requests;
    assert.equal(q.errors + q.timeouts + q.non2xx, 0, `${x.scenario} r${x.round} ${x.mode}: every request answered`);
    assert.equal(x.errorLog ? x.errorLog.lines : 0, 0, `${x.scenario}: no nginx error.log lines`);
    assert.ok(x.server.cpuUsPerReq > 0, `${x.scenario}: server CPU accounted`);
    assert.equal(x.driver, x.mode === 'paced' ? 'pacer' : 'autocannon', 'each figure names its driver');
    // stock opens a connection per request and its runner uses round-robin:
    // every worker serves. The tuned stacks use the runner's `shared`
    // strategy, where the worker that wakes first accepts a burst of
    // keep-alive connections and keeps them (one worker may serve none), so
    // there only the accounting is asserted.
    if (x.scenario === 'stock' && x.mode === 'saturation') assert.deepEqual(x.workers.missing, [], 'stock: every app worker served');
    if (x.scenario !== 'nginx-static') {
      assert.ok(x.workers.served >= 1);
      assert.equal(Object.values(x.workers.byPid).reduce((a, b) => a + b, 0), x.workers.sampled, 'the share adds up');
    }
  }
  // The runner's meter counted every answered request of its stacks' runs (read
  // before and after each), through nginx or straight to the app (direct); the
  // stacks without it (metrics-off, bare) and nginx alone are not metered, and
  // there who served is counted from the example app's "pid" in the answers.
  for (const x of doc.results) {
    if (['stock', 'tcp', 'uds', 'sticky', 'direct'].includes(x.scenario)) {
      assert.equal(x.workers.source, 'runner', x.scenario);
      assert.equal(x.metered.requests, x.workers.sampled, `${x.scenario}: one count`);
      assert.ok(x.metered.requests >= x.requests.completed, `${x.scenario} r${x.round} ${x.mode}: metered ${x.metered.requests} of ${x.requests.completed}`);
    } else {
      assert.equal(x.metered, null, `${x.scenario}: no meter`);
      if (x.scenario !== 'nginx-static') assert.equal(x.workers.source, 'body', x.scenario);
    }
  }
  // bare: the plain cluster's workers (its ready line) answered, with the example
  // app's body (the share counts its "pid": field), no runner process among them.
  for (const x of doc.results.filter((y) => y.scenario === 'bare')) {
    assert.equal(x.workers.expected, 2, 'bare: the two workers of its ready line');
    assert.ok(x.server.appCpuUs > 0 && x.server.nginxCpuUs > 0, 'bare: nginx and the cluster both accounted');
  }
  // nginx-static is nginx alone: no app CPU; direct is the app alone: no nginx CPU.
  for (const x of doc.results.filter((y) => y.scenario === 'nginx-static')) assert.equal(x.server.appCpuUs, 0);
  for (const x of doc.results.filter((y) => y.scenario === 'direct')) assert.equal(x.server.nginxCpuUs, 0);

  for (const s of doc.summary) {
    assert.equal(s.rounds, 2);
    assert.ok(s.reqPerSec.min <= s.reqPerSec.median && s.reqPerSec.median <= s.reqPerSec.max);
    assert.equal(s.atRate.rate, 200);
  }
  assert.deepEqual(doc.ratios.map((x) => x.name), ['uds/stock', 'uds/tcp', 'uds/direct', 'uds/metrics-off', 'uds/bare', 'tcp/stock', 'sticky/uds']);
  for (const x of doc.ratios) {
    assert.ok(x.reqPerSec.median > 0 && x.cpuUsPerReq.median > 0 && x.cpuUsPerReqAtRate.median > 0, `${x.name} computed`);
    assert.equal(x.reqPerSec.n, 2, 'one ratio per round');
  }
  assert.match(r.stdout, /uds\/stock/);
  assert.match(fs.readFileSync(out('md'), 'utf8'), /\| uds\/stock \|/);
  assert.match(fs.readFileSync(out('html'), 'utf8'), /<svg /);

  // Torn down: no nginx (stacks and the static ceiling) or app process left.
  const pids = new Set(doc.results.flatMap((x) => [...x.server.pids.nginx, ...x.server.pids.app]));
  assert.ok(pids.size >= 10);
  assert.deepEqual([...pids].filter(alive), [], 'no process left running');
});

test('bench --try FILE: the file\'s values (a tune result) in the same rounds as the kit\'s, try/uds per round; refused without a file', async (t) => {
  const { dir, json, bench } = benchDir(t, 'lt-bench-try-');
  const vars = path.join(dir, 'tune.yml');
  fs.writeFileSync(vars, 'tunekit_app_workers: 1\ntunekit_upstream_kind: tcp\n');
  const r = await bench(['--scenarios', 'uds', '--try', vars, '--duration', '1', '--rounds', '2', '--connections', '8', '--driver', 'autocannon',
    '--procs', '1', '--cpu-rate', '0', '--warmup', '0', '--no-progress', '--json', json, '--md', path.join(dir, 'b.md'), '--html', path.join(dir, 'b.html')]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.deepEqual(doc.summary.map((s) => s.scenario), ['uds', 'try'], '--try adds its scenario to the list');
  assert.equal(doc.options.try, vars);
  const tried = doc.summary.find((s) => s.scenario === 'try');
  assert.equal(tried.describe, `the kit's values with ${vars} over them: tcp upstream, 1 app worker`);
  for (const x of doc.results) {
    assert.equal(x.requests.errors + x.requests.timeouts + x.requests.non2xx, 0, `${x.scenario} r${x.round}: every request answered`);
    assert.equal(x.workers.expected, x.scenario === 'try' ? 1 : 2, `${x.scenario}: the file's one app worker on try only`);
  }
  const order = (round) => doc.results.filter((x) => x.round === round).map((x) => x.scenario);
  assert.notDeepEqual(order(1), order(2), 'interleaved, the order alternated per round');
  assert.deepEqual(doc.ratios.map((x) => x.name), ['try/uds']);
  assert.equal(doc.ratios[0].reqPerSec.n, 2, 'one ratio per round');
  assert.match(r.stdout, /^try\/uds req\/s \S+ \(\S+, 95%\): /m);

  const alone = await bench(['--scenarios', 'uds,try']);
  assert.equal(alone.code, 2);
  assert.equal(alone.stderr, 'tunekit: the scenario try measures a vars file: add --try FILE.yml (tune\'s recommendation, say)\n');
  const missing = await bench(['--try', path.join(dir, 'nope.yml')]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^tunekit: --try \S+nope\.yml: .*give the path of an existing file\n$/);
  const tls = await bench(['--https', '--try', vars]);
  assert.equal(tls.code, 2);
  assert.equal(tls.stderr, 'tunekit: bench --https runs its own fronts and clients; drop --try\n');
});

test('bench --aa --rounds auto: the A/A pair in the same rounds, rounds until the width or the cap, which one said; refused where it does not belong', async (t) => {
  const { dir, json, bench } = benchDir(t, 'lt-bench-aa-');
  // A width no two stacks reach (±0.001%) and a budget far beyond three short rounds:
  // the round cap is the one way this run can end.
  const r = await bench(['--scenarios', 'uds', '--aa', '--rounds', 'auto', '--width', '0.001', '--max-rounds', '3', '--budget-s', '3600',
    '--duration', '1', '--connections', '8', '--driver', 'autocannon', '--procs', '1', '--cpu-rate', '0', '--warmup', '0', '--no-progress',
    '--json', json, '--md', path.join(dir, 'b.md'), '--html', path.join(dir, 'b.html')]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.deepEqual(doc.summary.map((s) => s.scenario), ['uds', 'aa'], '--aa adds its scenario');
  for (const round of [1, 2, 3]) {
    const urls = doc.results.filter((x) => x.round === round).map((x) => x.target.url);
    assert.equal(new Set(urls).size, 2, `round ${round}: aa is a stack of its own, not uds measured twice (${urls})`);
  }
  assert.deepEqual(doc.ratios.map((x) => x.name), ['aa/uds']);
  const x = doc.ratios[0].reqPerSec;
  assert.equal(x.ci.n, 3, 'three rounds, then the cap');
  assert.ok(x.ci.low <= x.ci.estimate && x.ci.estimate <= x.ci.high, JSON.stringify(x.ci));
  assert.deepEqual([doc.auto.by, doc.auto.rounds, doc.options.rounds, doc.options.roundsRun], ['max-rounds', 3, 'auto', 3]);
  assert.deepEqual(doc.auto.unresolved.map((u) => u.name), ['aa/uds req/s', 'aa/uds server µs/req']);
  assert.match(r.stdout, /^aa\/uds req\/s \S+ \(\S+–\S+, 95%\): A\/A, the noise floor of this run \(±\d+\.\d%\)$/m);
  assert.match(r.stdout, /^rounds auto: stopped after 3 rounds: the round cap \(3\) was reached; not resolved to ±0\.0%: aa\/uds req\/s/m);
  assert.match(fs.readFileSync(path.join(dir, 'b.md'), 'utf8'), /^rounds auto: stopped after 3 rounds/m);

  const stray = await bench(['--rounds', '3', '--width', '2']);
  assert.equal(stray.code, 2);
  assert.equal(stray.stderr, 'tunekit: --width belongs to --rounds auto (the default without --rounds): drop --rounds 3\n');
  const tls = await bench(['--https', '--rounds', 'auto']);
  assert.equal(tls.code, 2);
  assert.equal(tls.stderr, 'tunekit: --rounds auto is for the plain bench; give --https and --overload a number of rounds\n');
});

test('bench: every round on fresh stacks (new nginx and app processes) unless --keep-stacks; none left after; --keep-stacks refused by --overload', async (t) => {
  const { json, bench } = benchDir(t, 'lt-bench-restart-');
  const args = (rounds) => ['--scenarios', 'uds,bare', '--rounds', String(rounds), '--duration', '1', '--connections', '8', '--driver', 'autocannon',
    '--procs', '1', '--cpu-rate', '0', '--warmup', '0', '--no-progress', '--json', json];
  const pidsOf = (doc, scenario, kind) => doc.results.filter((x) => x.scenario === scenario).map((x) => x.server.pids[kind][0]);
  const r = await bench(args(3));
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /3 rounds, fresh stacks each × 1 s/);
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.equal(doc.options.restart, true);
  for (const scenario of ['uds', 'bare']) {
    const runs = doc.results.filter((x) => x.scenario === scenario);
    assert.deepEqual(runs.map((x) => x.round), [1, 2, 3]);
    const masters = pidsOf(doc, scenario, 'nginx');
    const primaries = pidsOf(doc, scenario, 'app');
    assert.equal(new Set(masters).size, 3, `${scenario}: a new nginx each round (${masters})`);
    assert.equal(new Set(primaries).size, 3, `${scenario}: a new app each round (${primaries})`);
    // Every round's processes are gone after the run.
    for (const pid of [...runs.flatMap((x) => [...x.server.pids.nginx, ...x.server.pids.app])]) {
      assert.equal(fs.existsSync(`/proc/${pid}`), false, `${scenario}: pid ${pid} still runs`);
    }
  }
  assert.equal(doc.ratios.find((x) => x.name === 'uds/bare').reqPerSec.ci.n, 3, 'the ratio is still per round');

  const kept = await bench([...args(2), '--keep-stacks']);
  assert.equal(kept.code, 0, kept.stderr);
  assert.match(kept.stdout, /2 rounds on the same stacks \(--keep-stacks\) × 1 s/);
  const keptDoc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.equal(keptDoc.options.restart, false);
  for (const scenario of ['uds', 'bare']) {
    assert.equal(new Set(pidsOf(keptDoc, scenario, 'nginx')).size, 1, `${scenario}: one nginx for both rounds`);
    assert.equal(new Set(pidsOf(keptDoc, scenario, 'app')).size, 1, `${scenario}: one app for both rounds`);
  }
  const over = await bench(['--overload', '--keep-stacks']);
  assert.equal(over.code, 2);
  assert.equal(over.stderr, 'tunekit: bench --overload runs its own three stacks; drop --https, --try, --aa, --pin and --keep-stacks\n');
});

test('bench --own-core: every run\'s server on the stacks\' CPUs, the generator on CPU 0, each round; refused beside --pin and --https', { skip: require('../../loadtest/cpu').cores() < 2 && 'needs 2 CPUs' }, async (t) => {
  const { ownCoreSplit } = require('../../loadtest/pin');
  const split = ownCoreSplit(require('../../loadtest/cpu').cores());
  const { json, bench } = benchDir(t, 'lt-bench-own-core-');
  const r = await bench(['--scenarios', 'uds,bare', '--rounds', '2', '--own-core', '--duration', '1', '--connections', '8', '--driver', 'autocannon',
    '--procs', '1', '--cpu-rate', '200', '--cpu-duration', '1', '--warmup', '0', '--no-progress', '--json', json]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`--own-core: the generator on CPU 0, every stack on CPU ${split.stacks}`));
  const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.deepEqual(doc.options.placement, split);
  assert.equal(doc.results.length, 2 * 2 * 2, 'both scenarios, saturation and paced, both rounds');
  for (const x of doc.results) {
    // nginx's master and workers, the runner's primary, workers and spare (bare's
    // primary and workers): every one on the stacks' CPUs, none left on CPU 0.
    assert.deepEqual(x.server.cpus, [split.stacks], `${x.scenario} round ${x.round} ${x.mode}: ${x.server.cpus}`);
    assert.equal(x.generator.cpus, split.generator, `${x.scenario} round ${x.round} ${x.mode}: the generator`);
  }
  const both = await bench(['--own-core', '--pin']);
  assert.equal(both.code, 2);
  assert.equal(both.stderr, 'tunekit: --pin and --own-core place the same workers two ways: give one of them\n');
  const tls = await bench(['--https', '--own-core']);
  assert.equal(tls.code, 2);
  assert.match(tls.stderr, /bench --https runs its own fronts and clients; drop --own-core/);
});

test('the bare cluster: the example app through the tuned nginx on its socket, stopped by pid, socket removed', async (t) => {
  const stack = await startStack({ upstream: 'uds', profile: 'tuned', workers: 2, set: ['tunekit_metrics=false'], appProgram: BARE_PROGRAM });
  t.after(() => stack.stop());
  assert.equal(stack.ready.workers.length, 2, 'two workers in its ready line');
  assert.equal(stack.appListen, `unix:${stack.socketPath}`);
  assert.ok(fs.statSync(stack.socketPath).isSocket());
  const { nginx, app } = stack.pids();
  assert.deepEqual(app.slice(1).sort(), [...stack.ready.workers].sort(), 'the primary and its two workers, no spare');
  // Its workers run V8 as the runner's do: the kit's default turns the memory reducer off.
  for (const pid of stack.ready.workers) {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    assert.ok(argv.includes('--no-memory-reducer'), `bare worker ${pid}: ${argv.join(' ')}`);
  }
  const body = await new Promise((resolve, reject) => {
    require('node:http').get(stack.url, { agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve(JSON.parse(text)));
    }).on('error', reject);
  });
  assert.equal(body.ok, true, 'the example app answers');
  assert.ok(stack.ready.workers.includes(body.pid), 'from one of the bare workers');
  assert.equal(typeof body.worker, 'number');
  await stack.stop();
  // The bare primary exits 0 only when the socket path it bound is gone.
  assert.deepEqual(await stack.appExited, { code: 0, signal: null });
  assert.deepEqual([...nginx, ...app].filter(alive), [], 'no process left running');
});
