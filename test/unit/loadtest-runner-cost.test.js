'use strict';
// loadtest/runner-cost.js: its options (--instructions and what it refuses) and
// the reading of callgrind's dumps (what a run counts, what it waits for).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs, newDumps, summarise, netInstructions } = require('../../loadtest/runner-cost');

test('--instructions: flat out by default, refuses a rate and another checkout\'s stack', () => {
  const o = parseArgs(['--instructions', '--rounds', '4', '--requests', '10000']);
  assert.equal(o.instructions, true);
  assert.equal(o.rate, 0, 'the rate is 0 (flat out) unless given');
  assert.equal(o.rounds, 4);
  assert.equal(parseArgs([]).rate, 2000, 'without it, the fixed rate stays');
  assert.throws(() => parseArgs(['--instructions', '--rate', '2000']), /--instructions sends flat out .*drop --rate/);
  assert.throws(() => parseArgs(['--instructions', '--scenarios', 'uds@/tmp/before,bare']), /--instructions: NAME@DIR is not supported/);
  assert.throws(() => parseArgs(['--frobnicate']), /unknown option --frobnicate/);
});

test('callgrind dumps: each read once, by pid, a dump still being written (no totals line yet) left for later', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runner-cost-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const dump = (name, totals) => fs.writeFileSync(path.join(dir, name), `version: 1\ncreator: callgrind-3.19.0\n${totals == null ? '' : `summary: ${totals}\ntotals: ${totals}\n`}`);
  dump('cg.100.1', 5000);
  dump('cg.101.1', 7000);
  dump('cg.102.1', null); // being written
  dump('cg.100', 99); // the exit dump: not a counted window
  const seen = new Set();
  assert.deepEqual(newDumps(dir, seen), { 100: 5000, 101: 7000 });
  assert.deepEqual(newDumps(dir, seen), {}, 'a dump is counted once');
  dump('cg.102.1', 3000);
  dump('cg.100.2', 6000);
  assert.deepEqual(newDumps(dir, seen), { 100: 6000, 102: 3000 });
});

test('instructions summary: medians per scenario and the per-round ratio to the last scenario with its interval', () => {
  const row = (round, scenario, ir) => ({ round, scenario, appIrPerReq: ir, workersIrPerReq: ir, primaryIrPerReq: 0, otherIrPerReq: 0, idleIrShare: 0.002, errors: 0, non2xx: 0 });
  const rows = [
    row(0, 'uds', 77000), row(0, 'bare', 75000),
    row(1, 'uds', 77500), row(1, 'bare', 75200),
    row(2, 'uds', 76800), row(2, 'bare', 74900),
  ];
  const { lines, ratios } = summarise(rows, ['uds', 'bare'], { instructions: true });
  assert.match(lines[0], /^uds +app instructions\/req 77000 /);
  const r = ratios['uds/bare appIrPerReq'];
  assert.deepEqual(r.perRound.map((x) => x.toFixed(4)), ['1.0267', '1.0306', '1.0254']);
  assert.ok(r.ci.low > 1 && r.ci.high < 1.04, JSON.stringify(r.ci));
  assert.ok(!('uds/bare appUsPerReq' in ratios), 'no CPU-time ratio in an instructions run');
});

test('a run\'s instructions per request: each process\'s timers (its idle rate times the run\'s seconds) taken off, by role', () => {
  const run = { requests: 1000, seconds: 10, roles: { primary: [1], workers: [2, 3], other: [4] }, byPid: { 1: 2_000_000, 2: 40_000_000, 3: 40_500_000, 4: 100_000 } };
  const idle = { 1: 150_000, 2: 20_000, 3: 20_000, 4: 10_000 };
  const n = netInstructions(run, idle);
  assert.equal(n.primaryIrPerReq, 500, '2,000,000 - 150,000 x 10 s, over 1,000 requests');
  assert.equal(n.workersIrPerReq, 80_100);
  assert.equal(n.otherIrPerReq, 0);
  assert.equal(n.appIrPerReq, 80_600);
  assert.equal(n.idleIrShare, 2_000_000 / 82_600_000);
});
