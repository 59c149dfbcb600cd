'use strict';
// `tunekit run` started by hand records where its files are (lib/kept.js), so
// reload, logs, status and doctor find it with no flag, or with --stack DIR (the
// dir its "recorded" line names): real runners, their output in a file as the
// docs say to start them. Two running: a command with no flag is refused, naming
// --stack DIR and both. One killed with SIGKILL (no exit hook runs): said stale
// and its record removed. One stopped with SIGTERM: its record and dir are gone.
// Each test keeps its records in a state dir of its own (TUNEKIT_STATE_DIR).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const h = require('../fixtures/runner/harness');
const { until, runCommand } = require('../lib/util');
const { alive } = require('../../lib/proc');
const { workersOf } = require('../../lib/apphost');
const { freePorts } = require('../../lib/proc');
const { group } = require('../../lib/accounts');

const myGroup = () => group(process.getgid()).name;

/**
 * `tunekit run ARGS >> dir/NAME.log 2>&1` from dir, as the docs start one by hand;
 * resolves once it is ready: { pid, log, recorded (the dir its "recorded" line
 * names), exited, kill(sig) }. Stopped (and its workers) after the test.
 */
async function runByHand(t, dir, env, name, args) {
  const log = path.join(dir, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  const child = spawn(process.execPath, [h.CLI, 'run', ...args], { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let workers = [];
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      await exited;
      clearTimeout(timer);
    }
    for (const pid of workers) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const lines = () => fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  await until(`${name}'s ready line in ${log}`, () => {
    if (child.exitCode !== null) throw new Error(`runner exited ${child.exitCode}: ${fs.readFileSync(log, 'utf8')}`);
    return lines().some((l) => l.event === 'ready');
  }, h.READY_TIMEOUT_MS);
  workers = workersOf(child.pid);
  const recorded = lines().find((l) => l.event === 'recorded');
  assert.ok(recorded, `a "recorded" line in ${log}`);
  return { pid: child.pid, log, recorded: recorded.dir, exited, child, workers: () => (workers = workersOf(child.pid)) };
}

function tunekit(args, env, cwd) {
  return runCommand(process.execPath, [h.CLI, ...args], { cwd, env, timeoutMs: 120000 });
}

const stateOf = (t) => {
  const state = h.tmpDir(t);
  return { TUNEKIT_STATE_DIR: state };
};

/** `tunekit run` on a loopback port, its output in DIR/x.log, killed after the test; resolves once it is ready. */
async function startOnPort(t, dir, args, env, port, metrics) {
  const log = path.join(dir, 'x.log');
  const fd = fs.openSync(log, 'a');
  const child = spawn(process.execPath, [h.CLI, 'run', ...args, '--listen', `tcp:127.0.0.1:${port}`, '--workers', '1', '--set', `tunekit_metrics_listen=tcp:127.0.0.1:${metrics}`],
    { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const exited = new Promise((resolve) => child.on('exit', resolve));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await until('the ready line', () => fs.readFileSync(log, 'utf8').includes('"event":"ready"'), h.READY_TIMEOUT_MS);
  return { child, log, exited };
}

test('a runner started by hand: reload, logs, status and doctor find it with no flag; its record goes when it stops', { timeout: 180_000 }, async (t) => {
  const dir = h.tmpDir(t);
  const env = stateOf(t);
  const sock = path.join(dir, 'app.sock');
  const [metricsPort] = await freePorts(1);
  const app = await runByHand(t, dir, env, 'app', ['--listen', `unix:${sock}`, '--socket-group', myGroup(), '--workers', '2',
    '--set', `tunekit_metrics_listen=tcp:127.0.0.1:${metricsPort}`]);
  const stacks = path.join(env.TUNEKIT_STATE_DIR, 'stacks');
  assert.equal(app.recorded, path.join(stacks, `run-${app.pid}`));
  const settings = JSON.parse(fs.readFileSync(path.join(app.recorded, 'app.json'), 'utf8'));
  assert.equal(settings.listen, `unix:${sock}`);
  const said = (cmd) => `tunekit ${cmd}: the runner \`node ${h.CLI} run --listen unix:${sock} --socket-group ${myGroup()} --workers 2 ` +
    `--set tunekit_metrics_listen=tcp:127.0.0.1:${metricsPort}\` (pid ${app.pid}, recorded in ${app.recorded}) (--stack DIR names another)\n`;

  const before = app.workers();
  const reload = await tunekit(['reload'], env, dir);
  assert.equal(reload.code, 0, reload.out);
  assert.equal(reload.stderr, said('reload'));
  assert.match(reload.stdout, new RegExp(`^tunekit reload: the runner started by hand \\(pid ${app.pid}\\) reloaded: worker processes ${before.join(' ')} -> `));
  assert.deepEqual(app.workers().filter((p) => before.includes(p)), [], 'every worker replaced');

  const logs = await tunekit(['logs', '-n', '200'], env, dir);
  assert.equal(logs.code, 0, logs.out);
  assert.equal(logs.stderr, said('logs'));
  assert.match(logs.stdout, /"event":"reload-done"/, 'the runner\'s own log, the reload in it');

  const status = await tunekit(['status'], env, dir);
  assert.equal(status.code, 0, status.out);
  assert.equal(status.stderr, said('status'));
  assert.match(status.stdout, new RegExp(`^app +unix:${sock} \\(${app.recorded}/app\\.json; runner, pid ${app.pid}\\)`));
  for (const pid of app.workers()) assert.match(status.stdout, new RegExp(`^ +\\S+ +${pid} `, 'm'), `worker ${pid} has a row`);
  assert.match(status.stdout, /^nginx +none: a runner started by hand/m);

  const doctor = await tunekit(['doctor', '--json'], env, dir);
  assert.equal(doctor.stderr, said('doctor'));
  const facts = JSON.parse(doctor.stdout).facts;
  assert.ok(facts.read.includes(path.join(app.recorded, 'app.json')), facts.read.join('; '));
  assert.deepEqual(facts.sockets.map((s) => s.path), [sock], 'the runner\'s socket audited');

  // --stack DIR names the same runner, and says nothing about which one it took.
  const named = await tunekit(['reload', '--stack', app.recorded], env, dir);
  assert.equal(named.code, 0, named.out);
  assert.equal(named.stderr, '');

  // Stopped: its record and its dir go with it.
  process.kill(app.pid, 'SIGTERM');
  assert.deepEqual(await app.exited, { code: 0, signal: null });
  assert.deepEqual(fs.readdirSync(stacks), []);
  const none = await tunekit(['reload'], env, dir);
  assert.equal(none.code, 1, none.out);
  assert.match(none.stderr, /^tunekit reload: no app found: \/etc\/tunekit-app\/app\.json does not exist; .*--stack DIR\n$/);
});

test('two runners: a command with no flag is refused naming --stack DIR; one killed is said stale and its record removed', { timeout: 180_000 }, async (t) => {
  const dir = h.tmpDir(t);
  const env = stateOf(t);
  const [portA, metricsA, portB, metricsB] = await freePorts(4);
  const a = await runByHand(t, dir, env, 'a', ['--listen', `tcp:127.0.0.1:${portA}`, '--workers', '1', '--set', `tunekit_metrics_listen=tcp:127.0.0.1:${metricsA}`]);
  const b = await runByHand(t, dir, env, 'b', ['--listen', `tcp:127.0.0.1:${portB}`, '--workers', '1', '--set', `tunekit_metrics_listen=tcp:127.0.0.1:${metricsB}`]);

  const both = await tunekit(['logs'], env, dir);
  assert.equal(both.code, 2, both.out);
  assert.match(both.stderr, /^tunekit: 2 runners started with `tunekit run` are running \(.*\): name one with --stack DIR\n$/);
  for (const r of [a, b]) assert.ok(both.stderr.includes(`(pid ${r.pid}, recorded in ${r.recorded})`), both.stderr);

  const onlyB = await tunekit(['logs', '-n', '500', '--stack', b.recorded], env, dir);
  assert.equal(onlyB.code, 0, onlyB.out);
  assert.ok(onlyB.stdout.includes(`"listen":"tcp:127.0.0.1:${portB}"`), onlyB.stdout);
  assert.ok(!onlyB.stdout.includes(`"listen":"tcp:127.0.0.1:${portA}"`), 'b\'s log only');

  // SIGKILL: no exit hook runs, the record stays behind until a command finds it.
  const bWorkers = b.workers();
  b.child.kill('SIGKILL');
  await b.exited;
  for (const pid of bWorkers) if (alive(pid)) process.kill(pid, 'SIGKILL');
  const reload = await tunekit(['reload'], env, dir);
  assert.equal(reload.code, 0, reload.out);
  const [stale, using] = reload.stderr.split('\n');
  assert.match(stale, new RegExp(`^tunekit reload: the runner \`.*\` \\(pid ${b.pid}, recorded in ${b.recorded}\\) is stale: its process is gone and did not remove the record \\(a runner killed with SIGKILL cannot\\); record removed$`));
  assert.match(using, new RegExp(`^tunekit reload: the runner \`.*\` \\(pid ${a.pid}, recorded in ${a.recorded}\\) \\(--stack DIR names another\\)$`));
  assert.equal(fs.existsSync(b.recorded), false);
  assert.deepEqual(fs.readdirSync(path.join(env.TUNEKIT_STATE_DIR, 'stacks')).sort(), [`run-${a.pid}`, `run-${a.pid}.json`]);
  // Said once: the next command finds only a.
  const again = await tunekit(['logs', '-n', '1'], env, dir);
  assert.equal(again.code, 0, again.out);
  assert.equal(again.stderr.split('\n').filter(Boolean).length, 1, again.stderr);

  // demo --stop is for kept demo stacks: a runner's dir is refused with how to stop it.
  const stop = await tunekit(['demo', '--stop', a.recorded], env, dir);
  assert.equal(stop.code, 2, stop.out);
  assert.match(stop.stderr, new RegExp(`not a stack of \`demo --keep\`: stop it with Ctrl-C where it runs, or kill -TERM ${a.pid}`));
  assert.ok(alive(a.pid));
});

test('--no-record: the kit\'s own stacks\' runners are not recorded', { timeout: 60_000 }, async (t) => {
  const dir = h.tmpDir(t);
  const env = stateOf(t);
  const [port, metrics] = await freePorts(2);
  const { child, log, exited } = await startOnPort(t, dir, ['--no-record'], env, port, metrics);
  assert.equal(fs.existsSync(path.join(env.TUNEKIT_STATE_DIR, 'stacks')), false);
  assert.doesNotMatch(fs.readFileSync(log, 'utf8'), /"event":"recorded"/);
  child.kill('SIGTERM');
  await exited;
});

test('a state dir that cannot be written: the runner says so in one line and serves, unrecorded', { timeout: 60_000 }, async (t) => {
  const dir = h.tmpDir(t);
  // A file where the state dir goes: mkdir fails (ENOTDIR), as an unwritable one would.
  const blocker = path.join(dir, 'state');
  fs.writeFileSync(blocker, '');
  const [port, metrics] = await freePorts(2);
  const { child, log, exited } = await startOnPort(t, dir, [], { TUNEKIT_STATE_DIR: path.join(blocker, 'sub') }, port, metrics);
  const warn = fs.readFileSync(log, 'utf8').split('\n').filter((l) => l.includes('"event":"not-recorded"'));
  assert.equal(warn.length, 1, fs.readFileSync(log, 'utf8'));
  assert.match(warn[0], /"error":"ENOTDIR writing under [^"]*\/state\/sub".*"fix":"set TUNEKIT_STATE_DIR to a folder you can write, for reload, logs and status to find this runner"/);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});
