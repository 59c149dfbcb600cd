'use strict';
// Restarts with bodies: nginx reloads (SIGHUP to its master) and rolling restarts
// of the app (SIGHUP to the runner's primary: one worker at a time is replaced,
// the old one drains) under a load of GETs and POSTs with bodies of 0..64 KB.
//
// The load and its checks are test/faults/bodies.js: every POST body reached the
// app whole, once; a request reset before any byte of its answer is retried once.
// The same load runs under `pm2 reload` (test/integration/host-pm2.test.js) and
// `systemctl reload` on a booted systemd host (test/e2e/host-systemd.test.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startHashStack, doctor } = require('./stack');
const bodies = require('./bodies');
const { record } = require('./report');
const { until } = require('../lib/util');

const NGINX_RELOADS = 6;
const APP_RELOADS = 3;
const CONNECTIONS = 12;

const appEvents = (stack, event) => fs.readFileSync(stack.appLogPath, 'utf8').split('\n')
  .filter((l) => l.startsWith('{') && JSON.parse(l).event === event).length;

test(`${NGINX_RELOADS} nginx reloads and ${APP_RELOADS} rolling restarts of the app under GETs and POSTs of 0..64 KB: no body lost, corrupted or duplicated`, { timeout: 180_000 }, async (t) => {
  const stack = await startHashStack(t, { workers: 2 });
  const nginxMaster = stack.pids().nginx[0];
  const primary = stack.pids().app[0];
  const workersBefore = stack.pids().app.slice(1);
  let done = false;
  const started = Date.now();
  // Bounded by the restarts below (done, also when a wait throws), and by 150 s.
  const live = {};
  const running = bodies.load(stack.url, () => done || Date.now() - started > 150_000, { connections: CONNECTIONS, live });
  // Each restart goes out once the load flows: CONNECTIONS requests finished since the last one.
  const flowing = (what) => bodies.flowing(live, what, CONNECTIONS);
  // nginx, app, nginx, nginx, app, ...: each restart waits for its effect (nginx's
  // new workers, the app's reload-done) before the next.
  let nginxReloads = 0;
  let appReloads = 0;
  try {
    while (nginxReloads < NGINX_RELOADS || appReloads < APP_RELOADS) {
      await flowing(`before restart ${nginxReloads + appReloads + 1}`);
      if (appReloads < APP_RELOADS && (nginxReloads >= NGINX_RELOADS || nginxReloads % 2 === 1)) {
        process.kill(primary, 'SIGHUP');
        appReloads += 1;
        await until(`the app's rolling restart ${appReloads} to be done`, () => appEvents(stack, 'reload-done') >= appReloads, 60_000, 50);
      } else {
        const old = stack.pids().nginx;
        process.kill(nginxMaster, 'SIGHUP');
        nginxReloads += 1;
        await until(`nginx reload ${nginxReloads} to start new workers`, () => stack.pids().nginx.some((p) => !old.includes(p)), 60_000, 50);
      }
    }
    await flowing('after the last restart');
  } finally {
    done = true;
  }
  const loaded = await running;
  const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
  const workersAfter = stack.pids().app.slice(1);

  const c = bodies.summary(loaded, stack.seen());
  const errorLog = fs.readFileSync(stack.errorLogPath, 'utf8');
  const { buffered, other } = bodies.errorLines(errorLog);
  const fails = doctor(stack).filter((f) => f.level === 'fail').map((f) => f.id);
  t.diagnostic(`${seconds} s: ${JSON.stringify(c)}; nginx error log: ${buffered} body-buffered lines, ${other.length} others ${JSON.stringify(other.slice(0, 2))}; doctor fails: ${JSON.stringify(fails)}`);

  assert.ok(workersAfter.every((p) => !workersBefore.includes(p)), `every app worker was replaced: ${workersBefore} -> ${workersAfter}`);
  bodies.assertWhole(c, 'nginx reloads and rolling restarts', errorLog);

  record('restart-bodies', {
    command: 'TUNEKIT_FAULTS_REPORT=faults.json node --test test/faults/restart-bodies.test.js',
    nginxReloads: NGINX_RELOADS,
    appReloads: APP_RELOADS,
    connections: CONNECTIONS,
    seconds,
    ...bodies.figures(c),
    errorLogLevel: stack.vars.tunekit_nginx_error_log_level,
    errorLogBuffered: buffered,
    errorLogOther: other.length,
    doctorFails: fails,
  });
});
