'use strict';
// Overload protection as rendered (tunekit_nginx_upstream_max_conns), and the
// overload bench's arithmetic: the pacer's timetable of a ladder of rates, the
// ladder, the connection cap within the descriptor budget, the option that reads it.

const test = require('node:test');
const assert = require('node:assert/strict');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { makeSchedule } = require('../../loadtest/pacer');
const { ladder, runsOf, burstSteps, burstSummary, connectionCap, stacksFor, pacedProbeRates, pacedClimb } = require('../../loadtest/overload');
const { frame } = require('../../loadtest/overload-table');
const options = require('../../bin/load-options');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function files(set) {
  const out = {};
  for (const r of renderer.renderAll(config.resolve({ set }))) out[r.dest.split('/').pop()] = r.content;
  return out;
}
const live = (text) => text.split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');

test('max_conns on: a zone shared by the nginx workers, max_conns on each server, nginx\'s own 502 sent to the refusal location', () => {
  for (const [kind, servers] of [['uds', 1], ['tcp', 1], ['per-worker', 3]]) {
    const f = files([`tunekit_upstream_kind=${kind}`, 'tunekit_app_workers=3', 'tunekit_nginx_upstream_max_conns=12', 'tunekit_nginx_overload_retry_after_s=5']);
    const upstream = live(f['upstream.conf']);
    assert.match(upstream, /^\s*zone tunekit_app 64k;$/m, kind);
    assert.equal((upstream.match(/^\s*server \S+ .* max_conns=12;$/gm) || []).length, servers, `${kind}: every server line bounded`);
    assert.match(live(f['proxy.conf']), /^error_page 502 = @tunekit_overload;$/m);
    const site = live(f['site.conf']);
    assert.match(site, /location @tunekit_overload \{\s+if \(\$upstream_addr !~ ":"\) \{\s+add_header Retry-After 5 always;\s+return 503;\s+\}\s+return 502;\s+\}/);
  }
});

test('with several apps the bound is host-wide: every app\'s upstream bounded, every site able to answer the 503; an app may not set it alone', (t) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-overload-')), 'apps.yml');
  t.after(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));
  const apps = [{ name: 'api', server_name: 'api.example.test' }, { name: 'web', server_name: 'web.example.test' }];
  fs.writeFileSync(file, JSON.stringify({ tunekit_nginx_default_server: false, tunekit_nginx_upstream_max_conns: 12, tunekit_apps: apps }));
  const rendered = renderer.renderAll(config.resolve({ varsFiles: [file] }));
  const text = (name) => rendered.filter((r) => r.dest.endsWith(`/${name}`)).map((r) => live(r.content)).join('\n');
  assert.equal((text('upstream.conf').match(/^\s*server \S+ .* max_conns=12;$/gm) || []).length, 2, 'both apps\' upstreams bounded');
  assert.equal((text('upstream.conf').match(/^\s*zone \S+ 64k;$/gm) || []).length, 2, 'a zone per upstream');
  assert.equal((text('site.conf').match(/location @tunekit_overload/g) || []).length, 2, 'both sites hold the refusal location proxy.conf sends to');
  fs.writeFileSync(file, JSON.stringify({ tunekit_nginx_default_server: false, tunekit_apps: [{ ...apps[0], tunekit_nginx_upstream_max_conns: 12 }, apps[1]] }));
  assert.throws(() => config.resolve({ varsFiles: [file] }), /tunekit_nginx_upstream_max_conns is host-wide/);
});

