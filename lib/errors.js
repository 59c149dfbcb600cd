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

module.exports = { KitError, UsageError, ConfigError, StackError, MissingToolError };
