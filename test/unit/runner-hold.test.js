'use strict';
// The held queue's rule (app/hold.js) on made-up arrivals: a burst that drains is
// never refused, a queue that keeps growing turns the short budget on, and it
// turns off again once nothing has been refused for a while. Each scenario runs
// one worker at a fixed service rate, one made-up millisecond at a time.
const test = require('node:test');
const assert = require('node:assert/strict');
const { createHold } = require('../../app/hold');

/**
 * One made-up millisecond of a worker with `credit` requests' worth of time:
 * takes from the queue while it lasts (a refused one costs none); returns the
 * credit left (none once the queue is empty).
 */
function serve(hold, t, credit, on) {
  while (credit >= 1) {
    const next = hold.take(t);
    if (next === undefined) return 0;
    if (next.refuse) {
      on.refused(next);
      continue;
    }
    credit -= 1;
    on.served(next);
  }
  return credit;
}

/**
 * Feed `arrivalsAt(ms)` requests each millisecond to a worker that serves
 * `servePerS` a second, FIFO; returns what happened to each request.
 */
function simulate({ hold, durationMs, arrivalsAt, servePerS }) {
  const out = { served: 0, refusedOnArrival: 0, refusedInQueue: 0, waits: [], switched: [], refusedAt: [] };
  let credit = 0;
  let was = false;
  let id = 0;
  for (let t = 0; t < durationMs; t++) {
    for (let k = arrivalsAt(t); k > 0; k--) {
      id += 1;
      if (hold.arrive(id, t, t)) {
        out.refusedOnArrival += 1;
        out.refusedAt.push(t);
      }
    }
    credit = serve(hold, t, credit + servePerS / 1000, {
      refused() {
        out.refusedInQueue += 1;
        out.refusedAt.push(t);
      },
      served(next) {
        out.served += 1;
        out.waits.push(next.waited);
      },
    });
    if (hold.sustained !== was) {
      out.switched.push(t); // on, off, on, ...
      was = hold.sustained;
    }
  }
  return out;
}

// An even rate: `perS` requests a second spread over the milliseconds.
const even = (perS) => (t) => Math.floor(((t + 1) * perS) / 1000) - Math.floor((t * perS) / 1000);
const p99 = (xs) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.99) - 1];

const CAPACITY = 400; // a second, the worker's
const options = { sustainedAfterS: 3, sustainedBudgetMs: 20 };

test('a burst of 10x the capacity for 1 s over 0.5x is absorbed whole: nothing refused, whatever the samples\' phase', () => {
  for (const phase of [0, 250, 500, 750, 999]) {
    const burstAt = 5000 + phase;
    const base = even(CAPACITY / 2);
    const burst = even(CAPACITY * 10);
    const hold = createHold(options);
    const r = simulate({ hold, durationMs: 40_000, servePerS: CAPACITY, arrivalsAt: (t) => (t >= burstAt && t < burstAt + 1000 ? burst(t) : base(t)) });
    assert.equal(r.refusedOnArrival + r.refusedInQueue, 0, `phase ${phase}: nothing refused`);
    assert.ok(Math.max(...r.waits) > 5000, `phase ${phase}: the burst waited its turn (longest wait ${Math.max(...r.waits)} ms), it was not refused`);
    assert.ok(hold.length <= 1, 'the queue drained');
  }
});

test('a sustained 2x turns the short budget on within a few seconds; then the served wait stays near it and the rest is refused as it arrives', () => {
  const hold = createHold(options);
  const r = simulate({ hold, durationMs: 60_000, servePerS: CAPACITY, arrivalsAt: even(CAPACITY * 2) });
  assert.equal(r.switched.length, 1, 'on once, never off while it lasted');
  assert.ok(r.switched[0] <= 5000, `sustained from ${r.switched[0]} ms (the queue grew for 3 samples)`);
  const late = r.waits.slice(Math.floor(r.waits.length / 4));
  assert.ok(p99(late) <= 21, `served wait p99 ${p99(late)} ms after the first quarter, within the 20 ms budget`);
  assert.ok(r.served >= CAPACITY * 59, `the worker stayed busy: served ${r.served} of ${CAPACITY * 60}`);
  assert.ok(r.refusedOnArrival > r.refusedInQueue * 10, `most refusals on arrival (${r.refusedOnArrival}), not after a wait (${r.refusedInQueue})`);
});

test('after the overload, the short budget turns off once nothing was refused for sustainedAfterS seconds, and a later burst is absorbed again', () => {
  const hold = createHold(options);
  const over = even(CAPACITY * 2);
  const calm = even(CAPACITY / 2);
  const burst = even(CAPACITY * 10);
  const r = simulate({
    hold, durationMs: 50_000, servePerS: CAPACITY,
    arrivalsAt: (t) => (t < 20_000 ? over(t) : t >= 30_000 && t < 31_000 ? burst(t) : calm(t)),
  });
  const lastRefusal = Math.max(...r.refusedAt);
  assert.ok(lastRefusal < 20_100, `no refusal once the load fell to 0.5x (last at ${lastRefusal} ms)`);
  assert.equal(r.switched.length, 2, 'on once, off once');
  assert.ok(r.switched[1] - lastRefusal >= 3000 && r.switched[1] - lastRefusal <= 4000, `off again 3-4 s after the last refusal (at ${r.switched[1]} ms)`);
  assert.ok(r.refusedAt.every((t) => t < 30_000), 'the burst at 30 s was not refused');
});