test('the held queue on: nginx tests the shed directory the runner writes, per app, and answers its refusal 503 with Retry-After; off or stock, nothing of it', (t) => {
  const f = files(['tunekit_app_sustained_after_s=3', 'tunekit_nginx_overload_retry_after_s=5']);
  const dir = JSON.parse(f['app.json']).shedDir;
  assert.equal(dir, '/run/tunekit-app/shed');
  const site = live(f['site.conf']);
  assert.ok(site.includes(`if (-f "${dir}/$tunekit_shed_bucket") {\n            return 503;`), site);
  assert.match(site, /if \(\$request_id ~ "\(\[0-9a-f\]\{2\}\)\$"\) \{\s+set \$tunekit_shed_bucket \$1;/);
  assert.match(site, /error_page 503 = @tunekit_overload;\s+open_file_cache off;/);
  assert.match(site, /location @tunekit_overload \{\s+if \(\$upstream_addr !~ ":"\) \{\s+add_header Retry-After 5 always;/);
  for (const set of [[], ['tunekit_app_sustained_after_s=3', 'tunekit_profile=stock', 'tunekit_upstream_kind=tcp']]) {
    const g = files(set);
    assert.equal(JSON.parse(g['app.json']).shedDir, '', set.join(' ') || 'default');
    assert.doesNotMatch(live(g['site.conf']), /shed|@tunekit_overload/, set.join(' ') || 'default');
  }
  // Two apps, one with it on: its location tests its own directory, the other's none.
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-overload-')), 'apps.yml');
  t.after(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));
  fs.writeFileSync(file, JSON.stringify({ tunekit_nginx_default_server: false, tunekit_apps: [
    { name: 'api', server_name: 'api.example.test', tunekit_app_sustained_after_s: 3 }, { name: 'web', server_name: 'web.example.test' }] }));
  const rendered = renderer.renderAll(config.resolve({ varsFiles: [file] }));
  const sites = rendered.filter((r) => r.dest.endsWith('/site.conf')).map((r) => live(r.content)).join('\n');
  assert.deepEqual([...sites.matchAll(/if \(-f "([^"]+)\/\$tunekit_shed_bucket"\)/g)].map((m) => m[1]), ['/run/api/shed']);
  assert.equal((sites.match(/location @tunekit_overload/g) || []).length, 1, 'the refusal location where a location sends to it');
  const shedDirs = rendered.filter((r) => r.dest.endsWith('.json') && /"shedDir"/.test(r.content)).map((r) => JSON.parse(r.content).shedDir).sort();
  assert.deepEqual(shedDirs, ['', '/run/api/shed']);
});

test('max_conns 0 (the default) and the stock profile render none of it', () => {
  for (const set of [[], ['tunekit_profile=stock', 'tunekit_upstream_kind=tcp']]) {
    const f = files(set);
    for (const name of ['upstream.conf', 'proxy.conf', 'site.conf']) {
      assert.doesNotMatch(live(f[name] || ''), /max_conns|zone |@tunekit_overload|Retry-After/, `${set.join(' ') || 'default'}: ${name}`);
    }
  }
  assert.equal(config.resolve({}).tunekit_nginx_upstream_max_conns, 0);
});

test('a ladder\'s timetable: each phase at its own rate, one after the other; the settling part counts in no phase', () => {
  const s = makeSchedule([{ rate: 10, durationS: 2, settleS: 1 }, { rate: 100, durationS: 1 }]);
  assert.equal(s.total, 120);
  assert.equal(s.endNs, 3e9);
  assert.equal(s.at(0), 0);
  assert.equal(s.at(19), 1.9e9);
  assert.equal(s.at(20), 2e9);
  assert.equal(s.at(119), 2.99e9);
  assert.equal(s.dueBy(-1), 0);
  assert.equal(s.dueBy(0), 1);
  assert.equal(s.dueBy(1.95e9), 20);
  assert.equal(s.dueBy(2e9), 21);
  assert.equal(s.dueBy(10e9), 120);
  assert.deepEqual([0, 9, 10, 19, 20, 119].map(s.inPhase), [null, null, 0, 0, 1, 1]);
  for (let i = 0; i < s.total; i++) assert.equal(s.dueBy(s.at(i)), i + 1, `request ${i} is due at its own time`);
});

test('the ladder: multiples of the capacity, a quarter of each step to settle, then 0.5× to recover', () => {
  assert.deepEqual(ladder(1000, [0.8, 2], 20, 10), [
    { multiple: 0.8, rate: 800, durationS: 20, settleS: 5 },
    { multiple: 2, rate: 2000, durationS: 20, settleS: 5 },
    { multiple: 0.5, rate: 500, durationS: 10, settleS: 0, recovery: true },
  ]);
});

test('the runs of a ladder: each step alone, the highest and the recovery in one run', () => {
  const steps = ladder(1000, [0.8, 1, 2], 20, 10);
  assert.deepEqual(runsOf(steps).map((run) => run.map((p) => p.multiple)), [[0.8], [1], [2, 0.5]]);
});

test('the connection cap stays within the open-files limit', () => {
  assert.equal(connectionCap(2000, 20000), 2000);
  assert.equal(connectionCap(2000, 1024), 768);
  assert.equal(connectionCap(2000, Infinity), 2000);
});

test('bench --overload: the protected stack is the kit\'s recipe, bound and queue budget derived from --latency-budget and the capacity', () => {
  // The options as bench --overload hands them to the engine.
  const parse = (...args) => {
    const o = options.parse('bench', options.BENCH, ['--overload', ...args]);
    return { protect: o.protect, latencyBudgetMs: o.latencyBudget };
  };
  const both = stacksFor(parse());
  assert.deepEqual(Object.keys(both), ['stock', 'kit', 'kit+bound+budget']);
  assert.deepEqual(both['kit+bound+budget'].setFor(1500.4), ['tunekit_latency_budget_ms=500', 'tunekit_app_capacity_rps=1500']);
  // The set renders what the name says: a quarter of 1,500 req/s x 500 ms = 188 requests at nginx, the runner's budget 500 ms,
  // and the app's accept queue the kit's 4,096, deeper than the bound (as deep, it filled with connections the bound does not count).
  const f = files(both['kit+bound+budget'].setFor(1500));
  assert.match(f['upstream.conf'], / max_conns=188;/);
  assert.equal(JSON.parse(f['app.json']).queueBudgetMs, 500);
  assert.equal(JSON.parse(f['app.json']).backlog, 4096);

  const bound = stacksFor(parse('--protect', 'bound', '--latency-budget', '200'))['kit+bound'];
  const fb = files(bound.setFor(1000));
  assert.match(fb['upstream.conf'], / max_conns=50;/);
  assert.equal(JSON.parse(fb['app.json']).queueBudgetMs, 0);

  const budget = stacksFor(parse('--protect', 'budget', '--latency-budget', '500'))['kit+budget'];
  const fq = files(budget.setFor(1000));
  assert.doesNotMatch(fq['upstream.conf'], /max_conns/);
  assert.equal(JSON.parse(fq['app.json']).queueBudgetMs, 500);
  assert.equal(JSON.parse(fq['app.json']).backlog, 4096, 'the budget alone keeps the kit\'s accept queue');
  assert.deepEqual([budget.stack, both.stock, both.kit], [both['kit+bound+budget'].stack, stacksFor(parse('--protect', 'bound')).stock, stacksFor(parse('--protect', 'bound')).kit]);
  assert.throws(() => options.parse('bench', options.BENCH, ['--overload', '--protect', 'all']), /--protect/);

  // queue: both, and the held queue; a burst-sized budget (40 s at 370 req/s: a bound
  // of 3,700) gets the nginx connections the kit's rules ask for, so the stack starts.
  const queue = stacksFor(parse('--protect', 'queue', '--latency-budget', '40000'))['kit+queue'];
  const fh = files(queue.setFor(370));
  assert.match(fh['upstream.conf'], / max_conns=3700;/);
  const app = JSON.parse(fh['app.json']);
  assert.deepEqual([app.queueBudgetMs, app.sustainedAfterS, app.sustainedBudgetMs, app.backlog], [40000, 3, 20, 4096]);
  assert.match(fh['nginx.conf'], /worker_connections 7901;/);
  // Deeper than the kit's accept queue: raised to the bound.
  assert.equal(JSON.parse(files(queue.setFor(500))['app.json']).backlog, 5000);
});

test('bench --overload --burst: 0.5x, 10x for 1 s, 0.5x, in one run; what the burst did, per stack', () => {
  const steps = burstSteps(400, 20, 10);
  assert.deepEqual(steps.map((p) => [p.multiple, p.rate, p.durationS, p.settleS]), [[0.5, 200, 20, 5], [10, 4000, 1, 0], [0.5, 200, 10, 0]]);
  const step = (over) => ({ non2xx: 0, errors: 0, timeouts: 0, kinds: {}, latencyUs: { p99: 1000 }, ...over });
  const out = burstSummary([step(), { ...step({ non2xx: 30, timeouts: 2, kinds: { 'HTTP 503': 30, timeout: 2 }, latencyUs: { p99: 900000 } }), rate: 4000, durationS: 1 }, step({ non2xx: 5 })]);
  assert.deepEqual(out, { requests: 4000, refused: 32, kinds: { 'HTTP 503': 30, timeout: 2 }, servedP99Us: 900000, refusedAfter: 5 });
});

test('per-client fairness is rendered only when set: the zones in client.conf (http), the limits in proxy.conf (the app\'s locations)', () => {
  const off = files([]);
  assert.doesNotMatch(off['client.conf'] + off['proxy.conf'], /limit_req|limit_conn/);
  const on = files(['tunekit_nginx_limit_req_rate=10r/s', 'tunekit_nginx_limit_conn=4']);
  assert.match(on['client.conf'], /^limit_req_zone \$binary_remote_addr zone=tunekit_client_rate:10m rate=10r\/s;$/m);
  assert.match(on['client.conf'], /^limit_conn_zone \$binary_remote_addr zone=tunekit_client_conn:10m;$/m);
  assert.match(on['proxy.conf'], /^limit_req zone=tunekit_client_rate burst=10 nodelay;\nlimit_req_status 429;$/m, 'the burst: one second of the rate');
  assert.match(on['proxy.conf'], /^limit_conn tunekit_client_conn 4;\nlimit_conn_status 429;$/m);
  const rateOnly = files(['tunekit_nginx_limit_req_rate=600r/m']);
  assert.match(rateOnly['proxy.conf'], /burst=0 nodelay/);
  assert.doesNotMatch(rateOnly['client.conf'] + rateOnly['proxy.conf'], /limit_conn/);
});

test('bench --multiples: ascending numbers above 0; the overload options need --overload', () => {
  assert.deepEqual(options.parse('bench', options.BENCH, ['--overload', '--multiples', '0.5,1,4']).multiples, [0.5, 1, 4]);
  assert.throws(() => options.parse('bench', options.BENCH, ['--multiples', '2,1']), /--multiples must be ascending numbers > 0/);
  assert.throws(() => options.parse('bench', options.BENCH, ['--multiples', '0,1']), /--multiples must be ascending numbers > 0/);
});

test('--capacity paced: probes climb from 0.7x the saturation figure in 0.05x steps and stop at the first one not served; the capacity is the last served', async () => {
  assert.deepEqual(pacedProbeRates(1000).map((p) => p.rate), [700, 750, 800, 850, 900, 950, 1000, 1050, 1100, 1150, 1200]);
  // A made-up stack whose knee is at 880 req/s: below it p99 5 ms; above, the queue grows (p99 seconds, some timeouts).
  const tried = [];
  const stack = async ({ rate }) => {
    tried.push(rate);
    return rate <= 880 ? { rate, ok: rate * 6, non2xx: 0, errors: 0, timeouts: 0, latencyUs: { p99: 5000 }, goodput: rate }
      : { rate, ok: rate * 5, non2xx: 0, errors: 0, timeouts: 12, latencyUs: { p99: 2.5e6 }, goodput: 880 };
  };
  const out = await pacedClimb(1000, 20, stack);
  assert.equal(out.reqPerSec, 850);
  assert.deepEqual(tried, [700, 750, 800, 850, 900], 'nothing offered past the first probe not served');
  assert.deepEqual(out.probes.map((p) => p.served), [true, true, true, true, false]);
  assert.equal(out.topped, false);
  // Within the budget but with one 503: not served. A p99 past the budget alone: not served.
  const one503 = await pacedClimb(1000, 20, async ({ rate }) => ({ rate, ok: 100, non2xx: rate >= 750 ? 1 : 0, errors: 0, timeouts: 0, latencyUs: { p99: 3000 }, goodput: rate }));
  assert.equal(one503.reqPerSec, 700);
  const slow = await pacedClimb(1000, 20, async ({ rate }) => ({ rate, ok: 100, non2xx: 0, errors: 0, timeouts: 0, latencyUs: { p99: rate >= 800 ? 20001 : 20000 }, goodput: rate }));
  assert.equal(slow.reqPerSec, 750);
  // Served all the way: the highest probe, said so.
  const fast = await pacedClimb(1000, 20, async ({ rate }) => ({ rate, ok: 100, non2xx: 0, errors: 0, timeouts: 0, latencyUs: { p99: 1000 }, goodput: rate }));
  assert.deepEqual([fast.reqPerSec, fast.topped], [1200, true]);
  // The first probe not served: an error naming the budget and the two ways out.
  await assert.rejects(pacedClimb(1000, 20, async ({ rate }) => ({ rate, ok: 100, non2xx: 0, errors: 0, timeouts: 0, latencyUs: { p99: 45000 }, goodput: rate })),
    { name: 'UsageError', message: /did not serve 700 req\/s paced \(0\.7× its saturation figure 1000\): p99 45\.0 ms against 20 ms \(the latency budget, at most 100\).*--latency-budget.*--capacity R/ });
  // A budget sized for a burst does not make every probe pass: p99 is held to 100 ms at most.
  const burstSized = await pacedClimb(1000, 40_000, async ({ rate }) => ({ rate, ok: 100, non2xx: 0, errors: 0, timeouts: 0, latencyUs: { p99: rate >= 800 ? 767_000 : 10_000 }, goodput: rate }));
  assert.equal(burstSized.reqPerSec, 750);
  // The report says how the capacity was found, probe by probe.
  const doc = { options: { connections: 50, latencyBudgetMs: 20, maxConnections: 2000, timeout: 10 }, overload: { capacity: 850, ladder: [{ multiple: 2, durationS: 60 }], stacks: [], capacityRun: { stack: 'kit', driver: 'wrk', runs: [990, 1000, 1010], reqPerSec: 1000, paced: out } } };
  assert.match(frame(doc).join('\n'), /capacity 850 req\/s, the highest paced rate served by kit \(p99 ≤ 20 ms, every request 2xx\): 700 served \(p99 5\.00 ms\), .*900 not served \(p99 2500 ms, 12 not 2xx\); the saturation figure 1,000, measured on kit \(the median of 3 runs: 990, 1,000, 1,010; wrk, saturation, 50 connections\)/);
  // The option: a rate, or paced; nothing else.
  assert.equal(options.parse('bench', options.BENCH, ['--overload', '--capacity', 'paced']).capacity, 'paced');
  assert.equal(options.parse('bench', options.BENCH, ['--overload', '--capacity', '800']).capacity, 800);
  assert.throws(() => options.parse('bench', options.BENCH, ['--overload', '--capacity', 'fast']), /--capacity must be a number > 0 \(got "fast"\)/);
});
