'use strict';
// How this copy of the kit was installed, and what follows from it for the
// commands the CLI prints: the one place that knows whether a user types
// `node bin/tunekit.js`, `tunekit` or `npx tunekit`, and what installs a missing
// npm package. Read from where the kit's files are, not from a setting:
//   - a checkout (a clone, or any folder that is not an npm package's home):
//     `node bin/tunekit.js` from its root, `node /abs/bin/tunekit.js` elsewhere;
//     its npm packages come from `npm ci` in the checkout;
//   - an npm package (ROOT is node_modules/tunekit), which came with its packages:
//     global (`npm install -g`: PREFIX/lib/node_modules/tunekit, its bin linked
//     into PREFIX/bin), npx's (its cache, ~/.npm/_npx/HASH/node_modules/tunekit),
//     or a project's dependency (PROJECT/node_modules/tunekit).
// https://docs.npmjs.com/cli/v10/configuring-npm/folders

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const CLI = path.join(ROOT, 'bin/tunekit.js');
const NAME = 'tunekit';

function realpath(p) {
  try {
    return fs.realpathSync(p);
  } catch {
    return null;
  }
}

/**
 * { kind: 'checkout' | 'global' | 'npx' | 'dependency', project }: project is the
 * folder of a dependency's package.json. root: where the kit's files are.
 */
function installation(root = ROOT) {
  const parent = path.dirname(root);
  if (path.basename(parent) !== 'node_modules') return { kind: 'checkout' };
  if (root.split(path.sep).includes('_npx')) return { kind: 'npx' };
  const above = path.dirname(parent);
  // A project has its package.json beside node_modules; npm's global folder
  // (PREFIX/lib/node_modules on Unix) has none.
  if (fs.existsSync(path.join(above, 'package.json'))) return { kind: 'dependency', project: above };
  return { kind: 'global' };
}

/**
 * Whether `tunekit` typed in the user's shell runs this copy: the first `tunekit`
 * on PATH is ours. Entries ending in node_modules/.bin are left out: npm puts
 * them there for the command it runs (npm run, npx), not the user's shell.
 */
function onPath(env = process.env, cli = CLI) {
  const mine = realpath(cli);
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (!dir || dir.endsWith(`node_modules${path.sep}.bin`)) continue;
    const candidate = path.join(dir, NAME);
    if (!fs.existsSync(candidate)) continue;
    return realpath(candidate) === mine;
  }
  return false;
}

/**
 * How the user runs this CLI from `cwd`, for the commands it prints:
 * a checkout: `node bin/tunekit.js` in the kit's folder, its absolute path elsewhere;
 * a package: `tunekit` when that is this copy on the user's PATH, `npx tunekit` for
 * npx's copy and a project's dependency (from inside the project), else its absolute path.
 */
function invocation({ cwd = process.cwd(), env = process.env, root = ROOT } = {}) {
  const cli = path.join(root, 'bin/tunekit.js');
  const where = installation(root);
  if (where.kind === 'checkout') {
    const rel = path.relative(cwd, cli);
    return `node ${rel.startsWith('..') || path.isAbsolute(rel) ? cli : rel}`;
  }
  if (onPath(env, cli)) return NAME;
  if (where.kind === 'npx') return `npx ${NAME}`;
  if (where.kind === 'dependency') {
    const rel = path.relative(where.project, cwd);
    if (!rel.startsWith('..') && !path.isAbsolute(rel)) return `npx ${NAME}`;
  }
  return `node ${cli}`;
}

/**
 * The commands that install this copy of a package again, here or on another
 * host, from its own files: `npm pack` of an installed package's folder makes
 * the tarball it was installed from (the same files, by its `files`), and the
 * kit is not on the npm registry, so no name alone installs it.
 */
function repack(root) {
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  return { pack: `npm pack ${root}`, install: `npm install -g ./${NAME}-${version}.tgz` };
}

/** The command that installs the kit's npm packages, for "missing npm package" lines. */
function installCommand({ root = ROOT } = {}) {
  const where = installation(root);
  if (where.kind === 'checkout') return `run \`npm ci\` in ${root}`;
  if (where.kind === 'dependency') return `run \`npm install\` in ${where.project}`;
  if (where.kind === 'npx') return `clear npx's copy (\`rm -rf ${path.dirname(path.dirname(root))}\`) and run \`npx ${NAME}\` again`;
  const again = repack(root);
  return `reinstall it from its own files: \`${again.pack} && ${again.install}\``;
}

/**
 * What a host's install steps say before the kit's own command runs there (the
 * steps run as root on the host, perhaps another machine than the render's):
 * a checkout needs its npm packages; a package is installed where it runs.
 */
function onTheHost({ root = ROOT } = {}) {
  const where = installation(root);
  if (where.kind === 'checkout') return `(run npm ci in ${root} first)`;
  if (where.kind === 'npx') return '(npx fetches the kit where it runs)';
  const again = repack(root);
  return `(on another host, install the kit there first: ${again.pack} here makes its tarball, ${again.install} there)`;
}

module.exports = { ROOT, CLI, NAME, installation, onPath, invocation, installCommand, onTheHost };
