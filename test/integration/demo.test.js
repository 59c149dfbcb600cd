'use strict';
// `npm run demo` (set-up, then `tunekit demo`) as the README says to run it: it
// prints the URL, the socket, the workers that answered, req/s and p50/p99, then
// leaves no process, socket or temp dir. --keep leaves it running, and the stop
// command it prints removes everything.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { ROOT } = require('../../lib/template');
const { alive } = require('../../lib/proc');

const CLI = path.join(ROOT, 'bin/tunekit.js');

function run(args, t, { npm = false, cwd = ROOT } = {}) {
  return new Promise((resolve) => {
    // `npm run demo -- ARGS` runs the set-up step, then `tunekit demo ARGS`.
    const child = npm
      ? spawn('npm', ['run', '--silent', 'demo', '--', ...args], { cwd })
      : spawn(process.execPath, [CLI, ...args], { cwd });
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
  // Only app workers answered, and the line counts them. Not "every worker": on
  // the shared socket whichever worker accepts first takes nginx's few kept-alive
  // upstream connections, and on a busy machine one worker once took all of them.
  const seen = [...field(out, 'workers seen').matchAll(/(\d+) \(\d+\)/g)].map((m) => Number(m[1]));
  assert.ok(seen.length >= 1 && seen.every((pid) => pids.app.slice(1).includes(pid)), `${seen} are app workers of ${pids.app}`);
  assert.match(field(out, 'workers seen'), new RegExp(`${seen.length} of 2 app workers answered`));
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

test('tunekit demo --keep leaves it running; the printed stop command removes everything', { timeout: 150_000 }, async (t) => {
  const r = await run(['demo', '--keep', '--duration', '1', '--connections', '4'], t);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const dir = r.stdout.match(/node bin\/tunekit\.js demo --stop (\S+)/)[1];
  const pids = pidsIn(r.stdout);
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', dir]));
  assert.ok([...pids.nginx, ...pids.app].every(alive), 'still running after the demo returned');
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
  // The doctor line it prints audits this very stack.
  const audit = r.stdout.match(/^Audit it with:\n {2}node bin\/tunekit\.js (doctor .*)$/m)[1].split(' ');
  const d = spawnSync(process.execPath, [CLI, ...audit], { encoding: 'utf8', cwd: ROOT });
  assert.equal(d.status, 0, d.stdout + d.stderr);
  assert.match(d.stdout, /^ok +\[keepalive-race\] .*\(live \/healthz\)/m);
  // `status` with the same files reads this stack: a row per app worker the demo printed.
  const st = spawnSync(process.execPath, [CLI, 'status', '--json', ...audit.slice(1)], { encoding: 'utf8', cwd: ROOT });
  assert.equal(st.status, 0, st.stderr);
  const rows = JSON.parse(st.stdout).workers.map((w) => w.pid);
  for (const pid of pids.app.slice(1)) assert.ok(rows.includes(pid), `status has app worker ${pid}: ${rows}`);
  const byHand = r.stdout.match(/^or by hand:\n {2}(.*)$/m)[1];
  assert.ok(byHand.startsWith(`kill -QUIT ${pids.nginx[0]}; kill -TERM ${pids.app[0]}; while kill -0 ${pids.app[0]} `), byHand);
  assert.ok(byHand.endsWith(`done; rm -rf ${dir}`), byHand);

  const s = spawnSync(process.execPath, [CLI, 'demo', '--stop', dir], { encoding: 'utf8', cwd: ROOT });
  assert.equal(s.status, 0, s.stderr);
  assert.deepEqual([...pids.nginx, ...pids.app].filter(alive), []);
  assert.equal(fs.existsSync(dir), false);
});

test('the by-hand stop command printed by --keep works too', { timeout: 150_000 }, async (t) => {
  const r = await run(['demo', '--keep', '--duration', '1', '--connections', '2'], t);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const dir = r.stdout.match(/node bin\/tunekit\.js demo --stop (\S+)/)[1];
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', dir]));
  const pids = pidsIn(r.stdout);
  const byHand = r.stdout.match(/^or by hand:\n {2}(.*)$/m)[1];
  const s = spawnSync('sh', ['-c', byHand], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(s.status, 0, s.stderr);
  assert.deepEqual([...pids.nginx, ...pids.app].filter(alive), []);
  assert.equal(fs.existsSync(dir), false);
});

test('tunekit demo --plain serves plain HTTP (as behind a TLS load balancer)', { timeout: 150_000 }, async (t) => {
  const r = await run(['demo', '--plain', '--duration', '1', '--connections', '4'], t);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(field(r.stdout, 'url'), /^http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.doesNotMatch(r.stdout, /^ {2}try /m);
  assert.match(field(r.stdout, 'requests'), /^\d+ \(0 non-2xx, 0 errors, 0 timeouts\)$/);
});

test('tunekit demo --app ./app.js puts your app, relative to where you are, behind the stack', { timeout: 150_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-demo-app-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'app.js'),
    "module.exports = (req, res) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ mine: true, pid: process.pid })); };\n");
  const r = await run(['demo', '--app', './app.js', '--plain', '--keep', '--duration', '1', '--connections', '2'], t, { cwd: dir });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  // Printed for where the user is: the CLI's absolute path, not bin/tunekit.js.
  const stop = r.stdout.match(/^Stop it with:\n {2}(node \S+) demo --stop (\S+)$/m);
  assert.ok(stop, r.stdout);
  assert.equal(stop[1], `node ${CLI}`);
  t.after(() => spawnSync(process.execPath, [CLI, 'demo', '--stop', stop[2]]));
  assert.match(field(r.stdout, 'requests'), /^\d+ \(0 non-2xx, 0 errors, 0 timeouts\)$/);
  const body = await new Promise((resolve, reject) => {
    http.get(field(r.stdout, 'url'), (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve(text));
    }).on('error', reject);
  });
  const answer = JSON.parse(body);
  assert.equal(answer.mine, true, body);
  assert.ok(pidsIn(r.stdout).app.slice(1).includes(answer.pid), 'one of the stack\'s workers runs it');
  const s = spawnSync(process.execPath, [CLI, 'demo', '--stop', stop[2]], { encoding: 'utf8', cwd: dir });
  assert.equal(s.status, 0, s.stderr);
  assert.equal(fs.existsSync(stop[2]), false);
});
