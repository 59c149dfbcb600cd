'use strict';
// tunekit profile's pure parts on output recorded on this kit's host
// (test/fixtures/profile/): perf script folding with JavaScript frames from
// the perf map, perf trace -s and strace -c tables, ss and netstat, the
// verdict rule and the flame graph.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const P = require('../../profile/parse');
const { decide, ADVICE } = require('../../profile/verdict');
const { toHtml, lines } = require('../../profile/report');
const { document } = require('../../loadtest/report');
const { renderSvg } = require('../../profile/flame');
const { table, requireTools } = require('../../profile/run');
const { identify } = require('../../profile/target');
const { parseStraceC } = require('../../loadtest/syscalls');

const FIX = path.join(__dirname, '../fixtures/profile');
const read = (f) => fs.readFileSync(path.join(FIX, f), 'utf8');

test('perf script: JavaScript frames keep their name and file:line; the hot function leads', () => {
  const { stacks, samples } = P.foldPerfScript(read('perf-script.txt'));
  assert.equal(samples, 17);
  const top = P.topSymbols(stacks);
  assert.deepEqual(top[0], { name: 'hashPassword cpu-app.js:6 [js]', samples: 15, share: 15 / 17, js: true });
  const key = [...stacks.keys()][0];
  assert.match(key, /^node 4242;/);
  assert.match(key, /;handler cpu-app\.js:19 \[js\];hashPassword cpu-app\.js:6 \[js\]$/);
  assert.equal(P.shares(stacks).js, 15 / 17);
});

test('perf script: keep() picks processes; frames classify as js, gc, syscall, native', () => {
  assert.equal(P.foldPerfScript(read('perf-script.txt'), { keep: (pid) => pid === 1 }).samples, 0);
  assert.equal(P.classify('app;main;entry_SYSCALL_64;do_syscall_64;__x64_sys_read'), 'syscall');
  assert.equal(P.classify('app;main;v8::internal::Heap::CollectGarbage;memmove'), 'gc');
  assert.equal(P.classify('app;main;hashPassword a.js:6 [js]'), 'js');
  assert.equal(P.classify('app;main;Builtins_LoadIC'), 'js');
  assert.equal(P.classify('nginx;ngx_http_process_request'), 'native');
  assert.equal(P.frameName('  7f 0x1234 (/usr/sbin/nginx)'), '0x1234');
  assert.equal(P.frameName('\t    55d3 [unknown] (/usr/sbin/nginx)'), '[unknown nginx]');
});

test('perf trace -s: one table per thread, time in seconds', () => {
  const threads = P.parsePerfTraceSummary(read('perf-trace-s.txt'));
  assert.equal(threads.length, 5);
  assert.deepEqual(threads[0].rows.find((r) => r.name === 'accept4'), { name: 'accept4', calls: 6, errors: 0, seconds: 0.000188 });
  assert.equal(threads[0].tid, 11942);
  assert.deepEqual(threads[1].rows.map((r) => r.name), ['futex', 'mprotect', 'madvise', 'munmap', 'mmap', 'openat', 'read', 'close']);
});

test('strace -c: calls, errors, seconds; the table gives per request, time share, µs per call', () => {
  const rows = parseStraceC(read('strace-c.txt'));
  assert.deepEqual(rows[0], { name: 'futex', calls: 321, errors: 6, seconds: 0.68514 });
  assert.deepEqual(rows.find((r) => r.name === 'writev'), { name: 'writev', calls: 3599, errors: 0, seconds: 0.042347 });
  const t = table(rows, { requests: 3599, seconds: 1 });
  assert.equal(t.per, 'request');
  const writev = t.rows.find((r) => r.name === 'writev');
  assert.equal(writev.perUnit, 1);
  assert.equal(writev.errorsPerUnit, 0);
  assert.ok(Math.abs(writev.usPerCall - 11.766) < 0.01);
  assert.ok(Math.abs(writev.timeShare - 0.042347 / 0.759202) < 1e-6);
  // futex is not a socket syscall: counted in the total, not shown as a row.
  assert.equal(t.rows.some((r) => r.name === 'futex'), false);
  assert.equal(table(rows, { requests: 0, seconds: 2 }).per, 'second');
});

