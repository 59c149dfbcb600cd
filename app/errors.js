'use strict';
// The runner's errors. app/ stands alone (it is copied to hosts without the rest
// of the kit), so it cannot import lib/errors.js; the tunekit CLI (bin/tunekit.js)
// knows both modules and prints any of these as one line, no stack.

/** The base: an error whose message is meant for the user as it is. */
class AppError extends Error {
  get name() {
    return this.constructor.name;
  }
}

/** A settings object or file the runner refuses. */
class SettingsError extends AppError {}

/** A refusal at start (socket path, directory, fd): the runner logs it and exits non-zero. */
class ListenError extends AppError {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

module.exports = { AppError, SettingsError, ListenError };
