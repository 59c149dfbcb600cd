'use strict';
// `tunekit reload` and `tunekit logs` on a runner started by hand in a temp dir
// (`node app/cluster.js --config app.json >> app.log`), found from its app.json
// as an operator would point at it: reload is a rolling restart under load
// through the socket with no failed request, every worker pid new; logs prints
// the runner's own lines from the file its output goes to. With nothing to act
// on, each says so in one line. (systemd and PM2: the command each would run is
// checked in test/unit/apphost.test.js.)

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const autocannon = require('autocannon');
const h = require('../fixtures/runner/harness');
const { until, runCommand } = require('../lib/util');
const { alive } = require('../../lib/proc');
const { workersOf } = require('../../lib/apphost');

function tunekit(args) {
  return runCommand(process.execPath, [h.CLI, ...args], { cwd: h.ROOT, timeoutMs: 180000 });
}

/** A runner writing its JSON log lines to <dir>/app.log, ready: { sock, cfg, log, pid }. */
async function startByHand(t, dir, settings = {}) {
  const sock = path.join(dir, 'app.sock');
  const cfg = h.writeConfig(dir, { listen: `unix:${sock}`, ...settings });
  const log = path.join(dir, 'app.log');
  const fd = fs.openSync(log, 'a');
  const child = spawn(process.execPath, [h.CLUSTER, '--config', cfg], { stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const exited = new Promise((resolve) => child.on('exit', resolve));
  t.after(async () => {
    const workers = workersOf(child.pid);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      await exited;
      clearTimeout(timer);
    }
    for (const pid of workers) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await until('the runner\'s ready line in its log', () => {
    if (child.exitCode !== null) throw new Error(`runner exited ${child.exitCode}: ${fs.readFileSync(log, 'utf8')}`);
    return fs.readFileSync(log, 'utf8').includes('"event":"ready"');
  }, h.READY_TIMEOUT_MS);
  return { sock, cfg, log, pid: child.pid };
}

test('reload under load through the socket: 0 failed requests, every worker new, one line; logs shows the reload', async (t) => {
  const dir = h.tmpDir(t);
  const app = await startByHand(t, dir);
  // The warm spare (spareWorkers: 1) forks after the ready line: the workers the
  // reload replaces are the ones with it (seen: the spare counted by the reload,
  // not yet by this list).
  await until('the warm spare in the runner\'s log', () => fs.readFileSync(app.log, 'utf8').includes('"event":"spare-ready"'), h.READY_TIMEOUT_MS);
  const before = workersOf(app.pid);
  assert.ok(before.length >= 3, `workers ${before}`);

  // Load until the reload is done (at most 60 s), on keep-alive connections.
  let first;
  const firstResponse = new Promise((resolve) => { first = resolve; });
  const instance = autocannon({ url: 'http://localhost/', socketPath: app.sock, connections: 10, duration: 60 });
  instance.once('response', () => first());
  const loaded = new Promise((resolve, reject) => instance.on('done', resolve).on('error', reject));
  t.after(() => instance.stop());
  await firstResponse;
  const r = await tunekit(['reload', '--app-config', app.cfg]);
  instance.stop();
  const result = await loaded;

  assert.equal(r.code, 0, r.out);
  assert.match(r.stdout, new RegExp(`^tunekit reload: the runner started by hand \\(pid ${app.pid}\\) reloaded: worker processes ${before.join(' ')} -> [\\d ]+ \\(the runner's spare included\\), serving \\(\\d+\\.\\d s\\)\\n$`));
  assert.equal(r.stderr, '');
  const after = workersOf(app.pid);
  for (const pid of before) assert.ok(!after.includes(pid), `old worker ${pid} replaced (${before} -> ${after})`);
  assert.equal(result.errors, 0, 'no connection errors');
  assert.equal(result.timeouts, 0, 'no timeouts');
  assert.equal(result.non2xx, 0, 'no non-2xx responses');
  assert.ok(result.requests.total > 0);

  // The runner's own lines, from the file its output goes to: its start and the reload.
  const logs = await tunekit(['logs', '--app-config', app.cfg, '-n', '200']);
  assert.equal(logs.code, 0, logs.out);
  const events = logs.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(events.some((e) => e.event === 'ready' && e.pid === app.pid), logs.stdout);
  const done = events.find((e) => e.event === 'reload-done');
  assert.ok(done, logs.stdout);
  assert.equal(done.replaced.length, 2, 'both workers of app.json\'s "workers": 2');
  for (const pid of done.replaced) assert.ok(before.includes(pid), `reload-done replaced ${pid}, one of the workers before`);
  for (const pid of done.workers) assert.ok(after.includes(pid), `reload-done names the new worker ${pid}`);
  // -n N: the last N lines, as the file has them.
  const two = await tunekit(['logs', '--app-config', app.cfg, '-n', '2']);
  assert.equal(two.stdout, `${fs.readFileSync(app.log, 'utf8').trim().split('\n').slice(-2).join('\n')}\n`);
});

test('reload of code that no longer loads: the runner\'s reload-failed line at once, exit 1, the old workers still serve', async (t) => {
  const dir = h.tmpDir(t);
  const module = path.join(dir, 'app.js');
  fs.writeFileSync(module, "module.exports = (req, res) => res.end('ok');\n");
  // No spare: a spare forked from the broken code would count crashes too.
  const app = await startByHand(t, dir, { module, spareWorkers: 0 });
  const before = workersOf(app.pid);
  fs.writeFileSync(module, "throw new Error('broken release');\n");
  const r = await tunekit(['reload', '--app-config', app.cfg]);
  assert.equal(r.code, 1, r.out);
  assert.match(r.stderr, new RegExp(`^tunekit reload: the runner started by hand \\(pid ${app.pid}\\): the rolling restart failed and the old workers keep serving; the runner logged: \\{.*"event":"reload-failed".*\\}\\n$`));
  assert.deepEqual(workersOf(app.pid), before);
  const res = await h.request(app.sock);
  assert.equal(res.status, 200);
  assert.equal(res.body, 'ok');
});

test('nothing to act on: one line saying where it looked and how to point it, exit 1', async (t) => {
  const dir = h.tmpDir(t);
  const missing = path.join(dir, 'app.json');
  // An app.json whose socket nobody listens on.
  const cfg = h.writeConfig(dir, { listen: `unix:${path.join(dir, 'app.sock')}` });
  for (const cmd of ['reload', 'logs']) {
    const r = await tunekit([cmd, '--app-config', cfg]);
    assert.equal(r.code, 1, r.out);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, `tunekit ${cmd}: no app found: nothing listens on ${path.join(dir, 'app.sock')} (the "listen" of ${cfg}); ` +
      'start it, or point to its settings with --app-config FILE (the app.json its runner or PM2 app reads), ' +
      'or to a stack kept by `tunekit demo --keep` with --stack DIR\n');
  }
  fs.rmSync(cfg);
  const r = await tunekit(['reload', '--app-config', missing]);
  assert.equal(r.code, 2, r.out);
  assert.equal(r.stderr, `tunekit: --app-config ${missing}: no such file (ENOENT); give the path of an existing file\n`);
});

test('logs of a runner whose output is not a file: one line saying where to read it', async (t) => {
  const dir = h.tmpDir(t);
  const sock = path.join(dir, 'app.sock');
  const cfg = h.writeConfig(dir, { listen: `unix:${sock}` });
  // The harness reads the runner's output through a pipe.
  const runner = h.start(t, { args: ['--config', cfg], via: 'cluster' });
  await runner.ready();
  const r = await tunekit(['logs', '--app-config', cfg]);
  assert.equal(r.code, 1, r.out);
  assert.equal(r.stderr, `tunekit logs: the runner started by hand (pid ${runner.pid}) writes its log to its standard output, which is not a file: ` +
    'read it where it was started, or start it with its output sent to a file (tunekit run ... >> app.log 2>&1)\n');
});
