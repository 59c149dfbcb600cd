'use strict';
// Targets a measurement can drive: the nginx of a local stack (lib/stack.js),
// the app's own socket behind it (`direct`), the nginx-static ceiling, or an
// existing deployment given by --url / --socket (no local pids: server CPU is
// not measured there).

const http = require('node:http');
const https = require('node:https');
const { startStaticNginx } = require('./static-nginx');
const { UsageError } = require('../lib/errors');
const { ERROR_MEANING } = require('./format');

// The longest the one request before a load waits for an answer (seconds): a
// deployment that is up answers a single GET far sooner; one that is not
// should not cost the user a whole run.
const PROBE_TIMEOUT_S = 5;

// The serving app workers of a stack: the runner's "ready" line lists them
// (it also keeps an idle spare child, which must not count as unserved);
// without that line, every child of the primary.
function appWorkers(stack) {
  const app = stack.pids().app;
  const listed = stack.ready && Array.isArray(stack.ready.workers) ? stack.ready.workers : null;
  return listed ? listed.filter((p) => app.includes(p)) : app.slice(1);
}

// The runner's metrics endpoint of a stack, which counts who served (measure.js);
// null when its metrics are off.
const metricsUrl = (stack) => (stack.metrics && stack.metrics.length ? stack.metrics[0].url : null);

// nginx of a started stack.
function nginxTarget(name, stack, describe) {
  return {
    name,
    url: stack.url,
    ca: stack.ca || null, // https: the CA the generators trust
    socketPath: null,
    pids: () => stack.pids(),
    appWorkers: () => appWorkers(stack),
    metricsUrl: metricsUrl(stack),
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
    metricsUrl: metricsUrl(stack),
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

// What to do about a target that did not answer the probe, by error code.
function probeFix(target, code) {
  if (target.socketPath) {
    if (code === 'ENOENT') return 'start the app, or give the path it listens on (its app.json "listen")';
    if (code === 'EACCES') return "run as a user in the socket's group, or as root";
    if (code === 'ECONNREFUSED') return 'the socket file is stale: nothing accepts on it; start or restart the app';
    return 'check that the app listens on this socket';
  }
  if (code === 'ECONNREFUSED') return 'nothing listens there: start the service, or fix the host and port in --url';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve: fix --url';
  return 'check that the service is up and --url is right';
}

// One connect and one GET to a deployment before its load starts, so a closed
// port or a missing socket is one line (exit 2) rather than a run of errors.
// Any HTTP response counts as an answer: the run reports its status codes.
function probeTarget(target, timeoutS = PROBE_TIMEOUT_S) {
  const flag = target.socketPath ? `--socket ${target.socketPath}` : `--url ${target.url}`;
  const url = new URL(target.url);
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const fail = (code, detail) => reject(new UsageError(`${flag}: ${detail}; ${probeFix(target, code)}`));
    // rejectUnauthorized false: the check is whether it answers, as the load
    // will be; autocannon does not verify a deployment's certificate either
    // (node_modules/autocannon/lib/httpClient.js).
    const tls = url.protocol === 'https:' ? { rejectUnauthorized: false } : {};
    const req = client.get(url, { ...tls, socketPath: target.socketPath || undefined, agent: false, timeout: timeoutS * 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', () => resolve(res.statusCode));
    });
    req.on('timeout', () => {
      req.destroy();
      fail('timeout', `no response within ${timeoutS} s to one GET`);
    });
    req.on('error', (err) => {
      // After a timeout the destroyed request errors too: the promise has settled already.
      fail(err.code, `${err.code || err.message}${ERROR_MEANING[err.code] ? ` (${ERROR_MEANING[err.code]})` : ''}`);
    });
  });
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

module.exports = { nginxTarget, directTarget, remoteTarget, staticTarget, loadStack, probeTarget, PROBE_TIMEOUT_S };
