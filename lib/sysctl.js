'use strict';
// Apply a sysctl.d drop-in without ever lowering what the host already has.
//
//   plan(text)    -> for each key: the desired value (from the drop-in), the live
//                    value (/proc/sys), the effective value (the "higher" of the two,
//                    per key kind) and what will happen
//   apply(steps)  -> writes the effective values to /proc/sys; a key that cannot be
//                    set here (a container, a global key seen from a network
//                    namespace) is reported, not fatal
//   effectiveDropIn(text, steps) -> the drop-in with the effective values, which is
//                    what goes into /etc/sysctl.d/ so a reboot applies the same
//
// "Higher" per key kind (sysctl/README.md explains the choices):
//   number      the larger one (BigInt: fs.file-max can be 2^63-1)
//   port range  the union: the lower low end, the higher high end
//   tw_reuse    0 (off) < 2 (loopback only) < 1 (all outgoing connections):
//               "higher" means reuse allowed for more connections
//
// The drop-in's own format (systemd sysctl.d(5), procps sysctl.conf(5)):
// "key = value" lines, "#" or ";" comments, a leading "-" means a failure to
// set the key is ignored. The apply step writes keys it could not set with "-",
// so systemd-sysctl at boot does not fail on them either.

const { KitError } = require('./errors');
const fs = require('node:fs');
const path = require('node:path');

const PROC_SYS = '/proc/sys';

// Annotation lines the apply step writes above a key; stripped when a drop-in
// is read again, so applying the effective drop-in a second time changes nothing.
const NOTE = '# tunekit-apply:';
const CANNOT = 'cannot be set here';

const PORT_RANGE = new Set(['net.ipv4.ip_local_port_range']);
const TW_REUSE = new Set(['net.ipv4.tcp_tw_reuse']);
// Breadth of TIME_WAIT reuse per mode: 0 off, 2 loopback only, 1 every connection.
const TW_RANK = { 0: 0, 2: 1, 1: 2 };

// Errors that mean "this key cannot be set from here", not "the value is wrong".
const NOT_SETTABLE = {
  EACCES: 'permission denied (a global key seen read-only from a network namespace, or no CAP_SYS_ADMIN)',
  EPERM: 'operation not permitted (a user namespace or a container without the capability)',
  EROFS: 'read-only /proc/sys (a container: set it on the host)',
  ENOENT: 'not present here (a global key is not visible in a network namespace on this kernel, or the module is not loaded)',
};

/** A key or value the sysctl step refuses. */
class SysctlError extends KitError {}

function keyPath(key, procRoot = PROC_SYS) {
  if (!/^[a-z0-9_.-]+$/i.test(key) || key.includes('..')) {
    throw new SysctlError(`"${key}" is not a sysctl key (expected dotted names like net.core.somaxconn)`);
  }
  return path.join(procRoot, ...key.split('.'));
}

/**
 * Parse a sysctl.d drop-in. Returns the entries in file order:
 * { key, value, ignoreFailure, line (0-based), desired (from an earlier apply's note) }.
 */
function parse(text, file = 'drop-in') {
  const entries = [];
  const lines = text.split('\n');
  let noted = null;
  let ourDash = false;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line.startsWith(NOTE)) {
      const m = /desired (\S+(?: \S+)?);/.exec(line.slice(NOTE.length));
      noted = m ? m[1] : null;
      // A "-" the apply step added for a key it could not set is decided anew.
      ourDash = line.includes(CANNOT);
      return;
    }
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const dashed = line.startsWith('-');
    const ignoreFailure = dashed && !ourDash;
    const body = dashed ? line.slice(1) : line;
    const eq = body.indexOf('=');
    if (eq <= 0) {
      throw new SysctlError(`${file}:${i + 1}: "${line}" is not "key = value"`);
    }
    const key = body.slice(0, eq).trim().replace(/\//g, '.');
    const value = normalise(body.slice(eq + 1).trim());
    if (value === '') throw new SysctlError(`${file}:${i + 1}: ${key} has no value`);
    // A note left by an earlier apply holds what the template asked for; use it,
    // so the second apply decides from the same desired value as the first.
    entries.push({ key, value: noted !== null ? noted : value, written: value, ignoreFailure, line: i });
    noted = null;
    ourDash = false;
  });
  const seen = new Map();
  for (const e of entries) {
    if (seen.has(e.key)) {
      throw new SysctlError(`${file}: ${e.key} is set twice (lines ${seen.get(e.key) + 1} and ${e.line + 1}); keep one`);
    }
    seen.set(e.key, e.line);
  }
  return entries;
}

/** Whitespace inside a value ("32768\t60999") compares as one space. */
function normalise(value) {
  return String(value).trim().split(/\s+/).join(' ');
}

function kindOf(key) {
  if (PORT_RANGE.has(key)) return 'port-range';
  if (TW_REUSE.has(key)) return 'tw-reuse';
  return 'number';
}

function toBig(key, value, where) {
  if (!/^-?\d+$/.test(value)) {
    throw new SysctlError(`${key} = "${value}" (${where}) is not an integer; tunekit only manages numeric keys`);
  }
  return BigInt(value);
}

/**
 * The effective value for one key: never below the live one.
 * Returns { effective, action: 'raise' | 'keep' | 'same', why }.
 */
