'use strict';
// Report writers: wrk's output parsed, the tables, Markdown and the
// self-contained HTML (inline SVG, no external URL), nginx-static's config.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { parseOutput, mixScript, luaString } = require('../../loadtest/wrk');
const report = require('../../loadtest/report');
const { summarise, ratios } = require('../../loadtest/scenarios');
const { toHtml } = require('../../loadtest/html');
const { toMarkdown } = require('../../loadtest/markdown');
const { benchText, loadtestText } = require('../../loadtest/table');
const { staticConf, BODY } = require('../../loadtest/static-nginx');
const config = require('../../lib/config');
const { createEnv } = require('../../lib/template');
const { parse, LOADTEST, BENCH } = require('../../bin/load-options');
const { sampleBenchDoc } = require('../fixtures/loadtest/sample');

const FIX = path.join(__dirname, '../fixtures/loadtest');

test("wrk's Lua summary line is parsed, with its microsecond percentiles", () => {
  const r = parseOutput(fs.readFileSync(path.join(FIX, 'wrk-output.txt'), 'utf8'));
  assert.equal(r.requests, 97201);
  assert.equal(r.latencyUs.p50, 712);
  assert.equal(r.latencyUs.p999, 16011);
  assert.equal(r.errors.status, 3);
  assert.equal(r.wrkReqPerSec, 48600.5);
  assert.throws(() => parseOutput('Running 1s test\n'), /wrk printed no result line/);
});

test('bench summary: medians per scenario, per-round ratios', () => {
  const doc = sampleBenchDoc();
  const uds = doc.summary.find((s) => s.scenario === 'uds');
  assert.equal(uds.rounds, 3);
  assert.equal(uds.reqPerSec.median, 40000);
  assert.equal(uds.reqPerSec.min, 38000);
  const r = doc.ratios.find((x) => x.name === 'uds/stock');
  // Per round: 38/19, 40/20, 42/20 -> 2, 2, 2.1.
  assert.equal(r.reqPerSec.median, 2);
  assert.equal(r.reqPerSec.max, 2.1);
  assert.ok(Math.abs(r.cpuUsPerReq.median - 0.4) < 1e-9);
});

test('the text and Markdown reports carry every scenario and the ratios', () => {
  const doc = sampleBenchDoc();
  const text = benchText(doc);
  const md = toMarkdown(doc);
  for (const s of ['stock', 'tcp', 'uds', 'uds/stock']) {
    assert.match(text, new RegExp(`\\b${s.replace('/', '\\/')}\\b`));
    assert.match(md, new RegExp(`\\| ${s.replace('/', '\\/')} \\|`));
  }
  assert.match(text, /40,000 \(38,000–42,000\)/);
  // The headline: the A/B verdict with the 95% interval over the rounds (per round 2,
  // 2, 2.1: geometric mean 2.03, t with 2 degrees of freedom), a winner named only
  // when the whole interval is past 1; uds/tcp (1.06, 1.08, 1.20) is not resolved.
  const head = /^uds\/stock req\/s 2\.03 \(1\.90–2\.18, 95%\): uds faster than stock$/m;
  assert.match(text, head);
  assert.match(text, /^uds\/tcp req\/s 1\.11 \(0\.94–1\.32, 95%\): not resolved by this run \(interval 0\.94–1\.32 holds 1\.00\)$/m);
  assert.match(toHtml(doc), /<h2>Headline<\/h2>\n<ul class="headline"><li>stock: /);
  assert.match(toHtml(doc), /<li>uds\/stock req\/s 2\.03 \(1\.90–2\.18, 95%\): uds faster than stock<\/li>/);
  // Every report carries the intervals: the ratio tables and the Markdown's verdicts.
  for (const out of [text, md, toHtml(doc)]) assert.match(out, /uds\/stock(<\/td><td>| +| \| )2\.03 \(1\.90–2\.18\)/);
  assert.match(md, /^- uds\/stock req\/s 2\.03 \(1\.90–2\.18, 95%\): uds faster than stock$/m);
  assert.deepEqual(doc.ratios.find((x) => x.name === 'uds/stock').reqPerSec.perRound, [2, 2, 2.1]);
  const one = { ...doc, kind: 'loadtest', results: doc.results.slice(0, 1), warnings: [] };
  // The default view fits 100 columns; --wide adds p99.9 and the rest.
  const lt = loadtestText(one);
  for (const line of lt.split('\n')) assert.ok(line.length <= 100, `${line.length} columns: ${line}`);
  assert.doesNotMatch(lt, /p99\.9 µs/);
  assert.match(loadtestText(one, { wide: true }), /p99\.9 µs/);
});

