'use strict';
// The doc-check: every shell command in the project's Markdown (README.md,
// docs/*.md, each folder's README) is either run here, as written, or listed in
// EXEMPT with the reason it cannot run on a test machine. Commands come from
// fenced sh/bash blocks (one command a line, comments dropped) and from inline
// code spans that are a whole `node bin/tunekit.js …` or `node loadtest/…` line.
//
//   node test/lib/doccheck.js          run every command, print one line each
//   node test/lib/doccheck.js --list   list the commands and their verdicts only
//
// test/integration/doc-commands.test.js calls check() and fails on any command
// that fails, and on any command that is neither run nor exempt.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '../..');

// Commands not run, each with why. A pattern matches the start of a command.
const EXEMPT = [
  [/^npm (test|run test:(integration|e2e))\b/, 'the whole suite: the lead runs it; the doc-check is one of its tests'],
  [/^npm run test:unit\b/, 'the unit suite: run on its own by every engineer; too long inside another test'],
  [/^npm run demo\b/, 'npm ci + apt + a demo: the demo itself is run by test/integration/demo.test.js'],
  [/^npm run bench\b|^(?:[A-Z_]+=\S+ )*node bin\/tunekit\.js bench(?! --help)/, 'minutes of load on every core (benchmarks are never run by tests)'],
  [/^node bin\/tunekit\.js tune(?! --help)|^node loadtest\/tune-grid\.js(?! --help)/, 'minutes (the grid: hours) of load on every core, one stack per candidate: test/integration/tune.test.js runs tune with a 40 s budget and the grid on two combinations'],
  [/^npm run loadtest:(uds|tcp)\b/, 'ten seconds of load per stack: the same command with --duration 2 is run by test/integration/loadtest-cli.test.js'],
  [/^npm (ci|install)\b/, 'installs packages from the registry'],
  [/^node test\/lib\/frameworks\.js build$/, 'installs the framework fixtures from the registry (about 400 MB, once): test/integration/frameworks.test.js runs the same install'],
  [/^(cd ansible && )?(\.\.\/\.venv\/bin\/)?ansible-playbook\b/, 'deploys over SSH to a host of your inventory: test/e2e/ansible-site.test.js runs the playbook on booted containers'],
  [/^cp examples\/inventory-one-host\.ini\b/, 'part of the Ansible deployment above (run from ansible/)'],
  [/^ansible-galaxy collection (build|install)\b/, 'writes a tarball into the current folder or installs into ~/.ansible (git+ and -r name a URL or file of yours): test/checks/collection.test.js builds the collection and installs the tarball into a collections path of its own'],
  [/^ansible-doc -t role tunekit\.stack\./, 'needs the collection installed: test/checks/collection.test.js runs ansible-doc on every role of the installed collection'],
  [/^cd ansible$/, 'part of the Ansible deployment above'],
  [/^systemd-analyze\b|^cat \/proc\/\$\(systemctl\b/, 'needs the units installed and systemd booted: test/e2e runs them in booted containers'],
  [/^wrk .*PORT\b/, 'a measurement against a stack the reader starts (PORT is theirs); the figures are in the text'],
  [/^(mkdir -p "\$HOME\/\.run" && )?(node bin\/tunekit\.js|tunekit) run\b/, 'starts a server that runs until stopped: test/integration/package.test.js runs the no-root lines with the installed tunekit from an app\'s folder (and reload, logs, status on them), runner-user.test.js as the user nobody, the other runner tests the rest'],
  [/^node loadtest\/bare-cluster\.js\b/, 'a cluster that serves until stopped, started by lib/stack.js for the bench\'s bare scenario: test/integration/loadtest-bench.test.js starts it, serves through it and stops it'],
  [/^node loadtest\/runner-cost\.js(?! --help)/, 'minutes of load on every core: runner and bare stacks at a fixed rate in interleaved rounds (a measurement, as the bench is; the figures are in the text)'],
  [/^node loadtest\/noise\.js /, 'reads a bench report the reader wrote (REPORT.json: bench --aa --json FILE); test/unit/loadtest-noise.test.js runs its analysis on made-up rounds'],
  [/^node loadtest\/syscalls\.js(?! --help)/, 'strace over three stacks, about a minute of load; --help is run'],
  [/^node loadtest\/handshakes\.js(?! --help)/, 'minutes of full TLS handshakes against the local nginx and each root filesystem\'s: test/integration/handshakes.test.js runs one short round; --help is run'],
  [/^node --test\b/, 'a test file: the suite runs it'],
  [/^node bin\/tunekit\.js render --out \/tmp\/host --vars my\.yml/, 'renders the vars file the reader wrote in the previous step; the same render with a vars file is run from nginx/README.md'],
  [/^node bin\/tunekit\.js (doctor|sysctl apply \/etc\/)/, 'reads or changes this host\'s live nginx/sysctl: doctor is run against live stacks by test/integration/doctor.test.js, sysctl apply by test/integration/sysctl*.test.js'],
  [/^node bin\/tunekit\.js (reload|logs)\b(?! --help)/, 'acts on the app running on this host (a rolling restart, its log): test/integration/app-reload-logs.test.js runs both against a runner it starts, host-pm2.test.js under PM2, test/e2e/host-systemd.test.js under systemd'],
  [/^node bin\/tunekit\.js status\b(?! --help)/, 'reads the endpoints of the stack running on this host: test/integration/status.test.js runs it against a stack it starts'],
  [/^node bin\/tunekit\.js demo --(keep|stop)\b/, 'leaves a stack running, or stops the one left: test/integration/demo.test.js runs --keep, then the status, doctor, reload, logs and demo --stop commands it prints'],
  [/^node bin\/tunekit\.js render --out docs\/reference\//, 'rewrites the committed reference tree: npm run generate writes it, test/unit/generate.test.js checks it is current'],
  [/^npm run setup:ansible\b/, 'installs Python packages from PyPI into .venv'],
  [/^npm run generate$/, 'rewrites the generated files of this tree: test/unit/generate.test.js runs it in a copy of the repository (the --check form is run here)'],
  [/^node bin\/tunekit\.js profile(?! --help)/, 'perf and strace on a live stack under load (or on a deployed unit): test/integration/profile.test.js runs it'],
  [/^apt-get install\b/, 'installs Debian packages on this host'],
  [/^node \/opt\/tunekit\/metrics\/queue-sampler\.js /, 'the sampler as a host runs it, until stopped, into node_exporter\'s directory: test/integration/metrics.test.js runs it against real sockets, once and in a loop'],
  [/^(npm pack$|npm install -g \.\/tunekit-|npx --yes --package \.\/tunekit-|tunekit render )/, 'the kit as an npm package: npm pack writes a tarball into this folder and npm install -g into the system\'s prefix; test/integration/package.test.js packs it, installs the tarball into a prefix of its own and runs every tunekit command of README.md and docs/guide.md from an Express app\'s folder, and the npx line from the tarball\'s'],
  [/^(alias tunekit=|cd ~\/myapp$|tunekit (run|demo|loadtest) )/, 'the reader\'s own app in its own folder, through the alias or the installed tunekit: test/integration/package.test.js runs these lines as written with the installed package from an Express app\'s folder'],
];

// Commands whose documented outcome is a refusal: the doc shows the message.
const EXPECT = [
  [/^node bin\/tunekit\.js render --out \/tmp\/tk --nginx-version 1\.16\.1$/, { code: 2, stderr: /tunekit_nginx_version=1\.16\.1 is below the kit's floor/ }],
];

// A synopsis, not a command: placeholders (DIR, FILE, URL, N) or [optional] parts.
const SYNOPSIS = /\[[^\]]*\]|\b(DIR|FILE|URL|HOST|PATH|N|R|S|KIND|X\.Y\.Z)\b|<[a-z_]+>|\|(?=\S)/;

/** A synopsis: its placeholders outside quotes ('[/a/b]', a YAML list given as a value, is a value). */
const isSynopsis = (command) => SYNOPSIS.test(command.replace(/'[^']*'/g, "''"));

function docs() {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: ROOT, encoding: 'utf8' });
  // The rendered reference trees are output, not docs (their README is a doc).
  return out.split('\n').filter((f) => f && (!f.startsWith('docs/reference/') || f === 'docs/reference/README.md'));
}

/** Every command of every doc: [{ file, line, command }]. */
function commands(files = docs()) {
  const out = [];
  for (const file of files) {
    const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
    let fence = null;
    lines.forEach((text, i) => {
      const f = /^\s*```(\w*)/.exec(text);
      if (f) {
        fence = fence === null ? f[1] : null;
        return;
      }
      if (fence === 'sh' || fence === 'bash') {
        const command = text.replace(/\s+#.*$/, '').trim();
        if (command && !command.startsWith('#')) out.push({ file, line: i + 1, command });
        return;
      }
      if (fence !== null) return;
      for (const m of text.matchAll(/`(node (?:bin\/tunekit\.js|loadtest\/)[^`]*)`/g)) out.push({ file, line: i + 1, command: m[1] });
    });
  }
  return out;
}

function verdict(command) {
  const ex = EXEMPT.find(([re]) => re.test(command));
  if (ex) return { exempt: ex[1] };
  if (isSynopsis(command)) return { exempt: 'a synopsis with placeholders; each command it names is run with values elsewhere' };
  return { run: true };
}

// Run one command as written, from the repo root (or cwd), with /tmp/NAME moved
// into a fresh directory of this check (other users of /tmp are left alone).
function runOne(command, tmp, { cwd = ROOT, env = process.env, timeoutS = 60 } = {}) {
  const cmd = command.replace(/\/tmp\/(\w+)/g, (_, n) => path.join(tmp, n));
  // timeout(1) runs the command in a process group of its own and signals the
  // whole group: nothing a documented command starts outlives the check.
  const r = spawnSync('timeout', ['-k', '5', String(timeoutS), 'sh', '-c', cmd], { cwd, env, encoding: 'utf8' });
  const expect = (EXPECT.find(([re]) => re.test(command)) || [])[1] || { code: 0 };
  const problems = [];
  if (r.status !== expect.code) problems.push(`exit ${r.status ?? r.signal}, expected ${expect.code}`);
  if (expect.stderr && !expect.stderr.test(r.stderr)) problems.push(`stderr lacks ${expect.stderr}`);
  if (/^\s+at .+:\d+:\d+\)?$/m.test(r.stderr)) problems.push('a stack trace on stderr');
  return { ok: problems.length === 0, problems, stdout: r.stdout, stderr: r.stderr };
}

// The docs a user of the installed package reads, and the commands of theirs
// that such a user types: those that run the CLI (`node bin/tunekit.js …`, which
// is `tunekit …` once installed, or `tunekit …` as written) and the install
// lines. test/integration/package.test.js runs them with the installed `tunekit`.
const USER_DOCS = ['README.md', 'docs/guide.md'];
const CLI_LINE = /bin\/tunekit\.js|(?:^|&& |-- )tunekit /;
const INSTALL_LINE = /^(npm pack|npm install -g \.\/tunekit-|cd ~\/myapp)$|^npm install -g \.\/tunekit-/;

/** [{ file, line, command (as printed), installed (as an installed user types it) }] */
function installedCommands(files = USER_DOCS) {
  return commands(files)
    .filter((c) => CLI_LINE.test(c.command) || INSTALL_LINE.test(c.command))
    .map((c) => ({ ...c, installed: c.command.replace(/\bnode bin\/tunekit\.js\b/g, 'tunekit') }));
}

/** Run every runnable command; returns [{ file, line, command, exempt?, ok?, problems? }]. */
function check({ run = true } = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-doccheck-'));
  try {
    return commands().map((c) => {
      const v = verdict(c.command);
      if (v.exempt || !run) return { ...c, ...v };
      return { ...c, ...runOne(c.command, tmp) };
    });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const list = process.argv.includes('--list');
  let failed = 0;
  for (const r of check({ run: !list })) {
    const where = `${r.file}:${r.line}`;
    if (r.exempt) console.log(`exempt  ${where}  ${r.command}\n        (${r.exempt})`);
    else if (list) console.log(`run     ${where}  ${r.command}`);
    else {
      console.log(`${r.ok ? 'ok    ' : 'FAILED'}  ${where}  ${r.command}${r.ok ? '' : `\n        ${r.problems.join('; ')}\n${r.stderr.trim().split('\n').slice(-3).map((l) => `        ${l}`).join('\n')}`}`);
      if (!r.ok) failed++;
    }
  }
  process.exitCode = failed ? 1 : 0;
}

module.exports = { EXEMPT, EXPECT, isSynopsis, USER_DOCS, commands, installedCommands, verdict, runOne, check };
