'use strict';
// Directories and trees of files written where a user says (render --out,
// --json FILE, ...).
//
// makeDirs: Node's fs.mkdirSync(dir, { recursive: true }) never returns for a
// path under a file system that answers ENOENT for a child it cannot hold (procfs,
// sysfs): it reads ENOENT as "parent missing", finds the parent, and retries for
// ever. Seen here with Node 20 on `render --out /proc/x/y`; reported for Node 18
// and 22 in https://github.com/Kewton/CommandMate/issues/1774. makeDirs walks down
// from the deepest directory that exists and stops at the first failure, naming it.
//
// writeTree: several files written all or nothing (below).
//
// readYaml: a YAML file's text and document, parsed once per process while the
// file's text stays the same (the definition, the rule table: read again for every set of
// values resolved; parsing them was most of a `tune` candidate's rule check).

const fs = require('node:fs');
const path = require('node:path');
const { KitError } = require('./errors');

/**
 * mkdir -p that always ends: every missing directory of `dir`, top down.
 * @param {string} dir
 * @param {object} [opts]
 * @param {number} [opts.mode]  mode of the directories it creates
 * @param {string} [opts.what]  how the user named it, for the message ("--out /x")
 * @param {string} [opts.asRoot]  the command line as root, offered on a permission error
 * @returns {string[]} the directories it created, top down
 */
function makeDirs(dir, { mode, what, asRoot } = {}) {
  const missing = [];
  const made = [];
  let d = path.resolve(dir);
  for (;;) {
    let st = null;
    try {
      st = fs.statSync(d);
    } catch (err) {
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw cannotCreate(dir, d, err, what, asRoot);
    }
    if (st) {
      if (!st.isDirectory()) throw new KitError(`${what || dir}: ${d} is not a directory; choose a path under a directory`);
      break;
    }
    missing.unshift(d);
    const parent = path.dirname(d);
    if (parent === d) break;
    d = parent;
  }
  for (const m of missing) {
    try {
      fs.mkdirSync(m, mode === undefined ? undefined : { mode });
      made.push(m);
    } catch (err) {
      if (err.code !== 'EEXIST') {
        removeDirs(made);
        throw cannotCreate(dir, m, err, what, asRoot);
      }
    }
  }
  return made;
}

/** Remove directories made here, deepest first, each only if still empty. */
function removeDirs(made) {
  for (const d of [...made].reverse()) {
    try {
      fs.rmdirSync(d);
    } catch {
      // not empty any more, or already gone: leave it
    }
  }
}

function cannotCreate(dir, at, err, what, asRoot) {
  const why = err.code === 'ENOENT' ? 'its file system does not allow it' : reason(err);
  return new KitError(`${what || dir}: cannot create ${at} (${why}); ${fixFor(err, asRoot)}`);
}

// What to do about a path that cannot be written: a permission error as an
// unprivileged user can be the wrong user (the command as root, when the caller
// has one to offer) or the wrong path.
function fixFor(err, asRoot) {
  const denied = (err.code === 'EACCES' || err.code === 'EPERM') && process.getuid && process.getuid() !== 0;
  return denied && asRoot ? `choose a path you can write to, or run it as root: ${asRoot}` : 'choose a path where you can write';
}

const REASONS = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'a directory, not a file',
  ENOTDIR: 'a part of the path is not a directory',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
};

/** A file-system error in words, with its code: "no such file (ENOENT)". */
function reason(err) {
  return REASONS[err.code] ? `${REASONS[err.code]} (${err.code})` : err.code || err.message;
}

/** A failed step of writeTree: which path, what was done, the system's error. */
class TreeError extends Error {
  constructor(at, doing, cause) {
    super(`${doing} ${at}: ${cause.message}`);
    Object.assign(this, { at, doing, cause });
  }
}

function step(at, doing, fn) {
  try {
    return fn();
  } catch (err) {
    throw err instanceof TreeError || err instanceof KitError ? err : new TreeError(at, doing, err);
  }
}

/** lstat, or null when nothing is there. */
function lstatOrNull(p) {
  try {
    return fs.lstatSync(p);
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
    throw new TreeError(p, 'cannot read', err);
  }
}

/** Whether p is (or links to) a directory; null when nothing is there. */
function isDirectory(p) {
  try {
    return fs.statSync(p).isDirectory();
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return lstatOrNull(p) ? false : null;
    throw new TreeError(p, 'cannot read', err);
  }
}

/** Every directory and file under dir, parents before children: [{ rel, dir, mode }]. */
function walk(dir, rel = '') {
  const out = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const r = path.join(rel, e.name);
    const mode = fs.lstatSync(path.join(dir, r)).mode & 0o7777;
    if (e.isDirectory()) out.push({ rel: r, dir: true, mode }, ...walk(dir, r));
    else out.push({ rel: r, dir: false, mode });
  }
  return out;
}

/**
 * Write a tree of files under root, all or nothing. build(dir) writes the tree
 * into dir, a staging directory on root's file system: beside root when root does
 * not exist yet (then the staging directory becomes root by one rename), else
 * inside it. Then each staged file is renamed to its place under root, which keeps
 * every file already there that the tree does not name, and replaces (by rename)
 * the ones it does. Missing directories are created with the staged one's mode;
 * existing ones are kept as they are.
 *
 * The guarantee: when writeTree throws, root is as it was — every file it had
 * moved is moved back (a replaced file is restored from the staging directory),
 * every directory it made is removed (root and its parents included), and the
 * staging directory is gone. A reader may see some new files and some old ones
 * while the renames run; none ever sees a half-written file. The error is one
 * line (a KitError): the path, what failed and why, that nothing changed, and
 * the fix (for a permission error as an unprivileged user: the command as root).
 *
 * @param {string} root
 * @param {(dir: string) => void} build
 * @param {object} [opts]
 * @param {string} [opts.what]  how the user named root, for messages ("--out /x")
 * @param {string} [opts.asRoot]  the command line that writes it as root ("sudo ..."), offered on a permission error
 * @returns {string[]} the files written, absolute, in the tree's order
 */