test('the HTML report is self-contained: inline SVG charts, no scripts, no external URLs', () => {
  const html = toHtml(sampleBenchDoc());
  // Curves at saturation and at the fixed rate, req/s bars, CPU bars.
  assert.equal((html.match(/<svg /g) || []).length, 4);
  assert.match(html, /Latency by percentile at a fixed rate/);
  assert.match(html, /<polyline /);
  assert.doesNotMatch(html, /<script|<link|<img|url\(/i);
  const urls = (html.match(/https?:\/\/[^\s"'<]+/g) || []).filter((u) => !u.startsWith('http://www.w3.org/2000/svg'));
  assert.deepEqual(urls, []);
});

test('nginx-static extends the kit\'s nginx.conf: same settings, the site swapped for return 200', () => {
  const vars = config.resolve({ set: ['tunekit_nginx_worker_connections=2048'] });
  const dir = '/tmp/lt-static-x';
  const out = staticConf(vars, { dir, port: 12345 });
  const kit = createEnv().render('nginx/nginx.conf.j2', vars);
  // Everything up to the http block's includes is the kit's own text.
  const head = kit.slice(0, kit.indexOf('    include ', kit.indexOf('http {')))
    .replace(`pid ${vars.tunekit_nginx_pid_path};`, `pid ${dir}/nginx.pid;`)
    .replace(`error_log ${vars.tunekit_nginx_error_log_path} `, `error_log ${dir}/error.log `);
  assert.equal(out.slice(0, head.length), head);
  assert.match(out, /^ {4}worker_connections 2048;$/m);
  assert.match(out, new RegExp(`^ {4}include ${vars.tunekit_nginx_include_dir}/logging\\.conf;$`, 'm'));
  assert.doesNotMatch(out, /(site|upstream)\.conf;|proxy_pass/);
  const reuseport = vars.tunekit_nginx_reuseport ? ' reuseport' : '';
  assert.match(out, new RegExp(`^ {4}listen 127\\.0\\.0\\.1:12345 default_server backlog=${vars.tunekit_listen_backlog}${reuseport};$`, 'm'));
  assert.ok(out.includes(`return 200 '${BODY}';`));
});

test('options: defaults, and errors that name the flag', () => {
  const o = parse('loadtest', LOADTEST, ['--duration', '3', '--rate', '500']);
  assert.equal(o.duration, 3);
  assert.equal(o.rate, 500);
  assert.equal(o.upstream, 'uds');
  assert.equal(parse('loadtest', LOADTEST, ['--profile', 'stock']).upstream, 'tcp', 'stock implies its TCP upstream');
  assert.throws(() => parse('loadtest', LOADTEST, ['--connections', '0']), /--connections must be a whole number >= 1/);
  assert.throws(() => parse('loadtest', LOADTEST, ['--driver', 'ab']), /--driver must be one of autocannon, wrk/);
  assert.throws(() => parse('bench', BENCH, ['--bogus']), /Unknown option '--bogus'/);
  // The A/B rounds run until their intervals are narrow enough, on fresh stacks each
  // round; the TLS and overload benches take a number (3 by default).
  const benchParse = require('../../bin/commands/bench').parse;
  assert.deepEqual([benchParse([]).rounds, benchParse([]).keepStacks], ['auto', undefined]);
  assert.equal(benchParse(['--https']).rounds, 3);
  assert.equal(benchParse(['--overload']).rounds, 3);
  assert.equal(benchParse(['--rounds', '5', '--keep-stacks']).rounds, 5);
  assert.equal(benchParse(['--keep-stacks']).keepStacks, true);
  const auto = parse('bench', BENCH, ['--rounds', 'auto', '--width', '2', '--budget-s', '600', '--aa']);
  assert.deepEqual([auto.rounds, auto.width, auto.budgetS, auto.maxRounds, auto.aa], ['auto', 2, 600, 20, true]);
  assert.throws(() => parse('bench', BENCH, ['--rounds', 'some']), /--rounds must be a whole number >= 1 \(got "some"\)/);
});

test('the JSON document names its schema and the host', () => {
  const doc = report.document('loadtest', { command: 'x', options: {}, results: [] });
  assert.equal(doc.schema, 'tunekit-loadtest/1');
  assert.equal(typeof doc.host.cores, 'number');
  assert.equal(doc.host.node, process.versions.node);
  // summarise/ratios of nothing are empty, not errors.
  assert.deepEqual(ratios([], []), []);
  assert.deepEqual(summarise([], []), []);
});

test('an A/B verdict follows the interval: a winner only when the whole interval is past 1', () => {
  const { verdict } = require('../../loadtest/table');
  const { interval } = require('../../loadtest/interval');
  const x = (...rounds) => ({ name: 'uds/tcp', reqPerSec: { ci: interval(rounds) } });
  assert.equal(verdict(x(1.15, 1.17, 1.19)), 'uds/tcp req/s 1.17 (1.12–1.22, 95%): uds faster than tcp');
  assert.equal(verdict(x(0.85, 0.87, 0.89)), 'uds/tcp req/s 0.87 (0.82–0.92, 95%): uds slower than tcp');
  // Every round above 1, but three rounds this far apart cannot rule out 1.
  assert.equal(verdict(x(1.02, 1.1, 1.2)), 'uds/tcp req/s 1.10 (0.90–1.35, 95%): not resolved by this run (interval 0.90–1.35 holds 1.00)');
  assert.equal(verdict(x(1.2)), 'uds/tcp req/s 1.20 (one round: no interval): not resolved by this run (one round: no interval; run 3 rounds or more)');
  // The A/A pair: its interval is the run's noise floor.
  assert.equal(verdict({ name: 'aa/uds', reqPerSec: { ci: interval([0.99, 1.01, 1]) } }),
    'aa/uds req/s 1.00 (0.98–1.03, 95%): A/A, the noise floor of this run (±2.5%)');
});

test('wrk\'s request mix: a script cycling through the paths, every byte of a path kept, then the report hook', () => {
  assert.equal(luaString('/a?b=1'), '"/a?b=1"');
  // Quote, backslash and non-ASCII bytes as three-digit escapes: "\0341" is byte 34 then "1".
  assert.equal(luaString('/"x\\1/é'), '"/\\034x\\0921/\\195\\169"');
  const lua = mixScript(['/', '/?items=200']);
  assert.match(lua, /^local paths = \{ "\/", "\/\?items=200" \}$/m);
  assert.match(lua, /^request = function\(\)$/m);
  assert.ok(lua.endsWith(fs.readFileSync(path.join(__dirname, '../../loadtest/wrk-report.lua'), 'utf8')), 'the done() hook that prints the result line');
});