function higher(key, desired, live) {
  const kind = kindOf(key);
  if (kind === 'port-range') {
    const d = desired.split(' ');
    const l = live.split(' ');
    if (d.length !== 2 || l.length !== 2) {
      throw new SysctlError(`${key} takes "low high", got desired "${desired}", live "${live}"`);
    }
    const [dl, dh] = d.map((v) => toBig(key, v, 'desired'));
    const [ll, lh] = l.map((v) => toBig(key, v, 'live'));
    if (dl > dh) throw new SysctlError(`${key} = "${desired}": the low end is above the high end`);
    const low = dl < ll ? dl : ll;
    const high = dh > lh ? dh : lh;
    const effective = `${low} ${high}`;
    if (effective === live) {
      return { effective, action: effective === desired ? 'same' : 'keep', why: 'the live range already covers the desired one' };
    }
    return { effective, action: 'raise', why: 'widened to the union of the live and the desired range' };
  }
  if (kind === 'tw-reuse') {
    if (!(desired in TW_RANK) || !(live in TW_RANK)) {
      throw new SysctlError(`${key} takes 0, 1 or 2, got desired "${desired}", live "${live}"`);
    }
    if (desired === live) return { effective: live, action: 'same', why: 'already set' };
    if (TW_RANK[live] > TW_RANK[desired]) {
      return { effective: live, action: 'keep', why: `live mode ${live} reuses TIME_WAIT for more connections than ${desired}` };
    }
    return { effective: desired, action: 'raise', why: `mode ${desired} reuses TIME_WAIT for more connections than live ${live}` };
  }
  const d = toBig(key, desired, 'desired');
  const l = toBig(key, live, 'live');
  if (d === l) return { effective: live, action: 'same', why: 'already set' };
  if (l > d) return { effective: live, action: 'keep', why: `live ${live} is higher than the desired ${desired}` };
  return { effective: desired, action: 'raise', why: `live ${live} is lower` };
}

function readLive(key, procRoot = PROC_SYS) {
  try {
    return { value: normalise(fs.readFileSync(keyPath(key, procRoot), 'utf8')) };
  } catch (err) {
    return { error: err.code || err.message };
  }
}

/**
 * Decide every key of a drop-in against the live system.
 * Each step: { key, desired, live, effective, action, why, error?, ignoreFailure }.
 * action: raise | keep | same | unreadable
 */
function plan(text, { procRoot = PROC_SYS, file } = {}) {
  return parse(text, file).map((e) => {
    const live = readLive(e.key, procRoot);
    const base = { key: e.key, desired: e.value, ignoreFailure: e.ignoreFailure };
    if (live.error) {
      return {
        ...base, live: null, effective: e.value, action: 'unreadable', error: live.error,
        why: NOT_SETTABLE[live.error] || `cannot read ${keyPath(e.key, procRoot)}: ${live.error}`,
      };
    }
    return { ...base, live: live.value, ...higher(e.key, e.value, live.value) };
  });
}

/**
 * Write every "raise" step to /proc/sys and read it back. Mutates and returns
 * the steps: a step that could not be set gets action 'not-settable' (reported,
 * not fatal) or 'failed' (the kernel refused the value: fatal).
 */
function apply(steps, { procRoot = PROC_SYS, dryRun = false } = {}) {
  for (const s of steps) {
    if (s.action !== 'raise' || dryRun) continue;
    const file = keyPath(s.key, procRoot);
    try {
      fs.writeFileSync(file, `${s.effective.replace(' ', '\t')}\n`);
    } catch (err) {
      if (NOT_SETTABLE[err.code]) {
        s.action = 'not-settable';
        s.error = err.code;
        s.why = NOT_SETTABLE[err.code];
      } else {
        s.action = 'failed';
        s.error = err.code || err.message;
        s.why = `the kernel refused ${s.key} = ${s.effective} (${s.error}); check the value in the drop-in`;
      }
      continue;
    }
    const back = readLive(s.key, procRoot);
    if (back.value !== undefined && back.value !== s.effective) {
      s.action = 'failed';
      s.why = `wrote ${s.effective}, the kernel reports ${back.value} (clamped); lower the value in the drop-in to what this kernel accepts`;
    }
  }
  return steps;
}

/**
 * The drop-in with each key's effective value. Comments stay; above each key
 * whose value differs from the template's, or that could not be set, a
 * "# tunekit-apply:" note says why. Keys that cannot be set here get a leading
 * "-" so systemd-sysctl ignores their failure at boot as well.
 */
function effectiveDropIn(text, steps) {
  const byKey = new Map(steps.map((s) => [s.key, s]));
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith(NOTE)) continue;
    if (line === '' || line.startsWith('#') || line.startsWith(';')) {
      out.push(raw);
      continue;
    }
    const body = line.startsWith('-') ? line.slice(1) : line;
    const key = body.slice(0, body.indexOf('=')).trim().replace(/\//g, '.');
    const s = byKey.get(key);
    const cannot = s.action === 'unreadable' || s.action === 'not-settable';
    if (s.effective !== s.desired || cannot) {
      const said = cannot ? `${CANNOT} (${s.error}): ${s.why}` : s.why;
      out.push(`${NOTE} desired ${s.desired}; ${said}`);
    }
    const dash = s.ignoreFailure || cannot ? '-' : '';
    out.push(`${dash}${s.key} = ${s.effective}`);
  }
  return out.join('\n');
}

/** Write a file only if its bytes change, through a temp file and rename. */
function writeIfChanged(file, text, mode = 0o644) {
  let old = null;
  try {
    old = fs.readFileSync(file, 'utf8');
  } catch {
    // missing: write it
  }
  if (old === text) return false;
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tunekit-${process.pid}`);
  fs.writeFileSync(tmp, text, { mode });
  fs.renameSync(tmp, file);
  return true;
}

module.exports = {
  PROC_SYS,
  NOTE,
  NOT_SETTABLE,
  parse,
  higher,
  readLive,
  plan,
  apply,
  effectiveDropIn,
  writeIfChanged,
};
