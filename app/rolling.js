'use strict';
// The rolling restart: one slot at a time, a new worker listens before the old
// one drains. SIGHUP restarts every slot with new processes (new code); after a
// re-bind (app/socket-watch.js) only the slots whose worker listens on a socket
// the runner no longer binds.
//
// Each function takes the primary `p` (app/cluster.js) and reads or sets:
//   p.state, p.reloading, p.moveAfterReload, p.slots, p.spare, p.spareTimer, p.infos, p.log;
// and calls p.fork, p.takeSpare, p.retire, p.pids, p.scheduleSpare, p.bindingOf
// (app/lifecycle.js, app/listeners.js). A worker's info has `ready` (a promise:
// true once it listens, false if it exits first), `error`, `listener`, `id`, `pid`.

const { errorText } = require('./lifecycle');

/**
 * Rolling restart of `slots` (default: all). After a re-bind (reason
 * 'socket-rebound') the waiting spare, loaded and idle, takes the first of them;
 * on SIGHUP the spare holds the old code, so it is retired and a new one forked.
 */
async function reload(p, { reason, slots = p.slots } = {}) {
  if (p.state !== 'running' || p.reloading) {
    p.log('warn', 'reload-ignored', { reason: p.reloading ? 'a rolling restart is already running' : `state is ${p.state}` });
    return;
  }
  p.reloading = true;
  const before = slots.map((slot) => slot.current && slot.current.pid).filter(Boolean);
  const rebound = reason === 'socket-rebound';
  p.log('info', 'reload', { workers: before, reason, slots: rebound ? slots.map((slot) => slot.n) : undefined });
  clearTimeout(p.spareTimer);
  if (p.spare && !rebound) {
    const old = p.spare; // loaded with the old code
    p.spare = null;
    p.retire(old);
  }
  try {
    for (const slot of slots) {
      if (p.state !== 'running') return;
      if (!await replaceSlot(p, slot, rebound)) return;
    }
    p.log('info', 'reload-done', { workers: p.pids(), replaced: before, reason });
  } finally {
    p.reloading = false;
    p.scheduleSpare(0);
    if (p.moveAfterReload) {
      // A re-bind during this restart: workers started before it hold the old socket.
      p.moveAfterReload = false;
      setImmediate(() => moveWorkers(p));
    }
  }
}

/** One slot: a new worker (the spare after a re-bind) listens, then the old one drains. */
async function replaceSlot(p, slot, rebound) {
  const old = slot.current;
  const fresh = (rebound && p.takeSpare(slot, { replacement: true })) || p.fork(slot, { replacement: true });
  const ok = await fresh.ready;
  if (!ok || p.state !== 'running') {
    p.log('error', 'reload-failed', {
      slot: slot.n,
      reason: 'the new worker exited before it listened; the old one keeps serving',
      error: fresh.error ? errorText(fresh.error) : undefined,
    });
    return false;
  }
  fresh.replacement = false;
  // `old` may have died meanwhile and a respawn taken its slot: retire
  // whichever worker the slot holds now, and cancel a pending respawn.
  const previous = slot.current || old;
  clearTimeout(slot.timer);
  slot.timer = null;
  slot.current = fresh;
  if (previous && previous !== fresh && p.infos.has(previous.id)) await p.retire(previous);
  return true;
}

/** Slots whose worker listens on a socket the runner no longer binds. */
function staleSlots(p) {
  return p.slots.filter((slot) => slot.current && slot.current.listener && slot.current.listener !== p.bindingOf(slot));
}

/** Restart the workers of the old socket one at a time: new ones get the new socket. */
function moveWorkers(p) {
  if (p.state !== 'running') return;
  if (p.reloading) {
    p.moveAfterReload = true;
    return;
  }
  const slots = staleSlots(p);
  if (!slots.length) return;
  reload(p, { reason: 'socket-rebound', slots }).catch((err) => p.log('error', 'reload-failed', { error: err.message }));
}

module.exports = { reload, replaceSlot, staleSlots, moveWorkers };
