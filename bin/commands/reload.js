'use strict';
// tunekit reload [--app-config FILE | --stack DIR]
//
// A rolling restart of the app on this host, found from its app.json
// (lib/apphost.js): `systemctl reload UNIT` (the unit's ExecReload sends SIGHUP
// to the runner), `pm2 reload NAME`, or SIGHUP to a runner started by hand. The
// runner replaces its workers one at a time, each new one listening before the
// old one drains, so no request fails. Waits until every old worker is gone and
// the app answers, then prints one line.

const fs = require('node:fs');
const http = require('node:http');
const { spawnSync } = require('node:child_process');
const { inputFile } = require('../../lib/args');
const command = require('../../lib/command');
const apphost = require('../../lib/apphost');
const kept = require('../../lib/kept');
const { alive } = require('../../lib/proc');
const { START_TIMEOUT_MS } = require('../../app/cluster');

const COMMAND = {
  name: 'reload',
  usage: ['[options]'],
  about: 'Rolling restart of the app on this host: systemctl reload (systemd), pm2 reload (PM2), or SIGHUP to a ' +
    'runner started by hand, found from the app.json its runner reads. Waits until every old worker is gone and ' +
    'the app answers, then prints one line; exit 1 when the reload failed (the old workers keep serving).',
  options: {
    'app-config': { type: 'string', value: 'FILE', help: `the app's app.json (default: ${require('../../lib/doctor').DEFAULT_APP_CONFIG})` },
    stack: kept.STACK_OPTION,
  },
  examples: [
    'tunekit reload',
    'tunekit reload --app-config /etc/tunekit-app/app.json',
  ],
};

const parse = (argv) => command.parse(COMMAND, argv).values;

// One GET to the app's listener: any HTTP answer means a worker serves.
function answers(listen) {
  const where = listen.startsWith('unix:') ? { socketPath: listen.slice(5) }
    : { host: listen.slice(4, listen.lastIndexOf(':')), port: Number(listen.slice(listen.lastIndexOf(':') + 1)) };
  return new Promise((resolve) => {
    const req = http.get({ ...where, path: '/', agent: false, timeout: 5000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The runner's "reload-failed" line written to its log file past `offset`, if any
// (JSON or text lines both hold the event's name).
function failedLine(file, offset) {
  if (!file) return null;
  let text = '';
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const buf = Buffer.alloc(Math.max(0, size - offset));
      fs.readSync(fd, buf, 0, buf.length, offset);
      text = buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
  return text.split('\n').find((l) => /\breload-failed\b/.test(l)) || null;
}

// Wait for the rolling restart of the runner `app.pid`: every worker it had is
// gone, as many as it had before serve, and the app answers. Polls /proc, and
// the runner's log file when it has one (a new worker that cannot start is said
// there at once; the old workers keep serving).
async function replaced(app, before, logOffset) {
  const s = app.settings;
  // Past this a reload that has not replaced every worker is stuck: each worker
  // gets the runner's start timeout plus its drain and kill grace.
  const limit = Math.max(1, before.length) * (START_TIMEOUT_MS + (s.drainTimeoutMs || 0) + (s.killGraceMs || 0)) + 5000;
  const deadline = Date.now() + limit;
  const serving = Math.max(1, before.length - (s.spareWorkers || 0));
  for (;;) {
    if (!alive(app.pid)) return { error: `the runner (pid ${app.pid}) exited during the reload` };
    const failed = failedLine(app.logFile, logOffset);
    if (failed) return { error: `the rolling restart failed and the old workers keep serving; the runner logged: ${failed.trim()}` };
    const now = apphost.workersOf(app.pid);
    if (now.length >= serving && !now.some((p) => before.includes(p)) && (!app.listen.match(/^(unix|tcp):/) || await answers(app.listen))) return { now };
    if (Date.now() > deadline) {
      return { error: `after ${Math.round(limit / 1000)} s workers ${before.filter((p) => now.includes(p)).join(' ')} still run: a new worker did not start (its log says why: reload-failed)` };
    }
    await sleep(100);
  }
}

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  if (opts['app-config']) inputFile('app-config', opts['app-config']);
  const files = kept.forCommand('reload', opts);
  for (const line of files.say) console.error(line);
  const { app, pm2, name } = apphost.locate(files.appConfig);
  if (!app.kind) {
    console.error(`tunekit reload: ${apphost.notFound(app)}`);
    return 1;
  }
  const what = apphost.describe(app, name);
  const started = Date.now();
  const c = apphost.reloadCommand(app, { pm2, name });
  if (app.kind === 'pm2') {
    const r = spawnSync(c.cmd, c.args, { encoding: 'utf8', env: { ...process.env, ...c.env } });
    if (r.status !== 0) {
      console.error(`tunekit reload: ${[c.cmd, ...c.args].join(' ')} failed (${r.error ? r.error.code : `exit ${r.status}`}): ${String(r.stderr || r.stdout).trim().split('\n').pop()}`);
      return 1;
    }
    console.log(`tunekit reload: ${what} reloaded (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return 0;
  }
  const before = apphost.workersOf(app.pid);
  const logOffset = app.logFile ? fs.statSync(app.logFile).size : 0;
  if (c.signal) {
    process.kill(c.pid, c.signal);
  } else {
    const r = spawnSync(c.cmd, c.args, { encoding: 'utf8' });
    if (r.status !== 0) {
      console.error(`tunekit reload: ${[c.cmd, ...c.args].join(' ')} failed (${r.error ? r.error.code : `exit ${r.status}`}): ${String(r.stderr).trim().split('\n').pop()}`);
      return 1;
    }
  }
  const done = await replaced(app, before, logOffset);
  if (done.error) {
    console.error(`tunekit reload: ${what}: ${done.error}`);
    return 1;
  }
  const spare = app.settings.spareWorkers ? ' (the runner\'s spare included)' : '';
  console.log(`tunekit reload: ${what} reloaded: worker processes ${before.join(' ')} -> ${done.now.join(' ')}${spare}, serving (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  return 0;
}

module.exports = { main, parse, COMMAND };
