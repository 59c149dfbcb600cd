'use strict';
// The queue a worker holds (tunekit_app_sustained_after_s above 0): overload
// protection that tells a burst from a sustained overload.
//
// A static queue budget cannot do both: one long enough to ride out a burst of
// 10x the capacity for 1 s (about 9 s of work queued) lets every request wait
// that long under a sustained 2x, and one short enough for the 2x refuses most of
// the burst (docs/overload.md). The waits a worker sees cannot tell them apart
// either: FIFO, they rise while a burst drains as they rise under 2x. The queue's
// length can: it falls once a burst is over and keeps growing under a sustained
// overload. Only a queue the worker holds shows its length, so in this mode the
// worker reads every request that has reached it and hands them to the app one
// per turn of its event loop (each turn reads what arrived meanwhile), first in,
// first out.
//
// The rule: the length is sampled once a second; when it has not drained at any
// of the last `sustainedAfterS` samples and the oldest request has waited a third
// of that time (and longer than the short budget, `sustainedBudgetMs`), the
// overload counts as sustained: a sustained 2x adds half a second of waiting a
// second, so it is on after about sustainedAfterS seconds; a queue that grew for
// a few seconds near the capacity, as a noisy machine makes it, holds far less.
// Not drained: it grew, or it held (a queue that was not empty fell by less than
// HELD_SHARE of what the worker served that second). Growth alone missed the
// overload that matters most: clients that each send their next request when
// the last is answered (a crowd that came at once and stays, a pool of
// connections at its cap) keep the queue at its length, the wait there for as
// long as they stay; measured at 3x of 500 req/s with the bench's 2,000 client
// connections, the queue stood at 2,000 after 2 s, 4 s of waiting, and nothing
// was ever refused (served p99 40.7 s, docs/overload.md). A burst that drains
// falls by what the worker serves less what arrives, half a second's worth a
// second at 0.5x, and an empty queue that stays empty has not held anything.
// Then a new request is refused (503) as it arrives when what it waited so far
// plus the queue ahead of it (the queue's length times the time the worker takes
// per request) passes the short budget, so the refusal is fast and the served
// requests' wait stays within the short budget; those queued while the queue
// grew, and any other that waited longer than it, are refused as they come up.
// It stops counting as sustained after `sustainedAfterS` seconds without a
// refusal. A burst shorter than
// sustainedAfterS - 1 seconds never turns it on: the length falls, at the latest,
// one sample after the burst (the samples' phase against the burst's start can
// put two of its samples inside it).
//
// At each sample, onSample gets what the second showed (arrivals, the time per
// request, whether it counts as sustained): the worker sends it to its primary,
// which sets the share of requests nginx refuses before they reach a worker
// (app/shed-share.js), so that most refusals cost nginx's time, not the app's.
//
// Pure logic on a clock the caller passes: app/worker.js feeds it requests and
// the tests made-up times.

const SAMPLE_MS = 1000;
// The time per request is an exponential average over about this many requests.
const SERVICE_AVERAGE = 8;
// The oldest request must have waited sustainedAfterS / STANDING_SHARE seconds.
const STANDING_SHARE = 3;
// A queue that fell by less than this share of what the worker served in the
// second held: at that pace a second of waiting takes 20 s to clear.
const HELD_SHARE = 0.05;

/** First in, first out: items with the time each began waiting. */
function createFifo() {
  let items = [];
  let starts = [];
  let head = 0;
  return {
    get length() {
      return items.length - head;
    },
    /** When the oldest began waiting (the queue is not empty). */
    get headStart() {
      return starts[head];
    },
    push(item, start) {
      items.push(item);
      starts.push(start);
    },
    /** The oldest, removed: [item, start], or undefined when empty. */
    shift() {
      if (head === items.length) return undefined;
      const taken = [items[head], starts[head]];
      items[head] = undefined;
      head += 1;
      if (head === items.length) {
        items = [];
        starts = [];
        head = 0;
      } else if (head >= 1024 && head * 2 >= items.length) {
        items = items.slice(head);
        starts = starts.slice(head);
        head = 0;
      }
      return taken;
    },
  };
}

// From one sample ({ length, served since the one before }) to the next the
// queue grew, or held: it was not empty and fell by less than HELD_SHARE of
// what was served in between.
const notDrained = (before, after) => after.length > before.length ||
  (before.length > 0 && before.length - after.length < HELD_SHARE * after.served);

