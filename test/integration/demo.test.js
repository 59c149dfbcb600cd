'use strict';
// `npm run demo` (set-up, then `tunekit demo`) as the README says to run it: it
// prints the URL, the socket, the workers that answered (counted by the runner,
// for any app), req/s and p50/p99, then leaves no process, socket or temp dir.
// --keep leaves it running and records it: status, doctor, reload and logs find it
// with no flags, `demo --stop` stops it, and a record whose processes are gone is
// said to be stale. Each test keeps its records in a state dir of its own
// (TUNEKIT_STATE_DIR), so no other stack on the machine is taken for its own.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { ROOT } = require('../../lib/template');
const { alive, childrenOf } = require('../../lib/proc');

const CLI = path.join(ROOT, 'bin/tunekit.js');

/** A state dir of the test's own for the records of kept stacks: { TUNEKIT_STATE_DIR }. */
function stateEnv(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-demo-state-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { ...process.env, TUNEKIT_STATE_DIR: dir };
}

function run(args, t, { npm = false, cwd = ROOT, env = process.env } = {}) {
  return new Promise((resolve) => {
    // `npm run demo -- ARGS` runs the set-up step, then `tunekit demo ARGS`.
    const child = npm
      ? spawn('npm', ['run', '--silent', 'demo', '--', ...args], { cwd, env })
      : spawn(process.execPath, [CLI, ...args], { cwd, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGINT'), 120_000);
    t.after(() => { clearTimeout(timer); if (child.exitCode === null) child.kill('SIGKILL'); });
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

function field(out, name) {
  const m = out.match(new RegExp(`^ {2}${name} +(.*)$`, 'm'));
  assert.ok(m, `no "${name}" line in:\n${out}`);
  return m[1];
}

/** { pid: requests } of the "workers seen" line. */
function workerCounts(out) {
  return Object.fromEntries([...field(out, 'workers seen').matchAll(/(\d+) \((\d+)\)/g)].map((m) => [m[1], Number(m[2])]));
}

function pidsIn(out) {
  const nums = (s) => (s.match(/\b\d+\b/g) || []).map(Number);
  const nginx = field(out, 'nginx').replace(/\(config.*$/, '');
  const app = field(out, 'app').replace(/\(listen.*$/, '');
  return { nginx: nums(nginx), app: nums(app) };
}

test('npm run demo: reports URL, socket, workers, req/s, p50/p99 and leaves nothing behind', { timeout: 150_000 }, async (t) => {
  const r = await run(['--duration', '2', '--connections', '10'], t, { npm: true });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const out = r.stdout;
  const url = field(out, 'url');
  assert.match(url, /^https:\/\/127\.0\.0\.1:\d+\/$/);
  assert.notEqual(new URL(url).port, '443');
  assert.match(field(out, 'try'), new RegExp(`^curl --cacert /tmp/tunekit-stack-\\w+/\\S+/ca\\.pem ${url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
  const socket = field(out, 'socket');
  assert.match(socket, /^\/tmp\/tunekit-stack-\w+\/run\/tunekit-app\/app\.sock$/);
  assert.match(field(out, 'app'), new RegExp(`listen unix:${socket.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
  assert.match(field(out, 'requests'), /^\d+ \(0 non-2xx, 0 errors, 0 timeouts\)$/);
  assert.match(field(out, 'req/s'), /^\d+$/);
  const lat = field(out, 'latency').match(/^p50 ([\d,]+) µs, p99 ([\d,]+) µs/);
  assert.ok(lat, field(out, 'latency'));
  const [p50, p99] = lat.slice(1).map((v) => Number(v.replace(/,/g, '')));
  assert.ok(p50 > 0 && p50 <= p99, `p50 ${p50} µs, p99 ${p99} µs`);
  assert.match(field(out, 'server CPU'), /^\d+\.\d µs per request/);
  const pids = pidsIn(out);
  assert.equal(pids.app.length, 3, 'primary + 2 workers');
  assert.ok(pids.nginx.length >= 2, 'master + workers');
  // Every app worker is counted, by the runner, and the line says how many
  // answered. Not "every worker answered": on the shared socket whichever worker
  // accepts first takes nginx's few kept-alive upstream connections, and on a busy
  // machine one worker once took all of them.
  const counts = workerCounts(out);
  assert.deepEqual(Object.keys(counts).map(Number).sort(), pids.app.slice(1).sort(), 'each app worker listed');
  const seen = Object.keys(counts).filter((pid) => counts[pid] > 0).map(Number);
  assert.match(field(out, 'workers seen'), new RegExp(`— ${seen.length} of 2 app workers answered \\(counted by the runner, tunekit_app_requests_total\\)$`));
  // When one did not, the demo names it and says why, and only then.
  const idle = pids.app.slice(1).filter((pid) => !seen.includes(pid));
  const note = /^ {2}note {11}app workers ([\d, ]+) served no request: each connection lands on one worker/m.exec(out);
  assert.deepEqual(note ? note[1].split(', ').map(Number) : [], idle, out);

  // Nothing left: processes, socket, temp dir.
  const stopped = out.match(/^stopped: (\d+) processes exited \(([\d ]+)\), socket and \S+ removed$/m);
  assert.ok(stopped, out);
  const all = stopped[2].split(' ').map(Number);
  assert.equal(all.length, Number(stopped[1]));
  for (const pid of [...pids.nginx, ...pids.app]) assert.ok(all.includes(pid), `${pid} was stopped`);
  const left = all.filter(alive);
  assert.deepEqual(left, []);
  assert.equal(fs.existsSync(socket), false, 'socket removed');
  assert.equal(fs.existsSync(path.dirname(path.dirname(path.dirname(socket)))), false, 'temp dir removed');
});

/** The command lines --keep prints to drive what it left running (after "Recorded in FILE: ..."). */
function keptCommands(out) {
  const m = /^Recorded in (\S+): these find it with no flags \(--stack (\S+) names it\):\n((?: {2}.*\n)+)Stop it with:\n {2}(.*)$/m.exec(out);
  assert.ok(m, out);
  const lines = m[3].trimEnd().split('\n').map((l) => l.trim().replace(/\s+#.*$/, ''));
  return { record: m[1], dir: m[2], lines, stop: m[4] };
}

/** One printed command line (`node bin/tunekit.js ...`, run from the kit's folder) as written. */
function sh(line, env) {
  return spawnSync('sh', ['-c', line], { encoding: 'utf8', cwd: ROOT, env, timeout: 120_000 });
}

test('tunekit demo --keep: status, doctor, reload and logs find it with no flags; demo --stop leaves nothing', { timeout: 240_000 }, async (t) => {
  const env = stateEnv(t);
  const r = await run(['demo', '--keep', '--duration', '1', '--connections', '4'], t, { env });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const { record, dir, lines, stop } = keptCommands(r.stdout);
  const pids = pidsIn(r.stdout);
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', dir], { env }));
  assert.equal(path.dirname(record), path.join(env.TUNEKIT_STATE_DIR, 'stacks'));
  assert.ok([...pids.nginx, ...pids.app].every(alive), 'still running after the demo returned');
  // Each printed line, as written, with no flag naming the stack.
  assert.deepEqual(lines, ['status', 'doctor', 'reload', 'logs -n 20'].map((c) => `node bin/tunekit.js ${c}`));
  assert.equal(stop, 'node bin/tunekit.js demo --stop');
  // The printed curl line trusts the throwaway CA and gets the app's answer over HTTPS.
  const curl = spawnSync('sh', ['-c', `${field(r.stdout, 'try')} --silent --show-error --http2`], { encoding: 'utf8' });
  assert.equal(curl.status, 0, curl.stderr);
  assert.equal(JSON.parse(curl.stdout).ok, true);
  // The metrics endpoint it prints answers, with a series set per app worker.
  const metricsUrl = field(r.stdout, 'metrics').split(' ')[0];
  assert.match(metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  const m = spawnSync('curl', ['--silent', '--show-error', metricsUrl], { encoding: 'utf8' });
  assert.equal(m.status, 0, m.stderr);
  for (const pid of pids.app.slice(1)) assert.match(m.stdout, new RegExp(`^tunekit_app_info\\{worker="\\d+",pid="${pid}"`, 'm'), `worker ${pid}`);
  const said = `tunekit %s: the stack kept by \`demo --keep\` in ${dir} (--stack DIR names another)\n`;

  // status: a row per app worker the demo printed; --json for the rows.
  const st = sh(`${lines[0]} --json`, env);
  assert.equal(st.status, 0, st.stderr);
  assert.equal(st.stderr, said.replace('%s', 'status'));
  const rows = JSON.parse(st.stdout).workers.map((w) => w.pid);
  for (const pid of pids.app.slice(1)) assert.ok(rows.includes(pid), `status has app worker ${pid}: ${rows}`);
  // doctor audits this very stack (its live /healthz), every rule passing.
  const d = sh(lines[1], env);
  assert.equal(d.status, 0, d.stdout + d.stderr);
  assert.match(d.stdout, /^ok +\[keepalive-race\] .*\(live \/healthz\)/m);
  assert.match(d.stdout, new RegExp(`^read: .*${dir}/etc/nginx/nginx\\.conf`, 'm'));
  // reload: its workers replaced one at a time, the runner the demo started.
  const rl = sh(lines[2], env);
  assert.equal(rl.status, 0, rl.stdout + rl.stderr);
  const swap = new RegExp(`^tunekit reload: the runner started by hand \\(pid ${pids.app[0]}\\) reloaded: worker processes ([\\d ]+) -> `, 'm').exec(rl.stdout);
  assert.ok(swap, rl.stdout);
  for (const pid of pids.app.slice(1)) assert.ok(swap[1].split(' ').includes(String(pid)), `worker ${pid} replaced: ${rl.stdout}`);
  // logs: the runner's log, its reload in it.
  const lg = sh(lines[3], env);
  assert.equal(lg.status, 0, lg.stderr);
  assert.ok(lg.stdout.trimEnd().split('\n').length <= 20, lg.stdout);
  assert.match(lg.stdout, /"event":"reload-done"/);
  // --stack DIR names it as well.
  const named = spawnSync(process.execPath, [CLI, 'status', '--stack', dir], { encoding: 'utf8', env });
  assert.equal(named.status, 0, named.stderr);
  assert.equal(named.stderr, '');

  const appNow = [pids.app[0], ...childrenOf(pids.app[0])];
  const s = sh(stop, env);
  assert.equal(s.status, 0, s.stderr);
  assert.match(s.stdout, new RegExp(`^stopped \\d+ processes \\([\\d ]+\\), removed ${dir}$`, 'm'));
  assert.deepEqual([...pids.nginx, ...appNow].filter(alive), []);
  assert.equal(fs.existsSync(dir), false, 'dir removed, socket with it');
  assert.equal(fs.existsSync(record), false, 'record removed');
  // Nothing kept now: each command says where it looked and names the flags.
  const none = spawnSync(process.execPath, [CLI, 'status'], { encoding: 'utf8', env });
  assert.equal(none.status, 1);
  assert.match(none.stderr, /pass --app-config FILE .*, or --stack DIR \(a stack kept by `tunekit demo --keep`\)\n$/);
});

test('a kept stack whose processes are gone is said to be stale, not used; demo --stop removes its record', { timeout: 150_000 }, async (t) => {
  const env = stateEnv(t);
  const r = await run(['demo', '--keep', '--plain', '--duration', '1', '--connections', '2'], t, { env });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const { record, dir } = keptCommands(r.stdout);
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', dir], { env }));
  const pids = pidsIn(r.stdout);
  // The by-hand line stops the processes and removes the dir and the record.
  const byHand = r.stdout.match(/^or by hand:\n {2}(.*)$/m)[1];
  assert.ok(byHand.startsWith(`kill -QUIT ${pids.nginx[0]}; kill -TERM ${pids.app[0]}; while kill -0 ${pids.app[0]} `), byHand);
  assert.ok(byHand.endsWith(`done; rm -rf ${dir} ${record}`), byHand);
  // Stopped by hand, the record kept: it is stale.
  const kill = spawnSync('sh', ['-c', byHand.replace(` ${record}`, '')], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(kill.status, 0, kill.stderr);
  assert.deepEqual([...pids.nginx, ...pids.app].filter(alive), []);
  assert.ok(fs.existsSync(record));
  const stale = `the stack kept by \`demo --keep\` in ${dir} is stale: its processes are gone (nginx pid ${pids.nginx[0]}, app pid ${pids.app[0]}; ` +
    `record ${record}); \`node bin/tunekit.js demo --stop ${dir}\` removes it`;
  for (const cmd of ['status', 'reload', 'logs']) {
    const x = spawnSync(process.execPath, [CLI, cmd], { encoding: 'utf8', cwd: ROOT, env });
    assert.equal(x.status, 1, `${cmd}: ${x.stdout}${x.stderr}`);
    const [first, second] = x.stderr.split('\n');
    assert.equal(first, `tunekit ${cmd}: ${stale}`);
    // Not used: the command goes on with the host's default, which is not there.
    assert.match(second, /\/etc\/tunekit-app\/app\.json does not exist/);
  }
  const named = spawnSync(process.execPath, [CLI, 'doctor', '--stack', dir], { encoding: 'utf8', cwd: ROOT, env });
  assert.equal(named.status, 2);
  assert.equal(named.stderr, `tunekit: --stack ${dir}: ${stale}\n`);
  const s = spawnSync(process.execPath, [CLI, 'demo', '--stop'], { encoding: 'utf8', cwd: ROOT, env });
  assert.equal(s.status, 0, s.stderr);
  assert.equal(s.stdout, `stopped 0 processes (none were running), removed ${dir}\n`);
  assert.equal(fs.existsSync(record), false);
});

test('tunekit demo --plain serves plain HTTP (as behind a TLS load balancer)', { timeout: 150_000 }, async (t) => {
  const r = await run(['demo', '--plain', '--duration', '1', '--connections', '4'], t);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(field(r.stdout, 'url'), /^http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.doesNotMatch(r.stdout, /^ {2}try /m);
  assert.match(field(r.stdout, 'requests'), /^\d+ \(0 non-2xx, 0 errors, 0 timeouts\)$/);
});

test('tunekit demo --app ./app.js: your app, relative to where you are, and every worker counted though it writes no pid', { timeout: 150_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-demo-app-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // An app whose answers say nothing of the process that served them.
  fs.writeFileSync(path.join(dir, 'app.js'),
    "module.exports = (req, res) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ mine: true, servedBy: process.pid })); };\n");
  const env = stateEnv(t);
  const connections = 2;
  const r = await run(['demo', '--app', './app.js', '--plain', '--keep', '--duration', '1', '--connections', String(connections)], t, { cwd: dir, env });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  // Printed for where the user is: the CLI's absolute path, not bin/tunekit.js.
  const stop = r.stdout.match(/^Stop it with:\n {2}(node \S+) demo --stop$/m);
  assert.ok(stop, r.stdout);
  assert.equal(stop[1], `node ${CLI}`);
  const { dir: stackDir } = keptCommands(r.stdout);
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', stackDir], { env }));
  const requests = field(r.stdout, 'requests').match(/^(\d+) \(0 non-2xx, 0 errors, 0 timeouts\)$/);
  assert.ok(requests, field(r.stdout, 'requests'));
  // Every app worker counted by the runner: their requests add up to the answers,
  // and to at most one more per connection (a request in flight when the burst ended).
  const pids = pidsIn(r.stdout);
  const counts = workerCounts(r.stdout);
  assert.deepEqual(Object.keys(counts).map(Number).sort(), pids.app.slice(1).sort(), r.stdout);
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const completed = Number(requests[1]);
  assert.ok(total >= completed && total <= completed + connections, `counted ${total}, answered ${completed}`);
  const served = Object.values(counts).filter((n) => n > 0).length;
  assert.ok(served >= 1);
  assert.match(field(r.stdout, 'workers seen'), new RegExp(`— ${served} of 2 app workers answered \\(counted by the runner, tunekit_app_requests_total\\)$`));
  const body = await new Promise((resolve, reject) => {
    http.get(field(r.stdout, 'url'), (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve(text));
    }).on('error', reject);
  });
  const answer = JSON.parse(body);
  assert.equal(answer.mine, true, body);
  assert.ok(pids.app.slice(1).includes(answer.servedBy), 'one of the stack\'s workers runs it');
  const s = spawnSync(process.execPath, [CLI, 'demo', '--stop'], { encoding: 'utf8', cwd: dir, env });
  assert.equal(s.status, 0, s.stderr);
  assert.equal(fs.existsSync(stackDir), false);
});
