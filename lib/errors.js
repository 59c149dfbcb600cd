'use strict';
// Errors a user can act on: the CLI prints the message alone, no stack.

class UsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UsageError';
  }
}

module.exports = { UsageError };
