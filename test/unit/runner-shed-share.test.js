'use strict';
// The share of requests nginx refuses while an overload counts as sustained
// (app/shed-share.js): the rule on made-up reports, the whole loop (nginx's
// share, the held queue, the primary's once-a-second update) on made-up
// milliseconds, and the directory nginx tests, on a real file system.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { createHold } = require('../../app/hold');
const { nextShare, shareDuring, reportOf, openShedDir, BUCKETS, HEADROOM, MAX_SHARE, STALE_MS } = require('../../app/shed-share');

const report = (over) => ({ at: 10_000, sustained: true, arrived: 500, windowMs: 1000, perRequestMs: 4, ...over });
const off = { active: false, shares: [] };
const at = (share, since = 0) => ({ active: true, shares: [{ at: since, share }] });

test('nginx refuses what the workers cannot serve, less the headroom their own rule refuses', () => {
  // Two workers, 500 arrivals a second each, 4 ms a request: 1000 offered, 500 served.
  const reports = new Map([[1, report()], [2, report()]]);
  const next = nextShare(reports, off, 10_500);
  assert.equal(next.active, true);
  assert.equal(next.offered, 1000);
  assert.equal(next.capacity, 500);
  assert.equal(next.share, Math.floor((1 - (HEADROOM * 500) / 1000) * BUCKETS) / BUCKETS);
  // Under that share the workers see fewer arrivals; the offered load is the same,
  // and so is the share.
  const seen = Math.round(1000 * (1 - next.share)) / 2;
  const again = nextShare(new Map([[1, report({ arrived: seen })], [2, report({ arrived: seen })]]), next, 10_900);
  assert.ok(Math.abs(again.offered - 1000) < 2, `offered ${again.offered}`);
  assert.ok(Math.abs(again.share - next.share) <= 1 / BUCKETS, `${again.share} vs ${next.share}`);
});

test('workers given uneven parts of the load: the share is the one the busiest needs, as nginx refuses evenly', () => {
  // The kernel gave worker 1 two thirds of the connections: 400 arrivals a second
  // where it serves 300; worker 2 has 200 for its 300. In sum the two keep up,
  // but worker 1 alone would refuse 100 a second on its own core.
  const reports = new Map([[1, report({ arrived: 400, servesPerS: 300 })], [2, report({ arrived: 200, servesPerS: 300 })]]);
  const next = nextShare(reports, off, 10_500);
  assert.deepEqual([next.offered, next.capacity], [600, 600]);
  assert.equal(next.share, Math.floor((1 - (HEADROOM * 300) / 400) * BUCKETS) / BUCKETS);
  // Evenly loaded, the same arrivals in sum need nothing refused.
  const even = nextShare(new Map([[1, report({ arrived: 300, servesPerS: 300 })], [2, report({ arrived: 300, servesPerS: 300 })]]), off, 10_500);
  assert.equal(even.share, 0);
});

test('the share falls to 0 as soon as the offered load is under what the workers serve, and stops once no worker counts as sustained', () => {
  const state = at(0.5);
  // 2 x 100 arrivals a second under a share of 0.5: 400 offered, 500 served.
  const lower = nextShare(new Map([[1, report({ arrived: 100 })], [2, report({ arrived: 100 })]]), state, 10_500);
  assert.deepEqual([lower.active, lower.share], [true, 0]);
  // The workers' overload still counts as sustained: it stays on, at 0.
  const still = nextShare(new Map([[1, report({ arrived: 200, at: 11_600 })]]), lower, 11_700);
  assert.deepEqual([still.active, still.share], [true, 0]);
  const none = nextShare(new Map([[1, report({ arrived: 200, at: 12_600, sustained: false })]]), still, 12_700);
  assert.deepEqual([none.active, none.share], [false, 0]);
  // A share above 0 keeps it on after the workers' overload stops counting as
  // sustained: nginx refuses the excess now, so the workers have nothing to refuse.
  const held = nextShare(new Map([[1, report({ sustained: false, arrived: 600 })]]), at(0.5), 10_500);
  assert.equal(held.active, true);
  assert.ok(held.share > 0.5, `${held.share}`);
});

test('stale reports, no measured time per request, and the cap', () => {
  // A worker that has not reported for STALE_MS (exited, stuck) is left out.
  const stale = new Map([[1, report({ at: 0 })]]);
  const none = nextShare(stale, off, STALE_MS + 1);
  assert.deepEqual([none.active, none.share, none.offered, none.capacity], [false, 0, null, null]);
  // No time per request measured yet: the share stays as it is.
  const unknown = nextShare(new Map([[1, report({ perRequestMs: 0 })]]), at(0.25), 10_500);
  assert.equal(unknown.share, 0.25);
  // 100x the capacity: never every request, some must reach the workers to be measured.
  const flood = nextShare(new Map([[1, report({ arrived: 25_000 })]]), off, 10_500);
  assert.equal(flood.share, MAX_SHARE);
  assert.deepEqual(nextShare(new Map(), off, 10_500).share, 0);
});