test('the syscall table keeps the calls that failed apart: an accept4 that found nothing is not a new connection', () => {
  // Two threads of a worker listening through 32 descriptors: 3 new
  // connections woke all of them, 93 of the 96 accept4 calls found nothing.
  const t = table([
    { name: 'accept4', calls: 60, errors: 58, seconds: 0.0006 },
    { name: 'accept4', calls: 36, errors: 35, seconds: 0.0004 },
    { name: 'read', calls: 250, errors: 50, seconds: 0.002 },
  ], { requests: 200, seconds: 1 });
  const accept4 = t.rows.find((r) => r.name === 'accept4');
  assert.equal(accept4.calls, 96);
  assert.equal(accept4.perUnit, 0.48);
  assert.equal(accept4.errors, 93);
  assert.equal(accept4.calls - accept4.errors, 3);
  assert.equal(accept4.errorsPerUnit, 93 / 200);
  assert.equal(t.rows.find((r) => r.name === 'read').errorsPerUnit, 0.25);
});

test('ss -l and /proc/net/netstat', () => {
  const ss = 'Netid State  Recv-Q Send-Q Local Address:Port Peer Address:Port\n' +
    'u_str LISTEN 5      4      /tmp/x/app.sock 12345            * 0\n' +
    'u_str ESTAB  0      0      /tmp/x/app.sock 12346            * 12347\n';
  assert.deepEqual(P.parseSsListen(ss), [{ local: '/tmp/x/app.sock', recvQ: 5, sendQ: 4 }]);
  const tcp = 'State  Recv-Q Send-Q Local Address:Port  Peer Address:Port\nLISTEN 0      511        127.0.0.1:8080       0.0.0.0:*\n';
  assert.deepEqual(P.parseSsListen(tcp), [{ local: '127.0.0.1:8080', recvQ: 0, sendQ: 511 }]);
  const ns = 'TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 7 9\nIpExt: InNoRoutes\nIpExt: 3\n';
  assert.deepEqual(P.parseNetstat(ns), { TcpExt: { SyncookiesSent: 0, ListenOverflows: 7, ListenDrops: 9 }, IpExt: { InNoRoutes: 3 } });
});

const calm = { queues: [{ local: '/s', recvQ: 0, sendQ: 511, maxRecvQ: 3 }], tcpDelta: { ListenOverflows: 0, ListenDrops: 0 }, coreShare: { nginx: 0.2, app: 0.5 } };

test('verdict: the first rule that holds wins, in the documented order', () => {
  const jsHeavy = { js: 0.8, gc: 0.05, syscall: 0.1, native: 0.05 };
  const top = [{ name: 'hashPassword a.js:6 [js]', share: 0.7, js: true }, { name: 'memcpy', share: 0.1, js: false }];
  // A full queue beats everything, even a JavaScript-heavy profile.
  const q = decide({ ...calm, queues: [{ local: '/s', recvQ: 0, sendQ: 4, maxRecvQ: 5 }], appShares: jsHeavy, appTop: top });
  assert.equal(q.verdict, 'queue-bound');
  assert.deepEqual(q.evidence, ['accept queue of /s full: Recv-Q reached 5 of a backlog of 4']);
  assert.equal(decide({ ...calm, tcpDelta: { ListenOverflows: 2, ListenDrops: 2 }, appShares: jsHeavy }).verdict, 'queue-bound');
  // nginx saturated while the app is not.
  assert.equal(decide({ ...calm, coreShare: { nginx: 0.95, app: 0.3 }, appShares: jsHeavy }).verdict, 'proxy-bound');
  const app = decide({ ...calm, appShares: jsHeavy, appTop: top });
  assert.equal(app.verdict, 'app-bound');
  assert.deepEqual(app.evidence, ['JavaScript 80% + GC 5% of the app workers\' samples', 'hottest functions: hashPassword a.js:6 (70%)']);
  assert.equal(decide({ ...calm, appShares: { js: 0.2, gc: 0, syscall: 0.6, native: 0.2 } }).verdict, 'transport-bound');
  assert.equal(decide({ ...calm, appShares: { js: 0.3, gc: 0.1, syscall: 0.3, native: 0.3 } }).verdict, 'undetermined');
  // Recv-Q one below the backlog is not full.
  assert.equal(decide({ ...calm, queues: [{ local: '/s', recvQ: 0, sendQ: 4, maxRecvQ: 3 }], appShares: jsHeavy }).verdict, 'app-bound');
});

