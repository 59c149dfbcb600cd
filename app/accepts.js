'use strict';
// How many new connections a worker takes in one turn of its event loop.
//
// Since libuv 1.45 (Node 20) a listening handle accepts one connection per turn
// (https://github.com/libuv/libuv/pull/3696). A worker busy with many keep-alive
// connections turns a few times a second, and new connections then wait in the
// accept queue past their client's timeout (docs/overload.md, "One accept per
// turn"); each more descriptor of the socket a worker listens on takes one more a
// turn. But every worker wakes for a new connection, and one that takes many a
// turn takes most of a burst: nginx opens its upstream pool in a burst (at start,
// after a reload) and keeps each connection for keepalive_requests, so a worker
// that took 48 of 49 did about 90% of the work until the pool turned over
// (docs/benchmarks.md, "The accept skew of a fresh start").
//
// So the extra descriptors (tunekit_app_accepts_per_turn - 1 of them, sent by the
// primary) are held closed to epoll while the loop turns quickly: one accept a
// turn, and a burst spreads over the workers. A turn of SLOW_TURN_MS or more (the
// check timer fires that late) opens them all at once: the worker is behind, and
// its queue must drain. After QUIET_MS of quick turns they are closed again (a
// listening descriptor cannot stop listening; closing a duplicate leaves the
// socket to the others), and the worker asks the primary for fresh ones to hold.

/** How often the loop's lateness is checked, and what counts as a slow turn. */
const CHECK_MS = 100;
const SLOW_TURN_MS = 50;
/** Quick turns for this long close the extra descriptors again. */
const QUIET_MS = 10_000;

/**
 * The worker's extra descriptors of its listening socket.
 *   listen(handle) → a net.Server accepting through handle (its close(cb) waits
 *                    for the connections it accepted)
 *   ask(n)        → ask the primary for n more descriptors (after closing n)
 *   now()         → ms clock (tests pass their own)
 */
function createAccepts({ listen, ask, now = Date.now, slowTurnMs = SLOW_TURN_MS, quietMs = QUIET_MS }) {
  const held = []; // received, not listening: no accept, not in epoll
  const open = []; // listening
  const closing = new Set(); // closed, waiting for the connections they accepted
  let wide = false;
  let lastSlow = -Infinity;
  let ended = false;
  let timer = null;
  let always = false; // keepWide(): every descriptor listening for good

  function widen() {
    wide = true;
    while (held.length) open.push(listen(held.shift()));
  }

  function narrow() {
    wide = false;
    const n = open.length;
    for (const acceptor of open.splice(0)) {
      closing.add(acceptor);
      acceptor.close(() => closing.delete(acceptor));
    }
    if (n) ask(n);
  }

  return {
    /** A descriptor from the primary. */
    add(handle) {
      if (ended) {
        handle.close();
        return;
      }
      if (wide) open.push(listen(handle));
      else held.push(handle);
    },
    /** One check: the timer fired `lateMs` after it was due. */
    turn(lateMs) {
      if (ended) return;
      const t = now();
      if (lateMs >= slowTurnMs) {
        lastSlow = t;
        if (!wide) widen();
      } else if (wide && !always && t - lastSlow >= quietMs) {
        narrow();
      }
    },
    /**
     * Every descriptor listens from now on, and stays: a worker that holds its
     * queue (app/hold.js) turns once per request however far behind it is, so one
     * accept a turn would keep a burst in the accept queue, where the worker
     * cannot see it grow or fall. Both workers take all that waits at each turn,
     * so neither takes most of it for being behind (as opening them only for the
     * worker behind did: it took the connections and the other one idled).
     */
    keepWide() {
      always = true;
      if (!wide && !ended) widen();
    },
    /** Check the loop every CHECK_MS (from when the worker serves: a waiting spare runs no timer). */
    start() {
      if (timer || ended) return;
      let due = now() + CHECK_MS;
      timer = setInterval(() => {
        const t = now();
        this.turn(t - due);
        due = t + CHECK_MS;
      }, CHECK_MS);
      timer.unref();
    },
    /** Descriptors held, for the open-files count. */
    get descriptors() {
      return held.length + open.length;
    },
    get wide() {
      return wide;
    },
    /** Stop accepting on every extra descriptor; resolves when their connections are gone. */
    end() {
      ended = true;
      clearInterval(timer);
      for (const handle of held.splice(0)) handle.close();
      const waits = open.splice(0).map((acceptor) => new Promise((resolve) => acceptor.close(resolve)));
      for (const acceptor of closing) waits.push(new Promise((resolve) => acceptor.once('close', resolve)));
      return Promise.all(waits);
    },
  };
}

module.exports = { createAccepts, CHECK_MS, SLOW_TURN_MS, QUIET_MS };
