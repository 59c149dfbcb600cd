'use strict';
// What the runner can check before it binds or forks anything, checked all at
// once so a newcomer sees every problem in one go: the module can be found,
// the socket's directory is there and writable, its path fits sun_path, its
// group exists, its mode is one a socket can have.

const path = require('node:path');
const { endpointOf, parseMode, socketPaths } = require('./settings');
const sock = require('./socket');
const { ListenError } = require('./errors');

/** Every problem found, as messages (empty: nothing to stop the start). */
function problems(settings) {
  const found = [];
  const attempt = (fn) => {
    try {
      fn();
    } catch (err) {
      found.push(err.message);
    }
  };
  if (settings.module) {
    attempt(() => {
      try {
        require.resolve(path.resolve(settings.module));
      } catch {
        throw new Error(`the app module ${settings.module} cannot be found: give the path of its entry file`);
      }
    });
  }
  if (endpointOf(settings).kind === 'unix') {
    const paths = socketPaths(settings);
    attempt(() => sock.checkDirectory(paths[0]));
    for (const p of paths) attempt(() => sock.checkPathLength(p));
    attempt(() => sock.resolveGroup(settings.socketGroup));
    attempt(() => parseMode(settings.socketMode));
  }
  return found;
}

/** Throw one ListenError listing every problem, or return. */
function preflight(settings) {
  const found = problems(settings);
  if (found.length === 1) throw new ListenError(found[0], 'EPREFLIGHT');
  if (found.length) throw new ListenError(`cannot start, ${found.length} problems:\n  - ${found.join('\n  - ')}`, 'EPREFLIGHT');
}

module.exports = { problems, preflight };
