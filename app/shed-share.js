'use strict';
// The share of requests nginx refuses while the app is past its capacity
// (tunekit_app_sustained_after_s above 0, with the kit's nginx in front).
//
// A worker that holds its queue (app/hold.js) tells a burst from a sustained
// overload, and then refuses what would wait past the short budget. But a
// refusal there is a request nginx proxied and the worker read and answered:
// measured behind nginx, about 260 µs of the app's core each, against about
// 75 µs when nginx refuses on its own (docs/overload.md), so at 2x the
// refusals took a quarter of the core the app needed. Open-source nginx has no
// queue to bound and cannot count what the app has queued, but it can test a
// file: a request whose $request_id ends in the two hex digits of a file in this
// directory is refused there (site.conf), before any connection to the app.
// $request_id is random, so k files of the 256 refuse k/256 of the requests.
//
// The primary sets k at each report of a worker (each sends one a second): with
// A requests a second reaching the workers while nginx refuses a share f, the
// offered load is A / (1 - f); a worker serves S, what it served over the share
// of the second it was busy; nginx refuses what the workers cannot serve, less a
// margin (HEADROOM) the workers' own rule still refuses, so they stay saturated:
// f = 1 - HEADROOM x S / (A / (1 - f)). Per worker, and the largest of them: the
// kernel does not split the connections evenly (one worker of two took 60-70% of
// the arrivals at 2x, docs/overload.md) and nginx's share falls on all of them
// alike, so the sum's share left the busier worker refusing its excess itself.
// It starts when a worker's overload counts as sustained, follows the load
// each second (to 0 as soon as the offered load falls under what the workers
// serve), and stops once no worker's overload counts as sustained and no share
// is needed.
//
// The directory holds nothing else the primary would touch: it removes only
// regular files named by two lowercase hex digits, never a socket, never a
// directory, and refuses a directory that is a symbolic link.

const fs = require('node:fs');
const path = require('node:path');

const BUCKETS = 256;
// The workers get this much more than they serve: their own rule refuses it.
const HEADROOM = 1.05;
// Never refuse every request at nginx: some must reach the workers to be measured.
const MAX_SHARE = 0.98;
// A loop busy less than this share of a second is scaled up as if busy this much.
const MIN_BUSY = 0.1;
// A worker's report older than this is not used (it exited, or it is stuck).
const STALE_MS = 2500;

const bucketName = (i) => i.toString(16).padStart(2, '0');
const BUCKET_NAME = /^[0-9a-f]{2}$/;

/**
 * The share nginx refused on average from `from` to `to` (epoch ms), from the
 * shares set since ({ at, share }, oldest first; the first one holds before).
 */
function shareDuring(shares, from, to) {
  if (!(to > from)) return shares.length ? shares[shares.length - 1].share : 0;
  let sum = 0;
  for (let i = 0; i < shares.length; i++) {
    const start = i === 0 ? -Infinity : shares[i].at;
    const end = i + 1 < shares.length ? shares[i + 1].at : Infinity;
    const overlap = Math.min(end, to) - Math.max(start, from);
    if (overlap > 0) sum += overlap * shares[i].share;
  }
  return sum / (to - from);
}

/**
 * The next share from the workers' latest reports (worker id -> { at,
 * sustained, arrived, windowMs, servesPerS, perRequestMs }; servesPerS, what it
 * can serve a second (reportOf), else 1000 / perRequestMs) and the state ({ active,
 * shares: [{ at, share }] }, the shares set, oldest first). Pure: returns the
 * next state, with `share` (the one to set now), `offered` and `capacity`
 * (requests a second; null when not known).
 *
 * A report covers its worker's last second, which the share set last may have
 * reached only in part: the arrivals are divided by the share nginx refused
 * during that second, not the one set last, or the estimate of the offered load
 * is off by the change and the share swings (made-up loads did that: 0.47,
 * 0.72, 0.72, 0.47, 0 every 6 s at a steady 2x).
 */