test('verdict: generator-bound when the generator out-works every server worker, from the measured CPU shares', () => {
  const mixed = { js: 0.35, gc: 0.02, syscall: 0.25, native: 0.38 };
  // The figures of a --demo run where nothing on the server side was busy:
  // nginx's workers at 32% of a core, the app's at 20%, autocannon at 98%.
  const g = decide({ ...calm, coreShare: { nginx: 0.32, app: 0.2 }, appShares: mixed, generatorCore: 0.98 });
  assert.equal(g.verdict, 'generator-bound');
  assert.deepEqual(g.evidence, ['the load generator\'s busiest process at 98% of a core (saturated); nginx workers at 32% of a core each, app workers at 20%: nothing on the server side is saturated']);
  assert.match(g.advice, /--pid\/--unit\/--app-config while the load comes from another host/);
  // The same run on a machine shared with other work: every share lower, the verdict holds.
  const shared = decide({ ...calm, coreShare: { nginx: 0.2, app: 0.12 }, appShares: mixed, generatorCore: 0.6 });
  assert.equal(shared.verdict, 'generator-bound');
  assert.doesNotMatch(shared.evidence[0], /saturated\)/);
  // A starved machine (seen here: a CPU-bound app's workers at 2% of a core, the
  // generator at 5%, other tenants holding the cores): the generator is no limit there.
  const starved = decide({ ...calm, coreShare: { nginx: 0, app: 0.02 }, appShares: { js: 0.8, gc: 0.05, syscall: 0.1, native: 0.05 }, generatorCore: 0.05 });
  assert.equal(starved.verdict, 'app-bound');
  // Nothing busy, the cores held by others (seen here: nginx 12%, app 9%, the generator 35%).
  const busy = decide({ ...calm, coreShare: { nginx: 0.12, app: 0.09 }, appShares: mixed, generatorCore: 0.35, machine: { cores: 2, otherCores: 1.4 } });
  assert.equal(busy.verdict, 'undetermined');
  assert.deepEqual(busy.evidence.slice(1), ['nginx workers at 12% of a core each, app workers at 9%, the load generator at 35%',
    'other processes kept 1.4 of 2 cores busy meanwhile: on a machine this shared, run it again when it is quieter']);
  assert.equal(decide({ ...calm, coreShare: { nginx: 0.12, app: 0.09 }, appShares: mixed, generatorCore: 0.35, machine: { cores: 2, otherCores: 0.2 } }).evidence.length, 2);
  // A busy app worker (half the generator's CPU or more) is the server's limit to read.
  const jsHeavy = { js: 0.8, gc: 0.05, syscall: 0.1, native: 0.05 };
  assert.equal(decide({ ...calm, coreShare: { nginx: 0.1, app: 0.5 }, appShares: jsHeavy, generatorCore: 0.98 }).verdict, 'app-bound');
  assert.equal(decide({ ...calm, coreShare: { nginx: 0.1, app: 0.5 }, appShares: mixed, generatorCore: 0.98 }).verdict, 'undetermined');
  // A saturated nginx is proxy-bound, whatever the generator did; a full queue beats both.
  assert.equal(decide({ ...calm, coreShare: { nginx: 0.95, app: 0.2 }, appShares: mixed, generatorCore: 2 }).verdict, 'proxy-bound');
  assert.equal(decide({ ...calm, tcpDelta: { ListenOverflows: 1, ListenDrops: 1 }, coreShare: { nginx: 0.1, app: 0.1 }, generatorCore: 1 }).verdict, 'queue-bound');
  // No load sent (--pid, --unit, --app-config): no generator to blame.
  const idle = decide({ ...calm, coreShare: { nginx: 0.01, app: 0.01 }, appShares: mixed });
  assert.equal(idle.verdict, 'undetermined');
  assert.deepEqual(idle.evidence[1], 'nginx workers at 1% of a core each, app workers at 1%');
});

test('verdict: every verdict carries its advice', () => {
  const jsHeavy = { js: 0.8, gc: 0.05, syscall: 0.1, native: 0.05 };
  const cases = [
    { ...calm, tcpDelta: { ListenOverflows: 1, ListenDrops: 0 } },
    { ...calm, coreShare: { nginx: 0.95, app: 0.2 } },
    { ...calm, coreShare: { nginx: 0.2, app: 0.2 }, generatorCore: 0.9 },
    { ...calm, appShares: jsHeavy },
    { ...calm, appShares: { js: 0.2, gc: 0, syscall: 0.6, native: 0.2 } },
    { ...calm, appShares: { js: 0.3, gc: 0.1, syscall: 0.3, native: 0.3 } },
  ];
  const verdicts = cases.map((c) => decide(c));
  assert.deepEqual(verdicts.map((v) => v.verdict), Object.keys(ADVICE));
  for (const v of verdicts) assert.equal(v.advice, ADVICE[v.verdict]);
  assert.deepEqual(lines({ ...RESULT, verdict: verdicts[2] }).slice(0, 3), ['verdict: generator-bound', `  - ${verdicts[2].evidence[0]}`, `  advice: ${ADVICE['generator-bound']}`]);
});

