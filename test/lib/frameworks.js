'use strict';
// The frameworks docs/frameworks.md's recipes run with, installed where they do
// not weigh on the kit's own `npm ci`: test/fixtures/frameworks/ holds a package
// (package.json + package-lock.json, exact versions) that `ensureFrameworks()`
// installs once with `npm ci` into
//   $TUNEKIT_FRAMEWORKS_CACHE/frameworks-<hash of the lock>   (default /var/cache/tunekit)
// and `ensureNextBuild()` runs `next build` once for the Next.js fixture app into
//   …/frameworks-<hash of the lock>/next-<hash of the app's files>
// (inside the install: Turbopack resolves `next` only below the nearest lockfile,
// not through a node_modules symlink).
// Both build into a sibling temp dir and rename, so a half-built tree is never
// used; a new lock or app file gives a new directory (old ones can be deleted).
//
//   node test/lib/frameworks.js build     install and build by hand (prints the dirs)
//
// recipes(file) reads the recipes out of the Markdown: a fenced block whose info
// string carries `recipe=NAME file=FILE` is the module a user writes; the test
// writes it as FILE, unchanged, and runs it (the docs' code is the test's code).

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('./util');

const FIXTURE = path.resolve(__dirname, '../fixtures/frameworks');
const NEXT_APP = path.join(FIXTURE, 'next-app');
const CACHE_DIR = process.env.TUNEKIT_FRAMEWORKS_CACHE || '/var/cache/tunekit';
const COMPLETE = '.tunekit-complete';

const log = (m) => process.stderr.write(`frameworks: ${m}\n`);

function hashOf(files) {
  const h = crypto.createHash('sha256');
  for (const f of files) h.update(`${path.relative(FIXTURE, f)}\n`).update(fs.readFileSync(f));
  return h.digest('hex').slice(0, 12);
}

function filesUnder(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath || e.path, e.name))
    .sort();
}

/** Build dest with build(tmp) unless it is complete; returns dest. */
async function cached(dest, what, build) {
  if (fs.existsSync(path.join(dest, COMPLETE))) return dest;
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const tmp = fs.mkdtempSync(`${dest}.building-`);
  const started = Date.now();
  log(`${what} into ${dest} (once)`);
  try {
    await build(tmp);
    fs.writeFileSync(path.join(tmp, COMPLETE), `${new Date().toISOString()}\n`);
    if (fs.existsSync(path.join(dest, COMPLETE))) {
      // Another run finished the same build first.
      fs.rmSync(tmp, { recursive: true, force: true });
      return dest;
    }
    fs.rmSync(dest, { recursive: true, force: true }); // an unfinished tree
    fs.renameSync(tmp, dest);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  log(`${what}: done in ${Math.round((Date.now() - started) / 1000)} s`);
  return dest;
}

async function must(cmd, args, opts) {
  const r = await runCommand(cmd, args, opts);
  if (r.code !== 0) throw new Error(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.code}):\n${r.out.trim().split('\n').slice(-30).join('\n')}`);
  return r;
}

/** The cached install of test/fixtures/frameworks; returns its dir (node_modules inside). */
function ensureFrameworks() {
  const lock = path.join(FIXTURE, 'package-lock.json');
  const dest = path.join(CACHE_DIR, `frameworks-${hashOf([path.join(FIXTURE, 'package.json'), lock])}`);
  return cached(dest, 'npm ci of test/fixtures/frameworks', async (tmp) => {
    for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(FIXTURE, f), path.join(tmp, f));
    // No install scripts: nothing here needs one (sharp, which Next.js may use,
    // ships prebuilt binaries as optional packages).
    await must('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: tmp, timeoutMs: 600000 });
  });
}

/** The fixture Next.js app, built (`next build`) against the cached install; returns its dir. */
async function ensureNextBuild() {
  const frameworks = await ensureFrameworks();
  const appFiles = filesUnder(NEXT_APP);
  const dest = path.join(frameworks, `next-${hashOf(appFiles)}`);
  return cached(dest, 'next build of test/fixtures/frameworks/next-app', async (tmp) => {
    fs.cpSync(NEXT_APP, tmp, { recursive: true });
    await must(process.execPath, [path.join(frameworks, 'node_modules/next/dist/bin/next'), 'build'], {
      cwd: tmp,
      env: { NEXT_TELEMETRY_DISABLED: '1', NODE_ENV: 'production' },
      timeoutMs: 600000,
    });
    fs.rmSync(path.join(tmp, '.next/cache'), { recursive: true, force: true });
  });
}

/** The recipes in a Markdown file: { NAME: { file, code } } from ```js recipe=NAME file=FILE blocks. */
function recipes(markdown) {
  const out = {};
  const re = /^```(\w+)[ \t]+([^\n]*)\n([\s\S]*?)^```$/gm;
  for (const m of fs.readFileSync(markdown, 'utf8').matchAll(re)) {
    const attrs = Object.fromEntries([...m[2].matchAll(/(\w+)=(\S+)/g)].map((a) => [a[1], a[2]]));
    if (!attrs.recipe) continue;
    if (!attrs.file) throw new Error(`${markdown}: recipe ${attrs.recipe} has no file=`);
    if (out[attrs.recipe]) throw new Error(`${markdown}: recipe ${attrs.recipe} appears twice`);
    out[attrs.recipe] = { file: attrs.file, code: m[3] };
  }
  return out;
}

/**
 * A scratch dir for one recipe: the module written as its file, beside a
 * node_modules link to the cached install (extra: more files, { name: text }, or
 * `copyFrom`, a tree copied in first). Removed by the returned cleanup.
 */
function recipeDir(recipe, frameworks, { copyFrom = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-recipe-'));
  if (copyFrom) {
    fs.cpSync(copyFrom, dir, { recursive: true, filter: (src) => path.basename(src) !== 'node_modules' && path.basename(src) !== COMPLETE });
  }
  fs.symlinkSync(path.join(frameworks, 'node_modules'), path.join(dir, 'node_modules'));
  const file = path.join(dir, recipe.file);
  fs.writeFileSync(file, recipe.code);
  return { dir, file, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

module.exports = { ensureFrameworks, ensureNextBuild, recipes, recipeDir, CACHE_DIR };

if (require.main === module && process.argv[2] === 'build') {
  ensureNextBuild().then(async (next) => {
    process.stdout.write(`${await ensureFrameworks()}\n${next}\n`);
  }, (err) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}
