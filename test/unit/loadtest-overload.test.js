'use strict';
// Overload protection as rendered (tunekit_nginx_upstream_max_conns), and the
// overload bench's arithmetic: the pacer's timetable of a ladder of rates, the
// ladder, the connection cap within the descriptor budget, the option that reads it.

const test = require('node:test');
const assert = require('node:assert/strict');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { makeSchedule } = require('../../loadtest/pacer');
const { ladder, runsOf, connectionCap, stacksFor } = require('../../loadtest/overload');
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

test('bench --overload --queue-budget MS: the protected stack refuses by queue time, without the bound; the others unchanged', () => {
  const plain = stacksFor({});
  assert.deepEqual(plain.protected.stack.set, ['tunekit_nginx_upstream_max_conns=32']);
  const budget = stacksFor({ queueBudgetMs: options.parse('bench', options.BENCH, ['--overload', '--queue-budget', '500']).queueBudget });
  assert.deepEqual(budget.protected.stack.set, ['tunekit_app_queue_budget_ms=500']);
  assert.match(budget.protected.describe, /queue time \(tunekit_app_queue_budget_ms=500\)/);
  assert.deepEqual([budget.stock, budget.kit], [plain.stock, plain.kit]);
  // The stack it describes renders: the runner's settings carry the budget.
  assert.equal(JSON.parse(files(budget.protected.stack.set)['app.json']).queueBudgetMs, 500);
});

test('bench --multiples: ascending numbers above 0; the overload options need --overload', () => {
  assert.deepEqual(options.parse('bench', options.BENCH, ['--overload', '--multiples', '0.5,1,4']).multiples, [0.5, 1, 4]);
  assert.throws(() => options.parse('bench', options.BENCH, ['--multiples', '2,1']), /--multiples must be ascending numbers > 0/);
  assert.throws(() => options.parse('bench', options.BENCH, ['--multiples', '0,1']), /--multiples must be ascending numbers > 0/);
});