function writeTree(root, build, { what, asRoot } = {}) {
  root = path.resolve(root);
  const exists = isDirectory(root);
  if (exists === false) throw new KitError(`${what || root}: ${root} is not a directory; choose a directory (new or existing) for the tree`);
  const made = exists ? [] : makeDirs(path.dirname(root), { what, asRoot });
  const parent = exists ? root : path.dirname(root);
  let stage = null;
  let tree = null;
  try {
    stage = step(parent, 'cannot write in', () => fs.mkdtempSync(path.join(parent, `.${exists ? 'tunekit' : path.basename(root)}.staging-`)));
    tree = path.join(stage, 'tree');
    step(tree, 'cannot create', () => fs.mkdirSync(tree));
    try {
      build(tree);
    } catch (err) {
      // A system error of build's own writes, named by where the file was going.
      if (err instanceof KitError || !err.syscall) throw err;
      throw new TreeError(err.path ? path.join(root, path.relative(tree, err.path)) : root, 'cannot write', err);
    }
    const entries = step(tree, 'cannot read', () => walk(tree));
    if (exists) merge(tree, root, entries, path.join(stage, 'replaced'));
    else step(root, 'cannot create', () => fs.renameSync(tree, root));
    return entries.filter((e) => !e.dir).map((e) => path.join(root, e.rel));
  } catch (err) {
    // The staging directory first: it may sit in a parent made here.
    if (stage) fs.rmSync(stage, { recursive: true, force: true });
    stage = null;
    removeDirs(made);
    if (!(err instanceof TreeError)) throw err;
    throw treeFailure(err, { root, what, asRoot, existed: exists });
  } finally {
    if (stage) fs.rmSync(stage, { recursive: true, force: true });
  }
}

// A TreeError as the one line the user reads.
function treeFailure(err, { root, what, asRoot, existed }) {
  const why = err.cause.code === 'EXDEV' ? 'it is on another file system than the rest of the tree' : reason(err.cause);
  const changed = err.undo ? `; ${err.undo}` : existed ? `; nothing under ${root} was changed` : '; nothing was written';
  return new KitError(`${what || root}: ${err.doing} ${err.at} (${why})${changed}; ${err.fix || fixFor(err.cause, asRoot)}`);
}

/** Something of the user's where the tree puts a file or a directory: never moved or replaced. */
function inTheWay(target, what) {
  return Object.assign(new TreeError(target, 'cannot write', new Error(`it is ${what}`)), { fix: `move ${target} away, or choose another path` });
}

// The staged tree's entries moved into root, each replaced file kept in `replaced`
// until all are in place; on a failure, everything moved back. An error thrown
// here says in `undo` what could not be put back, if anything.
function merge(tree, root, entries, replaced) {
  // What would stop the merge halfway, found before anything moves.
  for (const e of entries) {
    const target = path.join(root, e.rel);
    const dir = isDirectory(target);
    if (e.dir && dir === false) throw inTheWay(target, 'a file, where the tree has a directory');
    if (!e.dir && dir === true) throw inTheWay(target, 'a directory, where the tree has a file');
  }
  const done = []; // { target, backup } in order, and { made: dir }
  try {
    for (const e of entries) {
      const target = path.join(root, e.rel);
      if (e.dir) {
        if (isDirectory(target)) continue;
        step(target, 'cannot create', () => fs.mkdirSync(target, { mode: e.mode }));
        done.push({ made: target });
        continue;
      }
      let backup = null;
      if (lstatOrNull(target)) {
        backup = path.join(replaced, e.rel);
        step(path.dirname(backup), 'cannot create', () => fs.mkdirSync(path.dirname(backup), { recursive: true }));
        step(target, 'cannot replace', () => fs.renameSync(target, backup));
      }
      done.push({ target, backup });
      step(target, 'cannot write', () => fs.renameSync(path.join(tree, e.rel), target));
    }
  } catch (err) {
    const lost = [];
    for (const d of done.reverse()) {
      try {
        if (d.made) fs.rmdirSync(d.made);
        else if (d.backup) fs.renameSync(d.backup, d.target);
        else fs.rmSync(d.target, { force: true });
      } catch (undoErr) {
        lost.push(`${d.made || d.target} (${reason(undoErr)})`);
      }
    }
    if (lost.length && err instanceof TreeError) err.undo = `and could not put back ${lost.join(', ')}`;
    throw err;
  }
}

const PARSED = new Map();

/**
 * A YAML file read and parsed; the parse kept while the file's text stays the same
 * (read every time: a read is cheap, a parse is not, and a file rewritten within the
 * same mtime tick is still seen).
 * Throws what fs.readFileSync and YAML.parse throw (the caller words it).
 * @param {string} file
 * @returns {{text: string, doc: any}} doc: a copy of its own, the caller may change it
 */
function readYaml(file) {
  const text = fs.readFileSync(file, 'utf8');
  const kept = PARSED.get(file);
  if (kept && kept.text === text) return { text, doc: structuredClone(kept.doc) };
  const doc = require('yaml').parse(text);
  PARSED.set(file, { text, doc });
  return { text, doc: structuredClone(doc) };
}

module.exports = { makeDirs, reason, writeTree, readYaml };