/**
 * Made-up milliseconds: `offeredAt(t)` requests a second reach nginx, which
 * refuses those whose bucket (a permutation of 0..255, like $request_id's random
 * last byte) has a file; the rest join one worker's held queue, served at
 * `capacityAt(t)` a second (500); the primary updates the share at each of the worker's
 * reports (once a second). `seenBusy`: the share of its busy time the worker's
 * loop reads as busy (below 1 when it shares its core with nginx: it waits for the
 * core, not for work). Returns per-second counts.
 */
function loop({ durationMs, offeredAt, capacityAt = () => 500, seenBusy = 1 }) {
  const reports = new Map();
  let state = { active: false, shares: [] };
  const hold = createHold({
    sustainedAfterS: 3, sustainedBudgetMs: 20,
    onSample: (s) => {
      // The loop was busy while it served, at the capacity of each millisecond.
      reports.set(1, reportOf({ ...s, utilization: Math.min(1, (seenBusy * busyMs) / s.windowMs) }, reports.get(1), now));
      busyMs = 0;
      state = nextShare(reports, state, now);
    },
  });
  const seconds = [];
  let now = 0;
  let credit = 0;
  let offered = 0;
  let arrivalN = 0;
  let busyMs = 0;
  for (; now < durationMs; now++) {
    const share = state.share || 0;
    const sec = seconds[Math.floor(now / 1000)] || (seconds[Math.floor(now / 1000)] = { nginx: 0, worker: 0, served: 0, share, waits: [] });
    offered += offeredAt(now) / 1000;
    for (; offered >= 1; offered -= 1) {
      arrivalN += 1;
      if ((arrivalN * 157) % BUCKETS < Math.floor(share * BUCKETS)) {
        sec.nginx += 1;
      } else if (hold.arrive(arrivalN, now, now)) {
        sec.worker += 1;
      }
    }
    credit += capacityAt(now) / 1000;
    while (credit >= 1) {
      const next = hold.take(now);
      if (next === undefined) {
        credit = 0;
        break;
      }
      if (next.refuse) {
        sec.worker += 1;
        continue;
      }
      credit -= 1;
      busyMs += 1000 / capacityAt(now);
      sec.served += 1;
      sec.waits.push(next.waited);
    }
  }
  return seconds;
}

for (const seenBusy of [1, 0.85]) {
  test(`the whole loop, its loop reading ${seenBusy} of its busy time: at 2x, once sustained, nginx takes nearly all the refusals and the worker serves its capacity with a short wait; at 0.5x after it, nothing is refused within 2 s`, () => {
    const seconds = loop({ durationMs: 30_000, offeredAt: (t) => (t < 20_000 ? 1000 : 250), seenBusy });
    const steady = seconds.slice(10, 20);
    const sum = (xs, k) => xs.reduce((a, s) => a + s[k], 0);
    const nginx = sum(steady, 'nginx');
    const worker = sum(steady, 'worker');
    const served = sum(steady, 'served');
    assert.ok(nginx > 9 * worker, `nginx refused ${nginx}, the worker ${worker}`);
    assert.ok(served >= 0.95 * 500 * steady.length, `served ${served} in ${steady.length} s at a capacity of 500/s`);
    const waits = steady.flatMap((s) => s.waits).sort((a, b) => a - b);
    assert.ok(waits[Math.ceil(waits.length * 0.99) - 1] <= 20, `served wait p99 ${waits[Math.ceil(waits.length * 0.99) - 1]} ms`);
    // The load falls to 0.5x at 20 s: from the second after it, nothing refused.
    const after = seconds.slice(22, 30);
    assert.equal(sum(after, 'nginx') + sum(after, 'worker'), 0, JSON.stringify(after.map((s) => [s.nginx, s.worker])));
    assert.equal(after.at(-1).share, 0);
  });
}

const tmp = (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-shed-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
};
const buckets = (dir) => fs.readdirSync(dir).filter((n) => /^[0-9a-f]{2}$/.test(n)).sort();

test('the directory nginx tests: share x 256 files, named 00..ff; a dead runner\'s share is cleared at start; nothing else in it is touched', async (t) => {
  const base = tmp(t);
  const dir = path.join(base, 'shed');
  const files = openShedDir(dir);
  assert.equal(fs.statSync(dir).mode & 0o777, 0o750 & ~process.umask());
  files.set(0.5);
  assert.equal(buckets(dir).length, 128);
  assert.deepEqual([buckets(dir)[0], buckets(dir).at(-1)], ['00', '7f']);
  files.set(0.25);
  assert.equal(files.count, 64);
  assert.equal(buckets(dir).length, 64);
  // What else is there stays: a socket, a directory and a file with a bucket's
  // name, a file of another name.
  const server = net.createServer();
  await new Promise((resolve) => server.listen(path.join(dir, 'a0'), resolve));
  t.after(() => server.close());
  fs.mkdirSync(path.join(dir, 'b1'));
  fs.writeFileSync(path.join(dir, 'notes'), 'mine');
  // A runner that died left its share: the next one clears it at once.
  const next = openShedDir(dir);
  assert.equal(next.count, 0);
  assert.deepEqual(buckets(dir), ['a0', 'b1']);
  assert.ok(fs.lstatSync(path.join(dir, 'a0')).isSocket(), 'the socket is still there');
  assert.equal(fs.readFileSync(path.join(dir, 'notes'), 'utf8'), 'mine');
  next.set(1);
  assert.equal(next.count, 254, 'every bucket but the two taken by what is not a file of ours');
  next.set(0);
  assert.deepEqual(buckets(dir), ['a0', 'b1']);
});