function nextShare(reports, state, now) {
  const shares = state.shares || [];
  const current = shares.length ? shares[shares.length - 1].share : 0;
  let offered = 0;
  let capacity = 0;
  let need = null; // the largest share one worker needs
  let sustained = false;
  let fresh = 0;
  for (const r of reports.values()) {
    if (now - r.at > STALE_MS) continue;
    fresh += 1;
    if (r.sustained) sustained = true;
    const its = r.windowMs > 0 ? (r.arrived * 1000) / r.windowMs / (1 - shareDuring(shares, r.at - r.windowMs, r.at)) : 0;
    const serves = r.servesPerS > 0 ? r.servesPerS : r.perRequestMs > 0 ? 1000 / r.perRequestMs : 0;
    offered += its;
    capacity += serves;
    if (serves > 0) need = Math.max(need ?? 0, its > 0 ? 1 - (HEADROOM * serves) / its : 0);
  }
  const active = sustained || (state.active && current > 0);
  let share = current;
  if (!active || fresh === 0) share = 0;
  else if (need !== null) share = Math.min(MAX_SHARE, Math.max(0, Math.floor(need * BUCKETS) / BUCKETS));
  const kept = shares.filter((s, i) => i === shares.length - 1 || shares[i + 1].at > now - 2 * STALE_MS);
  return {
    active: active && fresh > 0,
    share,
    shares: share === current && kept.length ? kept : [...kept, { at: now, share }],
    offered: active && fresh > 0 ? offered : null,
    capacity: active && fresh > 0 && capacity > 0 ? capacity : null,
  };
}

/**
 * The directory nginx tests: set(share) leaves floor(share x 256) bucket files
 * in it. Created (0750) if missing; a stale share left by a runner that died is
 * cleared at once. Throws an Error naming the directory and the fix when it
 * cannot be used.
 */