test('a worker below its capacity never turns it on; a slow growth (1.1x) does, once its queue stands a second', () => {
  const calm = createHold(options);
  const r = simulate({ hold: calm, durationMs: 30_000, servePerS: CAPACITY, arrivalsAt: even(CAPACITY * 0.95) });
  assert.equal(r.switched.length, 0);
  assert.equal(r.refusedOnArrival + r.refusedInQueue, 0);
  const slow = createHold(options);
  const s = simulate({ hold: slow, durationMs: 30_000, servePerS: CAPACITY, arrivalsAt: even(CAPACITY * 1.1) });
  // 1.1x adds 0.1 s of waiting a second: on once the queue holds a second of it.
  assert.ok(s.switched.length >= 1 && s.switched[0] >= 9000 && s.switched[0] <= 14_000, `sustained from ${s.switched[0]} ms`);
});

test('near the capacity, a queue that grows for seconds but stands short is not a sustained overload', () => {
  // The machine slows a tenth for 5 s at 0.95x: the queue grows at every sample,
  // to about 0.3 s of waiting.
  const hold = createHold(options);
  const r = simulate({ hold, durationMs: 30_000, servePerS: CAPACITY, arrivalsAt: (t) => even(t >= 10_000 && t < 15_000 ? CAPACITY * 0.95 / 0.9 : CAPACITY * 0.95)(t) });
  assert.ok(Math.max(...r.waits) > 100, `the queue stood (longest wait ${Math.max(...r.waits)} ms)`);
  assert.equal(r.switched.length, 0, 'never sustained');
  assert.equal(r.refusedOnArrival + r.refusedInQueue, 0);
});

/**
 * Clients that each send their next request as soon as the last is served, and
 * after `retryAfterMs` when it was refused (503 with Retry-After): a closed
 * population, all of them sending at `fromMs`.
 */
function simulateClosed({ hold, durationMs, clients, fromMs, servePerS, retryAfterMs }) {
  const due = new Map([[fromMs, clients]]);
  const later = (t) => due.set(t, (due.get(t) || 0) + 1);
  const out = { served: 0, refused: 0, waits: [], switched: [] };
  let credit = 0;
  let was = false;
  for (let t = 0; t < durationMs; t++) {
    for (let k = due.get(t) || 0; k > 0; k--) {
      if (hold.arrive(t, t, t)) {
        out.refused += 1;
        later(t + retryAfterMs);
      }
    }
    due.delete(t);
    credit = serve(hold, t, credit + servePerS / 1000, {
      refused() {
        out.refused += 1;
        later(t + retryAfterMs);
      },
      served(next) {
        out.served += 1;
        out.waits.push(next.waited);
        later(t + 1);
      },
    });
    if (hold.sustained !== was) {
      out.switched.push(t);
      was = hold.sustained;
    }
  }
  return out;
}

test('a crowd that stays (each client sends again when answered) holds the queue at its length: sustained too, and the wait falls to the short budget', () => {
  // 2,000 clients at once against 400 a second: the queue stands at 2,000, 5 s
  // of waiting, and never grows again. A rule that needed growth at every
  // sample never turned on: every one of them waited 5 s for as long as they stayed.
  const hold = createHold(options);
  const r = simulateClosed({ hold, durationMs: 40_000, clients: 2000, fromMs: 1000, servePerS: CAPACITY, retryAfterMs: 1000 });
  assert.ok(r.switched.length >= 1, `sustained (switched at ${JSON.stringify(r.switched)}); ${r.refused} refused, served wait p99 ${p99(r.waits)} ms`);
  assert.ok(r.switched[0] <= 6000, `sustained from ${r.switched[0]} ms: the queue held for 3 samples`);
  const late = r.waits.slice(Math.floor(r.waits.length / 2));
  assert.ok(p99(late) <= 25, `served wait p99 ${p99(late)} ms in the second half, near the 20 ms budget`);
  assert.ok(r.served >= CAPACITY * 38, `the worker stayed busy: served ${r.served}`);
});

test('the same crowd sent once, without coming back, drains: never sustained, nothing refused', () => {
  const hold = createHold(options);
  const r = simulate({ hold, durationMs: 20_000, servePerS: CAPACITY, arrivalsAt: (t) => (t === 1000 ? 2000 : 0) });
  assert.equal(r.switched.length, 0);
  assert.equal(r.refusedOnArrival + r.refusedInQueue, 0);
  assert.equal(r.served, 2000);
});

test('a held queue needs both settings', () => {
  assert.throws(() => createHold({ sustainedAfterS: 0, sustainedBudgetMs: 20 }), /sustainedAfterS >= 1/);
  assert.throws(() => createHold({ sustainedAfterS: 3, sustainedBudgetMs: 0 }), /sustainedBudgetMs >= 1/);
});
