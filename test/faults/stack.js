'use strict';
// What the fault cases share: a stack serving the hash app (test/fixtures/faults/
// hash-app.js: each request's body hash answered and written down by the app),
// torn down and checked for leftovers after the test, and `tunekit doctor`'s
// findings about a running stack.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startStack } = require('../../lib/stack');
const { alive } = require('../../lib/proc');
const { until } = require('../lib/util');
const hashApp = require('../fixtures/faults/hash-app');

const CLI = path.resolve(__dirname, '../../bin/tunekit.js');
const HASH_APP = path.resolve(__dirname, '../fixtures/faults/hash-app.js');

/** Stop the stack after the test and check that none of its processes is left. */
function stopAfter(t, stack) {
  t.after(async () => {
    const pids = stack.pids();
    await stack.stop();
    for (const pid of [...pids.nginx, ...pids.app]) assert.ok(!alive(pid), `process ${pid} is left running`);
  });
}

/**
 * startStack() serving the hash app; stack.seen() lists the requests the app saw.
 * The temp dir it writes into is removed after the test (registered before the start).
 */
async function startHashStack(t, options = {}) {
  const seenDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-faults-seen-'));
  t.after(() => fs.rmSync(seenDir, { recursive: true, force: true }));
  const stack = await startStack({ upstream: 'uds', workers: 2, ...options, module: HASH_APP, env: { FAULTS_SEEN_DIR: seenDir } });
  stopAfter(t, stack);
  stack.seen = () => hashApp.seen(seenDir);
  return stack;
}

/** `tunekit doctor --json` pointed at an nginx.conf and an app.json: its findings. */
function doctorAt(nginxConf, appConfig) {
  const r = spawnSync(process.execPath, [CLI, 'doctor', '--json', '--nginx-conf', nginxConf, '--app-config', appConfig], { encoding: 'utf8' });
  assert.ok(r.stdout, `doctor printed JSON (stderr: ${r.stderr})`);
  return JSON.parse(r.stdout).findings;
}

/** doctorAt() the stack's rendered nginx.conf and app.json. */
const doctor = (stack) => doctorAt(path.join(stack.renderDir, 'etc/nginx/nginx.conf'), stack.vars.tunekit_app_config_path);

/** n GETs of url at once: { status: count }. */
async function burst(url, n = 16) {
  const out = {};
  for (const r of await Promise.all(Array.from({ length: n }, () => fetch(url)))) out[r.status] = (out[r.status] || 0) + 1;
  return out;
}

/** nginx's error log, one entry per line. */
const errorLog = (stack) => fs.readFileSync(stack.errorLogPath, 'utf8').split('\n').filter(Boolean);

/**
 * Lowers the open-files limit of running processes, as a low LimitNOFILE= would:
 * `lower(pids, extra)` leaves each room for `extra` more descriptors than it
 * holds and returns those limits. Call it before the stack starts: the limits
 * are given back before the stack stops (after hooks run in order), so a worker
 * drains with the descriptors it needs.
 */
function nofileLowering(t) {
  const lowered = [];
  t.after(() => {
    for (const { pid, was } of lowered) spawnSync('prlimit', ['--pid', String(pid), `--nofile=${was}`]);
  });
  return (pids, extra = 8) => pids.map((pid) => {
    const room = fs.readdirSync(`/proc/${pid}/fd`).length + extra;
    const [soft, hard] = /Max open files\s+(\S+)\s+(\S+)/.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8')).slice(1);
    lowered.push({ pid, was: `${soft}:${hard}` });
    const r = spawnSync('prlimit', ['--pid', String(pid), `--nofile=${room}:${room}`], { encoding: 'utf8' });
    assert.equal(r.status, 0, `prlimit --pid ${pid}: ${r.stderr}`);
    return room;
  });
}

/**
 * The app's children once every one has loaded: the serving workers and, when the
 * runner keeps one (tunekit_app_spare_workers), the spare after its spare-ready
 * line. The runner forks the spare just after its ready line; a limit lowered on a
 * spare still loading its modules makes it fail for want of descriptors a real
 * LimitNOFILE= would have given it from the start.
 */
async function loadedChildren(stack) {
  const spareReady = () => fs.readFileSync(stack.appLogPath, 'utf8').split('\n')
    .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((e) => e.event === 'spare-ready');
  let spare = null;
  if (stack.vars.tunekit_app_spare_workers > 0) spare = await until('the spare to load', spareReady, 60000, 50);
  const children = stack.pids().app.slice(1);
  if (spare) assert.ok(children.includes(spare.worker_pid), `the spare ${spare.worker_pid} is among the app's children ${children}`);
  return children;
}

module.exports = { startHashStack, stopAfter, doctor, doctorAt, errorLog, burst, nofileLowering, loadedChildren };
