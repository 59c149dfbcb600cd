'use strict';
// The kit's errors, one module for lib/, bin/ and loadtest/ (app/ stands alone
// on hosts and has its own, app/errors.js). Each is one a user can act on: the CLI
// prints its message alone, one line, no stack (bin/tunekit.js), and exits 2.

/** The base: every error whose message is meant for the user as it is. */
class KitError extends Error {
  get name() {
    return this.constructor.name;
  }
}

/** A command line the command cannot take (unknown flag, missing value). */
class UsageError extends KitError {}

/** A variable or settings file the kit refuses (wrong type, broken rule, unreadable). */
class ConfigError extends KitError {}

/** The local stack (lib/stack.js) did not come up: the app or nginx said why. */
class StackError extends KitError {}

/** A tool the command needs is not installed (wrk, strace, perf). */
class MissingToolError extends KitError {}

/** An npm package of the kit's is not installed (a clone without `npm ci`, a broken install). */
class MissingPackageError extends KitError {}

const ROOT = require('node:path').resolve(__dirname, '..');

/** The error that says packages `names` are missing and the command that installs them. */
function missingPackages(names) {
  const what = names.length === 1 ? `npm package ${names[0]} is` : `npm packages ${names.join(', ')} are`;
  return new MissingPackageError(`${what} not installed; ${require('./kit').installCommand()}`);
}

/**
 * A require() that failed because one of the kit's own npm packages is missing,
 * as a MissingPackageError; null for any other error (a module of the user's
 * app that is missing stays the app's error).
 */
function missingPackage(err) {
  if (!err || err.code !== 'MODULE_NOT_FOUND') return null;
  const m = /^Cannot find module '([^']+)'/.exec(err.message);
  if (!m) return null;
  // 'nunjucks/src/compiler' is the package nunjucks; '@scope/name/x' is @scope/name.
  const parts = m[1].split('/');
  const name = m[1].startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  let pkg;
  try {
    pkg = JSON.parse(require('node:fs').readFileSync(`${ROOT}/package.json`, 'utf8'));
  } catch {
    return null; // a part of the kit copied alone (sysctl's files on a host): no packages to name
  }
  if (!Object.hasOwn({ ...pkg.dependencies, ...pkg.devDependencies }, name)) return null;
  // Name every dependency that is missing: one `npm ci` installs them all.
  const missing = notInstalled(Object.keys(pkg.dependencies));
  return missingPackages(missing.includes(name) ? missing : [name]);
}

/** Those of the npm packages `names` that the kit cannot load. */
function notInstalled(names) {
  return names.filter((name) => {
    try {
      require.resolve(name, { paths: [ROOT] });
      return false;
    } catch {
      return true;
    }
  });
}

module.exports = { KitError, UsageError, ConfigError, StackError, MissingToolError, MissingPackageError, missingPackages, missingPackage, notInstalled };
