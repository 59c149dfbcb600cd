'use strict';
// The kit as an npm package a Node user installs (test/lib/package.js: `npm pack`,
// then `npm install -g --prefix DIR TARBALL`, one install for the whole file):
//   - the tarball holds what the commands read at run time, no test, fixture or
//     doc, and the README's size for it is current;
//   - from an empty folder, `tunekit render` prints steps that say `tunekit …`, and
//     each step is either run here (the ones that write under /etc or /opt run into
//     a temp dir) or named with why it cannot run on a test machine;
//   - every command of README.md and docs/guide.md that a user of the package types
//     (test/lib/doccheck.js installedCommands: `node bin/tunekit.js …` is
//     `tunekit …` once installed) runs as written with the installed `tunekit`, in
//     doc order, from the folder of an Express app (docs/frameworks.md's, its
//     packages from the frameworks cache): the demo and the load test on it, the
//     runner by hand and then reload, logs, status with no flag, demo --keep and
//     then the lines it prints; a command that cannot run here is listed with the
//     reason, never skipped in silence;
//   - a missing npm package is one line whose reinstall command, run as printed,
//     makes the kit work again; npx's copy says `npx tunekit`;
//   - from git (this checkout's committed HEAD as a git+file:// URL, as a
//     git+https:// one is fetched): `npm install -g` and `npx -p` give a tunekit
//     that works from an empty folder.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { runCommand, until } = require('../lib/util');
const { installed, expressApp, INSTALL_TIMEOUT_MS, NPM_QUIET } = require('../lib/package');
const { installedCommands, runOne, isSynopsis } = require('../lib/doccheck');
const kept = require('../../lib/kept');
const { alive, freePorts } = require('../../lib/proc');

const ROOT = path.resolve(__dirname, '../..');
// A documented command that runs a demo or a 10 s load test: its own bound.
const COMMAND_TIMEOUT_S = 180;

// The numbered steps `render` prints after the file list.
const nextSteps = (out) => out.slice(out.indexOf('Next, as root on the host:'));

// npx keeps what it installs in npm's cache, one folder per spec: this file's go.
const npxCache = path.join(spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim(), '_npx');
const npxDirs = () => new Set(fs.existsSync(npxCache) ? fs.readdirSync(npxCache) : []);
const npxBefore = npxDirs();

let kit = null;
async function setup() {
  kit = await installed();
  return kit;
}
test.after(() => {
  if (kit) kit.cleanup();
  for (const d of npxDirs()) if (!npxBefore.has(d)) fs.rmSync(path.join(npxCache, d), { recursive: true, force: true });
});

