'use strict';
// The grid's confirmation rounds (loadtest/tune-grid.js): every arm measured in each
// round, a round that missed the objective counted as 0 req/s, and the printed line
// saying so, with what the missed rounds saw, instead of an unexplained "0 req/s".
// The grid against real stacks is run by hand (docs/tuning.md); this is its bookkeeping.

const test = require('node:test');
const assert = require('node:assert/strict');
const { confirmTop, topLine } = require('../../loadtest/tune-grid');

// Arms that answer from a script: per arm, one run per round in order.
function scriptedIo(script) {
  const opened = [];
  const closed = [];
  let next = 0;
  return {
    opened, closed,
    progress() {},
    async open(values) {
      const arm = { id: next++, values, runs: [...script[values.name]] };
      opened.push(arm.id);
      return arm;
    },
    async measure(arm) {
      return arm.runs.shift();
    },
    async close(arm) {
      closed.push(arm.id);
    },
  };
}

const clean = (rps) => ({ value: rps, meets: true, p99Us: 2000, result: { errors: 0, non2xx: 0 } });
const reset = (rps, errors) => ({ value: rps, meets: false, p99Us: 9000, result: { errors, non2xx: 0 } });

test('a round that missed the objective counts as 0 and the line says how many missed and why', async () => {
  const io = scriptedIo({
    good: [clean(30000), clean(31000), clean(32000)],
    flaky: [reset(29000, 512), clean(31226), reset(28000, 300)],
  });
  const top = await confirmTop([
    { values: { name: 'flaky' }, label: 'workers 1' },
    { values: { name: 'good' }, label: 'workers 2' },
  ], io, { rounds: 3 });

  assert.deepEqual(top.map((t) => t.label), ['workers 2', 'workers 1'], 'sorted by the median of the rounds');
  const flaky = top[1];
  assert.deepEqual(flaky.rounds, [0, 31226, 0]);
  assert.equal(flaky.reqPerSec.median, 0);
  assert.equal(flaky.missed.length, 2);
  assert.equal(topLine(flaky),
    '  workers 1: 0 req/s (0–31226) over 3 rounds; 2 of 3 missed the objective (812 failed requests, 0 non-2xx answers) and count as 0 req/s');
  assert.equal(topLine(top[0]), '  workers 2: 31000 req/s (30000–32000) over 3 rounds');
  assert.deepEqual([...io.closed].sort(), [...io.opened].sort(), 'every arm opened is closed');
});

test('a missed round with no failed request and nothing answered says so', () => {
  const line = topLine({ label: 'pool 1', reqPerSec: { median: 0, min: 0, max: 0, n: 1 },
    missed: [{ reqPerSec: 0, errors: 0, non2xx: 0, p99Us: null }] });
  assert.match(line, /1 of 1 missed the objective \(no request answered\)/);
});

test('an arm is closed when a measurement throws', async () => {
  const io = scriptedIo({ a: [clean(1)], b: [] });
  io.measure = async (arm) => {
    if (arm.values.name === 'b') throw new Error('stack died');
    return clean(1);
  };
  await assert.rejects(confirmTop([{ values: { name: 'a' }, label: 'a' }, { values: { name: 'b' }, label: 'b' }], io, { rounds: 1 }), /stack died/);
  assert.deepEqual([...io.closed].sort(), [0, 1]);
});