function openShedDir(dir) {
  const fix = 'the runner must own it (with socket activation the socket unit creates it: systemd/README.md), or set tunekit_app_sustained_after_s to 0';
  try {
    fs.mkdirSync(dir, { mode: 0o750 });
  } catch (err) {
    if (err.code !== 'EEXIST') throw new Error(`shed directory ${dir}: cannot create it (${err.code}): ${fix}`);
  }
  const st = fs.lstatSync(dir);
  if (!st.isDirectory()) {
    throw new Error(`shed directory ${dir} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}: remove it (the runner creates the directory itself), or set tunekit_app_sustained_after_s to 0`);
  }
  const present = new Set();
  for (const name of fs.readdirSync(dir)) {
    if (!BUCKET_NAME.test(name)) continue;
    const file = path.join(dir, name);
    if (fs.lstatSync(file).isFile()) present.add(parseInt(name, 16));
  }
  // A name taken by what is not a regular file (a directory, a socket, a link)
  // is left alone: nginx's -f is false for it, and that bucket is not refused.
  const write = (i) => {
    try {
      fs.closeSync(fs.openSync(path.join(dir, bucketName(i)), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o640));
    } catch (err) {
      if (['EISDIR', 'ENXIO', 'ELOOP', 'EOPNOTSUPP'].includes(err.code)) return;
      throw err;
    }
    present.add(i);
  };
  const remove = (i) => {
    try {
      fs.unlinkSync(path.join(dir, bucketName(i)));
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    present.delete(i);
  };
  const set = (share) => {
    const k = Math.max(0, Math.min(BUCKETS, Math.floor(share * BUCKETS + 1e-9)));
    for (const i of [...present]) if (i >= k) remove(i);
    for (let i = 0; i < k; i += 1) if (!present.has(i)) write(i);
  };
  set(0);
  return {
    dir,
    set,
    /** The buckets present now: the share nginx refuses is this / 256. */
    get count() {
      return present.size;
    },
  };
}

// ---- in the primary (app/cluster.js): p.s, p.log, p.shed -------------------

// A log line when the share changes by this much, or at most this often.
const LOG_STEP = 0.1;
const LOG_EVERY_MS = 10_000;

/**
 * Open the directory and update the share at each worker's report, and once a
 * second (reports that stopped coming end it). settings.shedDir set.
 */
function startShedShare(p, { now = Date.now } = {}) {
  const { shedDir, sustainedAfterS } = p.s;
  if (!shedDir || !(sustainedAfterS > 0)) return null;
  let files;
  try {
    files = openShedDir(shedDir);
  } catch (err) {
    p.log('warn', 'shed-dir', { error: err.message, consequence: 'nginx refuses nothing for the app: its workers refuse the excess themselves, at a higher cost per refusal' });
    return null;
  }
  const shed = { files, reports: new Map(), state: { active: false, shares: [] }, logged: { share: 0, at: -Infinity }, timer: null };
  shed.timer = setInterval(() => update(p, shed, now()), 1000);
  shed.timer.unref();
  return shed;
}

function update(p, shed, now) {
  const next = nextShare(shed.reports, shed.state, now);
  try {
    shed.files.set(next.share);
  } catch (err) {
    p.log('error', 'shed-dir', { error: `${shed.files.dir}: ${err.message}` });
  }
  // What nginx refuses is what the files say, whatever set() managed to write.
  const share = shed.files.count / BUCKETS;
  p.metricsCounters.shedShare = share;
  shed.state = share === next.share ? next : { ...next, share, shares: [...next.shares, { at: now, share }] };
  const { logged } = shed;
  const moved = Math.abs(share - logged.share);
  if ((moved >= LOG_STEP && now - logged.at >= LOG_EVERY_MS) || (moved > 0 && (share === 0 || logged.share === 0))) {
    p.log(share > 0 ? 'warn' : 'info', 'shed-share', {
      share: Number(share.toFixed(3)),
      offered_rps: next.offered === null ? null : Math.round(next.offered),
      served_rps: next.capacity === null ? null : Math.round(next.capacity),
      fix: share > 0 ? 'past capacity: nginx refuses this share of the requests; add app workers (tunekit_app_workers) or hosts, or cut the cost per request' : undefined,
    });
    logged.share = share;
    logged.at = now;
  }
}

/**
 * A worker's report (MSG.HOLD): what its held queue saw in its last second, and
 * how busy its event loop was (`utilization`, Node's eventLoopUtilization over
 * that second). What it can serve is what it served over the share of the
 * second its loop was busy: saturated (busy all along) that is what it served,
 * with nginx and the other workers taking their part of the cores; given less
 * than it can serve, it is what it served scaled up by the idle time. How busy
 * it was is the larger of its loop's reading and the share of the requests it
 * served that were already waiting when it served the one before (`queued`): a
 * loop that shares its core with nginx reads 0.8-0.95 busy while its queue never
 * empties (it waits for the core, not for work), and scaled by that reading the
 * figure was 5-20% high, so the workers refused half of a 2x overload themselves.
 * Taking any second with a refusal as saturated instead ratcheted down: bursts
 * overrun the short budget of a worker 85% busy too (docs/overload.md). Each
 * second stands alone, so a slow one is not kept.
 *
 * Two figures this replaced, each measured in the ladders of docs/overload.md:
 * 1 / (its time per request) counted the gaps between requests served while
 * the worker had the core to itself, too high with nginx and another worker on
 * the same core (a third of the refusals were still the workers'); and what it
 * served in seconds it also refused requests, kept between such seconds, stayed
 * low for good after one slow second (nginx refused nearly everything and the
 * worker was never saturated again to measure it: at 3x it served a tenth of
 * its capacity).
 */
function reportOf(msg, before, now) {
  const windowMs = Number(msg.windowMs) || 0;
  const served = Number(msg.served) || 0;
  const utilization = Number(msg.utilization);
  const queued = served > 0 ? Math.min(1, (Number(msg.queued) || 0) / served) : 0;
  const busy = utilization > 0 && utilization <= 1 ? Math.max(utilization, queued, MIN_BUSY) : 1;
  let servesPerS = before ? before.servesPerS : 0;
  if (windowMs > 0 && served > 0) servesPerS = (served * 1000) / windowMs / busy;
  return { at: now, sustained: msg.sustained === true, arrived: Number(msg.arrived) || 0, windowMs, perRequestMs: Number(msg.perRequestMs) || 0, servesPerS };
}

function onReport(p, info, msg, now = Date.now()) {
  if (!p.shed) return;
  p.shed.reports.set(info.id, reportOf(msg, p.shed.reports.get(info.id), now));
  // At once: a report that shows the load fell ends the share a second sooner
  // than the timer would.
  update(p, p.shed, now);
}

/** Stop: nginx refuses nothing more for this runner. */
function stopShedShare(p) {
  if (!p.shed) return;
  clearInterval(p.shed.timer);
  try {
    p.shed.files.set(0);
  } catch (err) {
    p.log('error', 'shed-dir', { error: `${p.shed.files.dir}: ${err.message}` });
  }
  p.shed = null;
}

module.exports = { nextShare, shareDuring, reportOf, openShedDir, startShedShare, onReport, stopShedShare, BUCKETS, HEADROOM, MAX_SHARE, STALE_MS };