// A profile result as profile() and the verdict make it (figures from a --demo run).
const RESULT = {
  verdict: decide({ ...calm, coreShare: { nginx: 0.32, app: 0.2 }, generatorCore: 0.98 }),
  slowdown: { 'perf record': 1.1, 'perf trace': 0.29, strace: 0.33 },
  tracer: 'strace',
  syscalls: { strace: {
    nginx: { per: 'request', totalCalls: 62336, perUnit: 5.29, rows: [{ name: 'writev', calls: 11780, perUnit: 1, errors: 236, errorsPerUnit: 0.02, timeShare: 0.2, usPerCall: 12.5 }] },
    app: { per: 'request', totalCalls: 40000, perUnit: 3.4, rows: [{ name: 'read', calls: 11780, perUnit: 1, timeShare: 0.3, usPerCall: 8 }] },
  } },
  folded: { app: 120, nginx: 80 },
  shares: { app: { js: 0.35, gc: 0.02, syscall: 0.25, native: 0.38 }, nginx: { js: 0, gc: 0, syscall: 0.6, native: 0.4 } },
  top: { app: [{ name: 'handler <x> [js]', share: 0.2, js: true }], nginx: [{ name: '[unknown nginx]', share: 0.5, js: false }] },
  queues: [{ local: '/run/app.sock', recvQ: 0, sendQ: 4096, maxRecvQ: 2 }],
  tcpDelta: { ListenOverflows: 0, ListenDrops: 0 },
  doctor: [],
  warnings: ['a note'],
};

test('HTML report: the kit\'s report page, the verdict with its advice, tables, the flame graph embedded, text escaped', () => {
  const doc = document('profile', { command: 'tunekit profile --demo', options: {}, results: RESULT });
  const html = toHtml(doc, renderSvg(new Map([['app;handler [js]', 3]])));
  // The loadtest report's page: its style sheet, no <pre> dump.
  assert.match(html, /^<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>tunekit profile report<\/title>\n<style>\nbody\{font:14px/);
  assert.doesNotMatch(html, /<pre>/);
  assert.match(html, /<p class="verdict">verdict: <strong>generator-bound<\/strong><\/p>/);
  assert.ok(html.includes(`<p><strong>advice:</strong> ${ADVICE['generator-bound']}</p>`));
  assert.match(html, /<h2>Flame graph<\/h2>[\s\S]*<svg xmlns/);
  assert.match(html, /<tr><td>nginx<\/td><td>writev<\/td><td>11780<\/td><td>1\.00<\/td><td>0\.02<\/td><td>20\.0%<\/td><td>12\.5<\/td><\/tr>/);
  assert.match(html, /<td>handler &lt;x&gt; \[js\]<\/td>/);
  assert.match(html, /<tr><td>\/run\/app\.sock<\/td><td>2<\/td><td>4096<\/td><\/tr>/);
  assert.match(html, /<h2>Notes<\/h2>\n<ul><li>a note<\/li><\/ul>/);
});

test('flame graph: an SVG whose boxes name the frames, widths by samples', () => {
  const svg = renderSvg(new Map([['app;handler [js];hashPassword <x> [js]', 3], ['app;handler [js];send', 1]]));
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.match(svg, /<title>hashPassword &lt;x&gt; \[js\] \(3 samples, 75.0%\)<\/title><rect x="0.0" y="\d+" width="900.0"/);
  assert.match(svg, /<title>send \(1 samples, 25.0%\)<\/title><rect x="900.0"/);
  assert.match(svg, /\(4 samples\)<\/text>/);
});

test('a missing tool is refused with the command that installs it', () => {
  assert.throws(() => requireTools({ perf: '/nonexistent/perf', strace: 'strace' }), /perf not found \(\/nonexistent\/perf\); install it with: apt-get install -y linux-perf/);
  assert.throws(() => requireTools({ perf: 'perf', strace: '/nonexistent/strace' }), /strace not found .*apt-get install -y strace/);
});

test('a pid that is not the kit\'s is refused', () => {
  assert.throws(() => identify(process.pid), new RegExp(`pid ${process.pid} \\(.*\\) is not the kit's`));
  assert.throws(() => identify(1 << 30), /no such process/);
});
