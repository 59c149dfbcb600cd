'use strict';
// `npm run generate`: every generated file of the tree, written from the one
// definition (roles/tunekit/defaults/main/*.yml) and the templates.
//
//   npm run generate              write what changed; print one line per file
//                                 written or removed (nothing when all is current)
//   npm run generate -- --check   write nothing; name each file that differs and
//                                 exit 1 (test/unit/generate.test.js runs this check)
//
// GENERATORS is the one list of what is generated. Each entry returns the files
// it owns ([{file, content}], paths relative to the repository) and the
// directories it owns whole (a file there that it does not produce is removed).
// They run in order and see what the ones before produced (the reference
// renders read the stock profile made just before them) through `ctx`; every
// file is computed before the first is written, so a generator that fails
// leaves the tree as it was.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT } = require('./template');
const config = require('./config');
const { defaultFiles } = require('./config/definition');
const types = require('./config/types');
const vartable = require('./config/vartable');
const { STOCK_PROFILE, stockProfile } = require('./config/stock');
const argspecs = require('./config/argspecs');
const apps = require('./config/apps');
const collection = require('./collection');
const renderer = require('./render');

const REFERENCE_DIR = 'docs/reference';
// The collection's metadata: its version line is package.json's version.
const GALAXY = 'galaxy.yml';
const REFERENCE_SETS = `${REFERENCE_DIR}/sets.json`;

/** A marked section of a document, rewritten in place. */
function section(ctx, rel, body, start, end) {
  return { file: rel, content: vartable.splice(ctx.read(rel), body, rel, start, end) };
}

/** galaxy.yml with package.json's version (the collection is released with the kit). */
function galaxy(ctx) {
  const { version } = JSON.parse(ctx.read('package.json'));
  const text = ctx.read(GALAXY);
  if (!/^version: .*$/m.test(text)) throw new Error(`${GALAXY} has no "version:" line; put one back (version: ${version})`);
  return { file: GALAXY, content: text.replace(/^version: .*$/m, `version: ${version}`) };
}

/** The reference renders listed in docs/reference/sets.json, each a whole directory. */
function referenceTrees(ctx) {
  const sets = JSON.parse(ctx.read(REFERENCE_SETS));
  const files = [];
  const dirs = [];
  for (const [name, set] of Object.entries(sets)) {
    const dir = `${REFERENCE_DIR}/${name}`;
    const vars = config.resolve({ varsFiles: set.vars.map((v) => ctx.pathOf(v)), set: set.set });
    for (const r of renderer.renderAll(vars)) files.push({ file: `${dir}${r.dest}`, content: r.content });
    dirs.push(dir);
  }
  return { files, dirs };
}

const GENERATORS = [
  {
    what: 'the Ansible roles\' per-app values and loop, from the # Per app: lines',
    run: () => ({
      files: [
        { file: apps.APP_VARS_TEMPLATE, content: apps.appVarsTemplate() },
        { file: apps.EACH_APP_TASKS, content: apps.eachAppTasks() },
      ],
    }),
  },
  {
    what: "the Ansible role's type checks, from the # Type: lines",
    run: () => ({ files: [{ file: types.TYPES_TEMPLATE, content: types.jinjaChecks(types.readTypes(defaultFiles())) }] }),
  },
  {
    what: 'the variables table, the live-sources table and the nginx version table, from the comments',
    run: (ctx) => ({
      files: [
        ...vartable.DOCUMENTS.map((rel) => {
          const text = vartable.splice(ctx.read(rel), vartable.table(), rel);
          // The live-sources table follows the variables table in its document.
          return { file: rel, content: rel === vartable.LIVE_DOCUMENT ? vartable.splice(text, vartable.liveTable(), rel, vartable.LIVE_START, vartable.LIVE_END) : text };
        }),
        section(ctx, vartable.VERSION_DOCUMENT, vartable.versionTable(), vartable.VERSION_START, vartable.VERSION_END),
      ],
    }),
  },
  {
    what: 'the stock profile, from the # Stock: lines',
    run: () => ({ files: [{ file: STOCK_PROFILE, content: stockProfile() }] }),
  },
  {
    what: "the roles' argument specs (ansible-doc, Ansible's validation), from the comments",
    run: () => ({ files: Object.keys(argspecs.ROLES).map((role) => ({ file: argspecs.specPath(role), content: argspecs.argumentSpec(role) })) }),
  },
  {
    what: "the collection's version (galaxy.yml), from package.json",
    run: (ctx) => ({ files: [galaxy(ctx)] }),
  },
  {
    what: "ansible-test sanity's ignore file, from the files the collection ships",
    run: (ctx) => ({ files: [{ file: collection.sanityIgnorePath(), content: collection.sanityIgnores(collection.shippedFiles(), ctx.read) }] }),
  },
  {
    what: 'the reference configs (docs/reference/sets.json), rendered from the templates',
    run: referenceTrees,
  },
];

