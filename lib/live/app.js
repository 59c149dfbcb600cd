'use strict';
// The app's own values: the runner's app.json, GET /healthz where the app
// reports its live timeouts (the kit's runner, the example app), else its idle
// close and headers wait measured black-box (lib/probe.js); appTimeouts() says
// which of them the timeouts come from.

const fs = require('node:fs');
const http = require('node:http');
const probe = require('../probe');
const config = require('../config');
const { readFailure } = require('./host');
const { pooled } = require('./nginx');

// The runner's settings when no path is given.
const DEFAULT_APP_CONFIG = '/etc/tunekit-app/app.json';

function healthz(socketPath, timeoutMs = 3000) {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/healthz', timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode, body: JSON.parse(body) });
        } catch {
          resolve({ status: res.statusCode, body: null });
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.code || err.message }));
  });
}

/**
 * An app that says nothing of its timeouts (no app.json, no /healthz: not the
 * kit's runner): measured black-box over its socket, else the loopback address
 * of a pooled upstream's server (lib/probe.js: two connections, a time budget).
 * An app on another host is not probed from here.
 */
async function probeApp(facts, socket, probePath) {
  let target = socket ? { socketPath: socket.path } : null;
  if (!target && facts.nginx) {
    const server = pooled(facts.nginx).flatMap((up) => up.servers).find((s) => /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(s));
    if (server) {
      const at = server.lastIndexOf(':');
      target = { host: server.slice(0, at).replace(/^\[|\]$/g, '').replace('localhost', '127.0.0.1'), port: Number(server.slice(at + 1)) };
    }
  }
  if (!target) {
    if (facts.nginx && pooled(facts.nginx).length) facts.skipped.push({ layer: 'app probe', why: 'no app socket or loopback server to measure the app\'s timeouts on (pass --app-config, or --socket PATH)' });
    return;
  }
  const name = target.socketPath || `${target.host}:${target.port}`;
  try {
    facts.app.probe = { target: name, ...await probe.probeApp(target, { path: probePath || '/' }) };
    facts.read.push(`the app on ${name}, measured (HEAD ${probePath || '/'} then idle; a request whose headers never end; ${probe.BUDGET_MS / 1000} s at most)`);
  } catch (err) {
    facts.errors.push(`measuring the app on ${name}: ${err.message}`);
  }
}

/** The runner's app.json, parsed; null when it cannot be read (an error, or a skip for a default path that does not exist). */
function gatherAppSettings(facts, appConfig, explicit) {
  let text;
  try {
    text = fs.readFileSync(appConfig, 'utf8');
    facts.read.push(appConfig);
  } catch (err) {
    if (explicit || err.code !== 'ENOENT') facts.errors.push(readFailure(appConfig, err));
    else facts.skipped.push({ layer: 'app.json', why: `${appConfig} does not exist (pass --app-config PATH)` });
    return null;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    facts.errors.push(`${appConfig} is not JSON: ${err.message}`);
    return null;
  }
}

/**
 * What Node adds to keepAliveTimeout before it closes an idle connection: the
 * live server.keepAliveTimeoutBuffer where the app reports it, else what its Node
 * version adds (tunekit_app_keepalive_buffer_ms of the definition); 0 when
 * neither is known (the stricter comparison).
 */
function keepAliveBuffer(hz) {
  if (hz && Number.isFinite(hz.keepAliveTimeoutBuffer)) return { ms: hz.keepAliveTimeoutBuffer, from: `server.keepAliveTimeoutBuffer, Node ${hz.node || '?'}` };
  if (hz && typeof hz.node === 'string' && /^\d+\.\d+\.\d+$/.test(hz.node)) {
    const ms = Number(config.resolve({ set: [`tunekit_node_version=${hz.node}`], check: false }).tunekit_app_keepalive_buffer_ms);
    return { ms, from: `Node ${hz.node}` };
  }
  return { ms: 0, from: null };
}

/** The app's live timeouts: from GET /healthz, else app.json; null when neither. */
function appTimeouts(app) {
  const hz = app && app.healthz;
  if (hz && hz.keepAliveTimeout != null) {
    const buffer = keepAliveBuffer(hz);
    return { keepAliveMs: hz.keepAliveTimeout, headersMs: hz.headersTimeout ?? null, bufferMs: buffer.ms, bufferFrom: buffer.from, from: 'live /healthz' };
  }
  if (app && app.settings) return { keepAliveMs: app.settings.keepAliveTimeoutMs, headersMs: app.settings.headersTimeoutMs ?? null, bufferMs: 0, bufferFrom: null, from: 'app.json' };
  if (app && app.probe) return probedTimeouts(app.probe);
  return null;
}

/**
 * The timeouts lib/probe.js measured, as appTimeouts gives them: the idle close
 * as measured (Node's buffer included: no bufferMs); a bound the budget ended
 * before is marked atLeast; a hint not waited for is the hint. An app that
 * closes after every answer keeps nothing idle: closesEachResponse.
 */
function probedTimeouts(p) {
  const k = p.keepAlive;
  const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
  const on = `measured on ${p.target}`;
  let keep;
  if (k.connection === 'close') keep = { keepAliveMs: 0, closesEachResponse: true, from: `${on}: it answers "Connection: close"` };
  else if (k.notWaited) keep = { keepAliveMs: k.hintS * 1000, from: `its "Keep-Alive: timeout=${k.hintS}" hint on ${p.target}; the close itself is past the probe's budget` };
  else if (k.closedAfterMs != null) keep = { keepAliveMs: Math.round(k.closedAfterMs), from: `${on}: closed after ${secs(k.closedAfterMs)} idle` };
  else keep = { keepAliveMs: Math.round(k.openAfterMs), atLeast: true, from: `${on}: still open after ${secs(k.openAfterMs)} idle, when the probe stopped` };
  const h = p.headers;
  const headers = h.closedAfterMs != null
    ? { headersMs: Math.round(h.closedAfterMs), headersFrom: `${on}: unfinished headers answered ${h.status || 'with a close'} after ${secs(h.closedAfterMs)}` }
    : { headersMs: Math.round(h.openAfterMs), headersAtLeast: true, headersFrom: `${on}: unfinished headers still waited on after ${secs(h.openAfterMs)}` };
  return { ...keep, ...headers, bufferMs: 0, bufferFrom: null, measured: true };
}

/** "5000 ms" or "5000 ms + 1000 ms keepAliveTimeoutBuffer": when Node closes an idle connection. */
function closeTime(t) {
  return t.bufferMs ? `${t.keepAliveMs} ms + ${t.bufferMs} ms keepAliveTimeoutBuffer (${t.bufferFrom})` : `${t.keepAliveMs} ms`;
}


module.exports = { DEFAULT_APP_CONFIG, healthz, probeApp, gatherAppSettings, appTimeouts, probedTimeouts, keepAliveBuffer, closeTime };