/**
 * A held queue. Items are the caller's; `start` (epoch ms) is when each began
 * waiting: nginx's X-Request-Start stamp, or when the worker read it.
 */
function createHold({ sustainedAfterS, sustainedBudgetMs, sampleMs = SAMPLE_MS, onSample = null }) {
  if (!(sustainedAfterS >= 1) || !(sustainedBudgetMs >= 1)) {
    throw new RangeError(`a held queue needs sustainedAfterS >= 1 and sustainedBudgetMs >= 1 (got ${sustainedAfterS}, ${sustainedBudgetMs})`);
  }
  const fifo = createFifo();
  // How long the oldest request must have waited as well: a queue that grew for
  // seconds near the capacity (the machine slower for a while) but holds less
  // than this is noise, not an overload worth refusing requests for.
  const standingMs = Math.max(sustainedBudgetMs, (sustainedAfterS * 1000) / STANDING_SHARE);
  const samples = []; // the queue's length and what was served before it, once a second, the last sustainedAfterS + 1
  let nextSample = -Infinity;
  let sustained = false;
  let lastRefusal = -Infinity;
  // The time the worker takes per request it serves while requests wait (an
  // average over the last few): how long a new arrival would wait is the queue's
  // length times it.
  let perRequestMs = 0;
  let lastServed = -Infinity;
  // Since the last sample, for onSample (app/shed-share.js); queued: served ones that waited while the one before was served.
  const fresh = () => ({ arrived: 0, served: 0, refused: 0, queued: 0 });
  let counts = fresh();
  let lastSample = null;

  function observe(now) {
    if (now < nextSample) return;
    nextSample = now + sampleMs;
    judge(now);
    if (onSample) onSample({ sustained, ...counts, windowMs: lastSample === null ? 0 : now - lastSample, perRequestMs });
    counts = fresh();
    lastSample = now;
  }

  function judge(now) {
    if (sustained) {
      if (now - lastRefusal >= sustainedAfterS * 1000) {
        sustained = false;
        samples.length = 0;
      }
      return;
    }
    samples.push({ length: fifo.length, served: counts.served });
    if (samples.length > sustainedAfterS + 1) samples.shift();
    if (samples.length === sustainedAfterS + 1 && samples.every((x, i) => i === 0 || notDrained(samples[i - 1], x)) &&
        now - fifo.headStart > standingMs) {
      sustained = true;
      lastRefusal = now;
    }
  }

  // How long a request arriving now would wait behind the queue: its length
  // times the time per request, or (none measured yet) how long its head waited.
  const wouldWait = (now) => (perRequestMs > 0 ? (fifo.length + 1) * perRequestMs : now - fifo.headStart);

  return {
    get length() {
      return fifo.length;
    },
    /** Whether the overload counts as sustained now (the short budget applies). */
    get sustained() {
      return sustained;
    },
    /**
     * A request arrives at `now`, having waited since `start`: true when it is
     * refused at once (a sustained overload, and what it waited plus the queue
     * ahead of it passes the short budget), else it is queued.
     */
    arrive(item, start, now) {
      observe(now);
      counts.arrived += 1;
      if (sustained && fifo.length > 0 && now - start + wouldWait(now) > sustainedBudgetMs) {
        lastRefusal = now;
        counts.refused += 1;
        return true;
      }
      fifo.push(item, start);
      return false;
    },
    /** A sample is due (a timer calls it, so that an idle worker samples too). */
    tick(now) {
      observe(now);
    },
    /**
     * The oldest item, taken off the queue, or undefined when it is empty.
     * `refuse` says whether it waited past the short budget of a sustained overload.
     */
    take(now) {
      observe(now);
      const taken = fifo.shift();
      if (taken === undefined) return undefined;
      const waited = now - taken[1];
      const refuse = sustained && waited > sustainedBudgetMs;
      if (refuse) {
        lastRefusal = now;
        counts.refused += 1;
      } else {
        counts.served += 1;
        // It was waiting when the last one was served: the gap is one request's time.
        counts.queued += taken[1] <= lastServed ? 1 : 0;
        if (taken[1] <= lastServed) perRequestMs += (now - lastServed - perRequestMs) / SERVICE_AVERAGE;
        lastServed = now;
      }
      return { item: taken[0], waited, refuse };
    },
  };
}

module.exports = { createHold, SAMPLE_MS };