function listFiles(rel) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(path.join(ROOT, d), { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  if (fs.existsSync(path.join(ROOT, rel))) walk(rel);
  return out;
}

function current(rel) {
  try {
    return fs.readFileSync(path.join(ROOT, rel), 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Run every generator. write=false changes nothing and only reports.
 * @returns {{file: string, change: 'written'|'removed'}[]} the files that differ(ed)
 */
function generate({ write = true, generators = GENERATORS } = {}) {
  const pending = new Map(); // file -> content, in the order produced
  const removed = [];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-generate-'));
  const ctx = {
    read: (rel) => (pending.has(rel) ? pending.get(rel) : fs.readFileSync(path.join(ROOT, rel), 'utf8')),
    // A path holding the file as generated so far (for readers that take a path).
    pathOf: (rel) => {
      if (!pending.has(rel)) return path.join(ROOT, rel);
      const file = path.join(tmp, rel);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, pending.get(rel));
      return file;
    },
  };
  try {
    for (const g of generators) {
      const { files, dirs = [] } = g.run(ctx);
      const produced = new Set(files.map((f) => f.file));
      for (const f of files) pending.set(f.file, f.content);
      for (const dir of dirs) removed.push(...listFiles(dir).filter((f) => !produced.has(f)));
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const changes = [];
  const stale = [];
  for (const [file, content] of pending) {
    if (current(file) === content) continue;
    stale.push({ dest: file, content, mode: 0o644 });
    changes.push({ file, change: 'written' });
  }
  // All written or none (lib/files.js writeTree), then what no generator produces removed.
  if (write && stale.length) renderer.writeFiles(ROOT, stale);
  for (const file of removed) {
    if (write) fs.rmSync(path.join(ROOT, file));
    changes.push({ file, change: 'removed' });
  }
  return changes;
}

/** The --check report: one line per file that differs, and the fix; '' when current. */
function checkReport(changes) {
  if (!changes.length) return '';
  const lines = changes.map((c) => (c.change === 'removed'
    ? `  ${c.file}: not generated any more (generate removes it)`
    : `  ${c.file}: differs from what generate writes`));
  return `${changes.length} generated file(s) out of date:\n${lines.join('\n')}\nrun: npm run generate`;
}

function main(argv) {
  const unknown = argv.filter((a) => a !== '--check');
  if (unknown.length) {
    console.error(`generate: unknown argument ${unknown[0]}; usage: npm run generate [-- --check]`);
    return 2;
  }
  if (argv.includes('--check')) {
    const report = checkReport(generate({ write: false }));
    if (report) console.error(report);
    return report ? 1 : 0;
  }
  for (const c of generate()) console.log(`${c.change === 'removed' ? 'removed' : 'wrote'} ${c.file}`);
  return 0;
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    // A definition or template the generators cannot read: one line, nothing more written.
    console.error(`generate: ${err.message}`);
    process.exitCode = 2;
  }
}

module.exports = { GENERATORS, generate, checkReport, main };