test('npm pack: the runtime files only, no test, fixture or doc; the README says its size', async () => {
  const { info } = await setup();
  const files = info.files.map((f) => f.path);
  const stray = files.filter((f) => /^(test|tests|docs|examples|\.ci)\//.test(f) || /\.test\.(js|yml)$/.test(f) || /(^|\/)fixtures\//.test(f));
  assert.deepEqual(stray, [], 'in the tarball');
  // What the CLI reads when it runs: the one definition, the manifest and its templates, the runner.
  for (const f of ['bin/tunekit.js', 'roles/tunekit/defaults/main/00-app.yml', 'roles/tunekit/vars/main.yml', 'roles/tunekit/vars/rules.yml',
    'roles/tunekit/templates/checks.j2', 'nginx/nginx.conf.j2', 'app/cluster.js', 'app/worker.js', 'ansible/profiles/stock.yml', 'kubernetes/templates.yml']) {
    assert.ok(files.includes(f), `${f} is in the tarball`);
  }
  // The dev dependencies stay out of what an install pulls in.
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  for (const dev of Object.keys(pkg.devDependencies)) assert.ok(!Object.hasOwn(pkg.dependencies, dev), `${dev} is a dev dependency only`);
  // The README's figure, rounded as written (kB of 1000 bytes): within 3 % of the
  // tarball's, so a changed file need not change the line, a new folder must.
  const said = /`npm pack` makes a tarball of (\d+) kB, (\d+) files/.exec(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
  assert.ok(said, 'README.md says the tarball\'s size');
  const near = (doc, real) => Math.abs(doc - real) <= real * 0.03;
  assert.ok(near(Number(said[1]) * 1000, info.size), `README: ${said[1]} kB; npm pack: ${(info.size / 1000).toFixed(1)} kB`);
  assert.ok(near(Number(said[2]), info.entryCount), `README: ${said[2]} files; npm pack: ${info.entryCount}`);
});

// render's steps, each command in it: run here (into a temp dir where it writes
// under /etc or /opt), or why not. A step command no entry matches fails the test.
const STEP_COMMANDS = [
  [/^getent group |^id -u .* useradd |^usermod -aG /, 'creates the app\'s user and group and adds nginx\'s user to it on this machine (root on a host)'],
  [/^chgrp -R \S+ \/etc\/\S+ && chmod 0750 \/etc\/\S+$/, 'gives the app\'s group (made by the first step, as root) its settings on this machine; test/e2e/package-host.test.js runs every step on a booted host'],
  [/^rm -f \/etc\/nginx\/sites-enabled\/default$/, 'disables a site of this machine\'s nginx'],
  [/^systemctl /, 'installs and starts the app\'s unit on this machine\'s systemd'],
  [/^nginx -t && systemctl (restart|reload) nginx$/, 'tests and restarts this machine\'s nginx on the copied files'],
  [/^curl -s http:\/\/127\.0\.0\.1\/$/, 'asks this machine\'s nginx on port 80, which the steps above would have set up'],
  [/^tunekit doctor$/, 'audits the host the steps set up; on a kept stack it is run by the README and guide test below'],
];

test('installed globally: --help, and render from an empty folder: its steps say tunekit and run as printed, or say why not', { timeout: 240_000 }, async () => {
  const { env, empty, home, dir, info } = await setup();
  const help = await runCommand('tunekit', ['--help'], { cwd: empty, env, timeoutMs: 30000 });
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /^usage: tunekit <command> \[options\]$/m);
  const out = path.join(empty, 'X');
  const r = await runCommand('tunekit', ['render', '--out', 'X'], { cwd: empty, env, timeoutMs: 60000 });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.existsSync(path.join(out, 'etc/nginx/nginx.conf')), r.stdout);
  const steps = nextSteps(r.stdout);
  assert.doesNotMatch(steps, /npm ci|bin\/tunekit\.js|npm install -g tunekit\b/);

  // The command lines (indented) and the two of step 8's text.
  const lines = steps.split('\n').filter((l) => /^ {5}\S/.test(l)).map((l) => l.trim());
  const last = /^ 8\. Check the result: (curl -s \S+) answers through nginx; (tunekit doctor) audits every layer \(on another host, install the kit there first: (npm pack \S+) here makes its tarball, (npm install -g \S+) there\)\.$/m.exec(steps);
  assert.ok(last, steps);
  const scratch = fs.mkdtempSync(path.join(dir, 'steps-'));
  const ran = [];
  for (const line of [...lines, last[1], last[2]]) {
    const copyRunner = /^mkdir -p (\/opt\/\S+) && cp -r (\S+) \1\/$/.exec(line);
    const copyFiles = /^cp -r (\S+)\/etc\/\. \/etc\/$/.exec(line);
    const sysctl = /^tunekit sysctl apply (\/etc\/sysctl\.d\/\S+)$/.exec(line);
    if (copyRunner) {
      // The runner from the package's own folder, into /opt as a temp dir: it starts (node: built-ins only).
      assert.equal(copyRunner[2], path.join(home, 'app'));
      const r2 = spawnSync('sh', ['-c', line.replaceAll(copyRunner[1], path.join(scratch, copyRunner[1]))], { encoding: 'utf8' });
      assert.equal(r2.status, 0, r2.stderr);
      const usage = spawnSync(process.execPath, [path.join(scratch, copyRunner[1], 'app/cluster.js'), '--help'], { encoding: 'utf8' });
      assert.equal(usage.status, 0, usage.stderr);
      ran.push(line);
    } else if (copyFiles) {
      assert.equal(copyFiles[1], out);
      const etc = path.join(scratch, 'etc');
      fs.mkdirSync(etc);
      const r2 = spawnSync('sh', ['-c', line.replace(/ \/etc\/$/, ` ${etc}/`)], { encoding: 'utf8' });
      assert.equal(r2.status, 0, r2.stderr);
      assert.ok(fs.existsSync(path.join(etc, 'tunekit-app/app.json')));
      ran.push(line);
    } else if (sysctl) {
      // As the step says, --dry-run first: on the copied file, nothing of this machine changed.
      const r2 = await runCommand('sh', ['-c', `tunekit sysctl apply --dry-run ${path.join(scratch, sysctl[1])}`], { cwd: empty, env, timeoutMs: 30000 });
      assert.equal(r2.code, 0, r2.out);
      ran.push(line);
    } else {
      const why = STEP_COMMANDS.find(([re]) => re.test(line));
      assert.ok(why, `render printed a step command this test neither runs nor names: ${line}`);
    }
  }
  assert.equal(ran.length, 3, ran.join('\n'));
  // Step 8's other host: the package's own folder packed is the tarball it came from.
  const again = await runCommand('sh', ['-c', `${last[3]} --json --loglevel=error`], { cwd: scratch, timeoutMs: 120000 });
  assert.equal(again.code, 0, again.stderr);
  const [repacked] = JSON.parse(again.stdout);
  assert.equal(last[4], `npm install -g ./${repacked.filename}`);
  assert.deepEqual(repacked.files.map((f) => f.path).sort(), info.files.map((f) => f.path).sort());
  assert.equal(repacked.integrity, info.integrity, 'the same tarball, byte for byte');
});

