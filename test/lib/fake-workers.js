'use strict';
// Stand-ins for the runner's worker processes, for unit tests of the primary's
// modules (app/lifecycle.js, app/rolling.js) that need no real fork: a fake
// worker is what cluster.fork returns, as far as the primary uses it, and it
// records what the primary sends it and which signals it got.

const { EventEmitter } = require('node:events');
const config = require('../../lib/config');
const { normalize } = require('../../app/settings');

/** The runner's settings as the definition renders them, with `overrides`, normalized. */
function runnerSettings(overrides = {}) {
  return normalize({ ...config.appSettings(config.resolve({})), ...overrides });
}

/** A fake cluster worker: `sent` (messages), `signals` (process.kill), `emit('message', m)` to talk. */
function fakeWorker(id) {
  const w = new EventEmitter();
  w.id = id;
  w.sent = [];
  w.signals = [];
  w.connected = true;
  w.process = { pid: 10000 + id, kill: (sig) => w.signals.push(sig) };
  w.send = (msg, handle, cb) => { w.sent.push({ msg, handle }); if (cb) cb(null); return true; };
  w.isConnected = () => w.connected;
  return w;
}

/** forkWorker(env) for Primary: fake workers numbered from 1, kept in `forked` with their env. */
function fakeCluster() {
  const forked = [];
  const forkWorker = (env) => {
    const w = fakeWorker(forked.length + 1);
    w.env = env;
    forked.push(w);
    return w;
  };
  return { forked, forkWorker };
}

/** A log function that keeps each event as { event, level, ...fields }. */
function recordingLog() {
  const events = [];
  const log = (level, event, fields = {}) => events.push({ level, event, ...fields });
  log.events = events;
  log.named = (name) => events.filter((e) => e.event === name);
  return log;
}

module.exports = { runnerSettings, fakeWorker, fakeCluster, recordingLog };