test('a directory that cannot be the shed directory is refused with what to do', (t) => {
  const base = tmp(t);
  const elsewhere = path.join(base, 'elsewhere');
  fs.mkdirSync(elsewhere);
  fs.symlinkSync(elsewhere, path.join(base, 'link'));
  assert.throws(() => openShedDir(path.join(base, 'link')), /shed directory .*link is a symbolic link: remove it .*tunekit_app_sustained_after_s to 0/);
  fs.writeFileSync(path.join(base, 'file'), '');
  assert.throws(() => openShedDir(path.join(base, 'file')), /shed directory .*file is not a directory/);
  assert.throws(() => openShedDir(path.join(base, 'missing', 'shed')), /shed directory .*cannot create it \(ENOENT\): the runner must own it/);
});

test('a report is divided by the share nginx refused during its second, not the one set last', () => {
  // 0 until 10 s, 0.5 from then: a second that ended at 10.5 s saw 0.25 on average.
  const shares = [{ at: 0, share: 0 }, { at: 10_000, share: 0.5 }];
  assert.equal(shareDuring(shares, 9_500, 10_500), 0.25);
  assert.equal(shareDuring(shares, 10_000, 11_000), 0.5);
  assert.equal(shareDuring(shares, 8_000, 9_000), 0);
  // 250 arrivals in that second: 250 / (1 - 0.25) offered, not 250 / (1 - 0.5).
  const next = nextShare(new Map([[1, report({ at: 10_500, arrived: 250, perRequestMs: 10 })]]), { active: true, shares }, 10_600);
  assert.ok(Math.abs(next.offered - 250 / 0.75) < 1e-9, `${next.offered}`);
});

test('what a worker can serve: what it served over the share of the second it was busy (its loop reading, or the share of those it served that were queued)', () => {
  const saturated = reportOf({ sustained: true, arrived: 900, served: 400, refused: 20, windowMs: 1000, perRequestMs: 1, utilization: 1 }, undefined, 1000);
  assert.equal(saturated.servesPerS, 400, 'not 1000 / perRequestMs: the gaps of a moment alone on the core');
  // nginx's share took more than the excess: 300 served, the loop idle a quarter of the time.
  const given = reportOf({ sustained: true, arrived: 300, served: 300, refused: 0, windowMs: 1000, perRequestMs: 1, utilization: 0.75 }, saturated, 2000);
  assert.equal(given.servesPerS, 400);
  const share = nextShare(new Map([[1, given]]), { active: true, shares: [{ at: 0, share: 0.5 }] }, 2100);
  assert.equal(share.capacity, 400);
  // Its queue never emptied: saturated, whatever its loop read (one sharing its core with nginx reads less).
  assert.equal(reportOf({ sustained: true, arrived: 900, served: 400, refused: 20, queued: 400, windowMs: 1000, perRequestMs: 1, utilization: 0.85 }, given, 2500).servesPerS, 400);
  // A refusal alone is not saturation: a burst overruns the short budget of a worker 80% busy too.
  assert.equal(reportOf({ sustained: true, arrived: 330, served: 320, refused: 10, queued: 160, windowMs: 1000, perRequestMs: 1, utilization: 0.8 }, given, 2500).servesPerS, 400);
  // A second with nothing served keeps the last figure; one nearly idle is scaled up at most 10x.
  assert.equal(reportOf({ served: 0, windowMs: 1000, utilization: 0.01 }, given, 3000).servesPerS, 400);
  assert.equal(reportOf({ served: 5, windowMs: 1000, utilization: 0.01 }, given, 3000).servesPerS, 50);
  // No utilization sent: taken as busy all along.
  assert.equal(reportOf({ served: 120, windowMs: 1000 }, undefined, 3000).servesPerS, 120);
  // Nothing served yet: the time per request stands in.
  const fresh = reportOf({ sustained: true, arrived: 0, served: 0, refused: 0, windowMs: 1000, perRequestMs: 4, utilization: 0 }, undefined, 1000);
  assert.equal(nextShare(new Map([[1, fresh]]), { active: false, shares: [] }, 1100).capacity, 250);
});

test('the whole loop after one slow second (the machine stalled: a tenth of the capacity for 1 s) at 3x: back to serving the capacity within seconds', () => {
  const seconds = loop({ durationMs: 30_000, offeredAt: () => 1500, capacityAt: (t) => (t >= 10_000 && t < 11_000 ? 50 : 500) });
  const served = seconds.slice(20, 30).reduce((a, s) => a + s.served, 0);
  assert.ok(served >= 0.95 * 500 * 10, `served ${served} in the 10 s from 20 s: ${seconds.map((s) => s.served).join(' ')}`);
});