// ---- every command of README.md and docs/guide.md, as an installed user types it

// Not run here, each with why; matched against the installed form.
const NOT_RUN = [
  [/^npm pack$|^npm install -g \.\/tunekit-/, 'the install itself: test/lib/package.js packs this checkout and installs the tarball with npm install -g, into a prefix of its own (--prefix) instead of the system\'s'],
  [/^alias tunekit=/, 'a checkout\'s alias: installed, tunekit is on PATH'],
  [/^cd ~\/myapp$/, 'the app\'s folder: every command here runs from the Express app\'s folder'],
  [/\/run\/tunekit-app\//, 'on a server: /run/tunekit-app is the unit\'s RuntimeDirectory= and the socket group tunekit comes from render\'s step 1 (root on a host); test/e2e/host-systemd.test.js runs the runner there'],
  [/^tunekit bench\b/, 'minutes of load on every core (benchmarks are never run by tests)'],
  [/^tunekit profile\b/, 'perf and strace on a stack under load or a deployed unit: test/integration/profile.test.js runs it'],
  [/--app-config \/etc\//, 'the app.json of an app deployed on a host (/etc): app-reload-logs.test.js points --app-config at a runner\'s file'],
];
// Act on what runs: with a kept stack or a runner of this test, run; with none,
// they would read this machine's own app and nginx.
const ON_WHAT_RUNS = /^tunekit (status|doctor|reload|logs)\b/;
const NOTHING_RUNS = 'reads this machine\'s own app and nginx (nothing of this test runs at this point in the doc): status.test.js and doctor.test.js run them on live stacks';

/** The `## ` section of a doc a line is in (its heading's line number). */
function sectionOf(file, line) {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n').slice(0, line);
  let at = 0;
  text.forEach((l, i) => { if (/^## /.test(l)) at = i + 1; });
  return `${file}:${at}`;
}

/** A user's shell for the doc commands: the installed tunekit first on PATH, a home and a state dir of its own. */
function userEnv(kitEnv, scratch) {
  const home = path.join(scratch, 'home');
  fs.mkdirSync(home);
  // npm's cache stays the machine's (the npx line installs from it).
  const cache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();
  return { ...process.env, ...kitEnv, HOME: home, npm_config_cache: cache, TUNEKIT_STATE_DIR: path.join(scratch, 'state') };
}

/** The processes of process group pgid (/proc/PID/stat's fifth field). */
function inGroup(pgid) {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid;
    } catch {
      return false;
    }
  });
}

/**
 * A `tunekit run` line, started as a user's shell would from the app's folder, its
 * output appended to app.log (as the guide says for `logs`; a line that sends it
 * there itself is left as it is); ready when its record's pid is ready, then asked
 * once through its listener. stop(): Ctrl-C (SIGINT to the process group) for a
 * line in the foreground, SIGTERM for one in the background (a non-interactive
 * shell starts it with SIGINT ignored); its record must go with it.
 */
async function startRunner(t, line, { cwd, env }) {
  const background = /&\s*$/.test(line);
  const cmd = background || /(^|\s)>>\s*\S+/.test(line) ? line : `${line} >> app.log 2>&1`;
  const sh = spawn('sh', ['-c', cmd], { cwd, env, detached: true, stdio: 'ignore' });
  const shExit = new Promise((resolve) => sh.on('exit', resolve));
  // The shell's process group holds the runner and its workers (in the background too):
  // whatever happens to the test, the group goes.
  t.after(() => {
    // Only while a process of it is left: a group's id is not given again while it has one.
    if (inGroup(sh.pid).length) process.kill(-sh.pid, 'SIGKILL');
  });
  const rec = await until(`the record of \`${line}\``, () => kept.records(env, { kind: 'run' }).find((r) => r.live), 30000);
  const log = path.join(cwd, 'app.log');
  await until(`${line}: its ready line in app.log`, () => fs.readFileSync(log, 'utf8').split('\n')
    .some((l) => l.includes('"event":"ready"') && l.includes(`"pid":${rec.appPid}`)), 30000);
  const url = rec.listen.startsWith('unix:') ? ['--unix-socket', rec.listen.slice(5), 'http://localhost/'] : ['http://' + rec.listen.slice(4) + '/'];
  const get = spawnSync('curl', ['--silent', '--show-error', '--fail', '--max-time', '10', ...url], { encoding: 'utf8' });
  assert.equal(get.status, 0, `${line}: GET / on ${rec.listen}: ${get.stderr}`);
  return {
    rec,
    async stop() {
      if (background) process.kill(rec.appPid, 'SIGTERM');
      else process.kill(-sh.pid, 'SIGINT');
      await until(`${line} to stop`, () => !alive(rec.appPid), 60000);
      if (!background) await shExit;
      const stopLine = fs.readFileSync(log, 'utf8').split('\n').find((l) => l.includes('"event":"stop"') && l.includes(`"pid":${rec.appPid}`));
      assert.match(stopLine || '', /"code":0/, `${line} stopped cleanly`);
      assert.deepEqual(kept.records(env), [], 'its record went with it');
    },
  };
}

/** The lines `demo --keep` prints to drive the stack (after "Recorded in FILE: ..."), without their comments. */
function keptLines(out) {
  const m = /^Recorded in \S+: these find it with no flags \(--stack (\S+) names it\):\n((?: {2}.*\n)+)Stop it with:\n {2}(.*)$/m.exec(out);
  assert.ok(m, out);
  return { dir: m[1], lines: [...m[2].trimEnd().split('\n').map((l) => l.trim().replace(/\s+#.*$/, '')), m[3]] };
}

test('every tunekit command of the README and the guide runs as written with the installed package, from an Express app\'s folder', { timeout: 600_000 }, async (t) => {
  const { env: kitEnv, dir } = await setup();
  const scratch = fs.mkdtempSync(path.join(dir, 'docs-'));
  const env = userEnv(kitEnv, scratch);
  const app = await expressApp(scratch);
  const tmp = fs.mkdtempSync(path.join(scratch, 'tmp-'));
  // The guide's §2 vars file, as its YAML block says, for §3's `--vars my.yml`.
  const guide = fs.readFileSync(path.join(ROOT, 'docs/guide.md'), 'utf8');
  const vars = /^## 2\. [^\n]*\n[\s\S]*?^```yaml\n([\s\S]*?)^```$/m.exec(guide);
  assert.ok(vars, 'the guide\'s §2 has a YAML block');
  fs.writeFileSync(path.join(app, 'my.yml'), vars[1]);

  let runner = null; // a `tunekit run` of the docs, running
  let stack = null; // what `demo --keep` printed: { dir, lines }
  t.after(() => {
    if (stack) spawnSync('tunekit', ['demo', '--stop', stack.dir], { env });
  });
  const done = [];
  const failed = [];
  const note = (c, what) => done.push(`${c.file}:${c.line} ${what}  ${c.installed}`);
  const check = (c, r, extra = []) => {
    const problems = [...r.problems, ...extra];
    if (problems.length) failed.push(`${c.file}:${c.line} ${c.installed}: ${problems.join('; ')}\n${(r.stderr || '').trim().split('\n').slice(-5).join('\n')}`);
  };

  for (const c of installedCommands()) {
    const line = c.installed;
    // A runner the doc started lives for the lines of its section that act on it.
    if (runner && runner.section !== sectionOf(c.file, c.line)) {
      await runner.stop();
      runner = null;
    }
    const exempt = NOT_RUN.find(([re]) => re.test(line));
    if (exempt) { note(c, `not run (${exempt[1]})`); continue; }
    if (isSynopsis(line)) { note(c, 'not run (a synopsis with placeholders)'); continue; }
    if (ON_WHAT_RUNS.test(line) && !/ --(app-config|stack) /.test(line)) {
      if (!runner && !stack) { note(c, `not run (${NOTHING_RUNS})`); continue; }
      if (stack) assert.ok(stack.lines.includes(line), `${c.file}:${c.line}: \`${line}\` is one of the lines demo --keep printed: ${stack.lines.join(' | ')}`);
      check(c, runOne(line, tmp, { cwd: app, env, timeoutS: COMMAND_TIMEOUT_S }));
      note(c, runner ? 'ran on the runner above' : 'ran on the kept stack');
      continue;
    }
    // Anything else ends what the lines above started: Ctrl-C for the runner.
    if (runner) {
      await runner.stop();
      runner = null;
    }
    if (/(^|&& )tunekit run\b/.test(line)) {
      // A fixed port may be held on a shared test machine: the README's 3000 becomes a free one.
      const [port] = await freePorts(1);
      runner = await startRunner(t, line.replace('tcp:127.0.0.1:3000', `tcp:127.0.0.1:${port}`), { cwd: app, env });
      runner.section = sectionOf(c.file, c.line);
      note(c, 'started, answered, and stopped with Ctrl-C after the lines that act on it');
      continue;
    }
    if (line === 'tunekit demo --stop') {
      assert.ok(stack && stack.lines.includes(line), `${c.file}:${c.line}: demo --keep printed ${line}`);
      const r = runOne(line, tmp, { cwd: app, env, timeoutS: COMMAND_TIMEOUT_S });
      check(c, r, fs.existsSync(stack.dir) ? [`${stack.dir} is left`] : []);
      stack = null;
      note(c, 'ran: the kept stack stopped, its dir gone');
      continue;
    }
    // The npx line names the tarball of the README's folder: run from the pack's folder.
    const where = /^npx .*--package \.\/tunekit-/.test(line) ? dir : app;
    const r = runOne(line, tmp, { cwd: where, env, timeoutS: COMMAND_TIMEOUT_S });
    const extra = [];
    if (/^tunekit demo\b|^npx .* tunekit demo\b/.test(line)) {
      const stopped = /^stopped: \d+ processes exited \(([\d ]+)\), socket and (\S+) removed$/m.exec(r.stdout);
      if (line.endsWith('--keep')) {
        stack = keptLines(r.stdout);
      } else if (!stopped) {
        extra.push('no "stopped:" line');
      } else {
        const left = stopped[1].split(' ').map(Number).filter(alive);
        if (left.length) extra.push(`processes left: ${left.join(' ')}`);
        if (fs.existsSync(stopped[2])) extra.push(`${stopped[2]} left`);
      }
      // Every worker counted by the runner, whatever the app writes (the Express app writes no worker number).
      const seen = /^ {2}workers seen .* — (\d+) of (\d+) app workers answered/m.exec(r.stdout);
      if (!seen || seen[1] !== seen[2]) extra.push(`workers seen: ${seen ? seen[0].trim() : 'no line'}`);
    }
    check(c, r, extra);
    note(c, 'ran');
  }
  if (runner) await runner.stop();
  assert.equal(stack, null, 'the guide stops the stack it keeps');
  t.diagnostic(done.join('\n'));
  assert.deepEqual(failed, []);
  // The lines that must have run, whatever the docs say around them.
  const ran = done.filter((d) => !/ not run \(/.test(d)).map((d) => d.replace(/^\S+ /, ''));
  for (const want of ['tunekit demo --app ./app.js', 'tunekit demo --keep', 'tunekit reload', 'tunekit logs -n 100', 'tunekit status', 'tunekit demo --stop']) {
    assert.ok(ran.some((d) => d.endsWith(`  ${want}`)), `${want} ran: \n${done.join('\n')}`);
  }
});

test('installed globally: a missing npm package is one line whose reinstall command, run as printed, brings it back', { timeout: INSTALL_TIMEOUT_MS + 120_000 }, async () => {
  const { env, empty, home, prefix, dir } = await setup();
  // Last in the file but npx's: the install is changed here.
  fs.rmSync(path.join(home, 'node_modules/yaml'), { recursive: true, force: true });
  const r = await runCommand('tunekit', ['render', '--out', 'Y'], { cwd: empty, env, timeoutMs: 30000 });
  assert.equal(r.code, 2, r.stdout);
  const m = /^tunekit: npm package yaml is not installed; reinstall it from its own files: `(npm pack (\S+) && npm install -g \.\/tunekit-[\d.]+\.tgz)`\n$/.exec(r.stderr);
  assert.ok(m, r.stderr);
  assert.equal(m[2], home);
  // The user's npm installs globally into this prefix (their npm config, here in the environment).
  const again = fs.mkdtempSync(path.join(dir, 'reinstall-'));
  const fix = await runCommand('sh', ['-c', `${m[1]} ${NPM_QUIET.join(' ')}`], { cwd: again, env: { ...env, npm_config_prefix: prefix }, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(fix.code, 0, fix.out);
  const ok = await runCommand('tunekit', ['render', '--out', 'Y'], { cwd: empty, env, timeoutMs: 60000 });
  assert.equal(ok.code, 0, ok.stderr);
});

test('npx from the tarball: render\'s next steps say npx tunekit', { timeout: INSTALL_TIMEOUT_MS + 60000 }, async () => {
  const { tarball, empty } = await setup();
  const r = await runCommand('npx', ['--yes', ...NPM_QUIET, '--package', tarball, '--', 'tunekit', 'render', '--out', 'N'], { cwd: empty, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(r.code, 0, r.stderr);
  const steps = nextSteps(r.stdout);
  assert.match(steps, /^ {5}npx tunekit sysctl apply /m);
  assert.doesNotMatch(steps, /npm ci|bin\/tunekit\.js/);
});

const fromGit = spawnSync('git', ['-C', ROOT, 'rev-parse', '--is-inside-work-tree'], { encoding: 'utf8' }).stdout.trim() === 'true'
  ? false : 'not a git checkout: nothing to install from git';

test('from git: npm install -g git+URL and npx -p git+URL give a tunekit that works from any folder', { skip: fromGit, timeout: 2 * INSTALL_TIMEOUT_MS + 60000 }, async (t) => {
  const { dir, empty } = await setup();
  const url = `git+file://${ROOT}`;
  const prefix = path.join(dir, 'git-prefix');
  t.after(() => fs.rmSync(prefix, { recursive: true, force: true }));
  const inst = await runCommand('npm', ['install', '-g', '--prefix', prefix, ...NPM_QUIET, url], { cwd: empty, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(inst.code, 0, `npm install -g ${url}: ${inst.stderr}`);
  const env = { ...process.env, PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}` };
  const r = await runCommand('tunekit', ['render', '--out', 'G'], { cwd: empty, env, timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(nextSteps(r.stdout), /^ {5}tunekit sysctl apply /m, 'the global install from git names itself tunekit');
  const x = await runCommand('npx', ['--yes', ...NPM_QUIET, '-p', url, '--', 'tunekit', '--version'], { cwd: empty, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(x.code, 0, x.stderr);
  assert.match(x.stdout, /^tunekit \d+\.\d+\.\d+/);
  fs.rmSync(path.join(empty, 'G'), { recursive: true, force: true });
});
