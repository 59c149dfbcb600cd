'use strict';
// Targets a measurement can drive: the nginx of a local stack (lib/stack.js),
// the app's own socket behind it (`direct`), the nginx-static ceiling, or an
// existing deployment given by --url / --socket (no local pids: server CPU is
// not measured there).

const { startStaticNginx } = require('./static-nginx');

// The serving app workers of a stack: the runner's "ready" line lists them
// (it also keeps an idle spare child, which must not count as unserved);
// without that line, every child of the primary.
function appWorkers(stack) {
  const app = stack.pids().app;
  const listed = stack.ready && Array.isArray(stack.ready.workers) ? stack.ready.workers : null;
  return listed ? listed.filter((p) => app.includes(p)) : app.slice(1);
}

// nginx of a started stack.
function nginxTarget(name, stack, describe) {
  return {
    name,
    url: stack.url,
    ca: stack.ca || null, // https: the CA the generators trust
    socketPath: null,
    pids: () => stack.pids(),
    appWorkers: () => appWorkers(stack),
    errorLogPath: stack.errorLogPath,
    describe,
  };
}

// The app straight, no nginx: its UDS (autocannon) or TCP listener (wrk can
// only speak TCP).
function directTarget(name, stack, describe) {
  const listen = String(stack.appListen || '');
  let url = 'http://localhost/';
  let socketPath = null;
  if (listen.startsWith('unix:')) socketPath = listen.slice(5);
  else if (listen.startsWith('tcp:')) url = `http://${listen.slice(4)}/`;
  else throw new Error(`cannot drive the app directly: unknown appListen "${listen}"`);
  return {
    name,
    url,
    socketPath,
    pids: () => ({ nginx: [], app: stack.pids().app }),
    appWorkers: () => appWorkers(stack),
    errorLogPath: null,
    describe: `${describe} (${socketPath ? `unix:${socketPath}` : url})`,
  };
}

function remoteTarget({ url, socket, errorLog }) {
  return {
    name: socket ? 'socket' : 'url',
    url: url || 'http://localhost/',
    socketPath: socket || null,
    pids: null,
    errorLogPath: errorLog || null,
    describe: socket ? `existing socket ${socket}` : `existing deployment ${url}`,
  };
}

async function staticTarget(name, stack) {
  const s = await startStaticNginx(stack);
  return {
    target: {
      name,
      url: s.url,
      socketPath: null,
      pids: s.pids,
      errorLogPath: s.errorLogPath,
      describe: 'nginx `return 200` with the tuned nginx.conf (ceiling)',
    },
    stop: () => s.stop(),
  };
}

// lib/stack.js, loaded only when a local stack is wanted.
function loadStack() {
  try {
    return require('../lib/stack');
  } catch (err) {
    if (err.code === 'MODULE_NOT_FOUND' && /lib\/stack/.test(err.message)) {
      throw new Error('lib/stack.js is missing: the local stack cannot start. Use --url or --socket to target a running deployment');
    }
    throw err;
  }
}

module.exports = { nginxTarget, directTarget, remoteTarget, staticTarget, loadStack };
