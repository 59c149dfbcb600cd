'use strict';
// Stacks left running by `tunekit demo --keep`, recorded where the commands that
// act on a stack look when no flag names one: `status`, `doctor`, `reload`, `logs`
// and `demo --stop` find a kept stack with no flags, or with `--stack DIR`.
//
// One small JSON record per stack, STATE_DIR/stacks/NAME.json (NAME: the stack's
// temp dir, tunekit-stack-XXXXXX), holding where its files are (nginx.conf,
// app.json, the app's log) and its two main pids. STATE_DIR is
//   $TUNEKIT_STATE_DIR, when set (the tests; a user who wants another place);
//   /run/tunekit as root: the FHS's place for runtime state, a tmpfs emptied at boot,
//     as the stack's processes are;
//   $XDG_RUNTIME_DIR/tunekit for a user who has one (the XDG base directory spec's
//     "user-specific non-essential runtime files": per user, mode 0700, gone at logout);
//   else $XDG_CACHE_HOME/tunekit (~/.cache/tunekit), which outlives a reboot: a record
//     whose processes are gone is then found stale.
// https://refspecs.linuxfoundation.org/FHS_3.0/fhs/ch03s15.html
// https://specifications.freedesktop.org/basedir-spec/latest/
//
// A record is live while one of its processes runs (the pid alive and its command
// line naming the stack's dir, so a recycled pid is never taken for it); a record
// whose processes are all gone is stale: it is said to be, and never used.
//
// `tunekit run` records itself the same way (recordRun; "kind": "run"): the
// record STATE_DIR/stacks/run-PID.json, and beside it the runner's dir run-PID/
// holding app.json, the settings it runs with (a runner started with flags has
// no file of them), which reload, logs, status and doctor read as they read a
// host's app.json; `--stack DIR` names that dir. It is live while its pid runs
// with the start time recorded (a recycled pid has another); the runner removes
// it when it exits. One left by a runner that was killed (SIGKILL leaves no
// exit hook) is stale: the command that finds it says so and removes it, as
// nothing else of a runner is left to stop.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { UsageError } = require('./errors');
const { alive, cmdline, readStat } = require('./proc');
// lib/live/app (and the npm packages under it) only when a command reads records:
// `tunekit run --config FILE` records itself and needs no npm package.
const hostAppConfig = () => require('./live/app').DEFAULT_APP_CONFIG;

/** Where the records are kept (see above). */
function stateDir(env = process.env) {
  if (env.TUNEKIT_STATE_DIR) return path.resolve(env.TUNEKIT_STATE_DIR);
  if (process.getuid && process.getuid() === 0) return '/run/tunekit';
  if (env.XDG_RUNTIME_DIR && path.isAbsolute(env.XDG_RUNTIME_DIR) && fs.existsSync(env.XDG_RUNTIME_DIR)) return path.join(env.XDG_RUNTIME_DIR, 'tunekit');
  const cache = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache');
  return path.join(cache, 'tunekit');
}

const stacksDir = (env) => path.join(stateDir(env), 'stacks');
const recordFile = (dir, env) => path.join(stacksDir(env), `${path.basename(dir)}.json`);

/** Record a kept stack (lib/stack.js's startStack result); returns the record's file. */
function record(stack, env = process.env) {
  const pids = stack.pids();
  const rec = {
    dir: stack.renderDir,
    url: stack.url,
    nginxConf: path.join(stack.renderDir, 'etc/nginx/nginx.conf'),
    appConfig: stack.vars.tunekit_app_config_path,
    appLog: stack.appLogPath,
    metrics: stack.metrics.map((m) => m.url),
    nginxPid: pids.nginx[0] || null,
    appPid: pids.app[0] || null,
    startedAt: new Date().toISOString(),
  };
  const file = recordFile(stack.renderDir, env);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(rec, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
  return file;
}

/** Remove the record of the stack in dir, if there is one. */
function forget(dir, env = process.env) {
  fs.rmSync(recordFile(path.resolve(dir), env), { force: true });
}

/**
 * Record the runner of this process (`tunekit run`): settings is the app.json it
 * runs with, command how it was started (for the lines that name it). Returns the
 * runner's dir; forgetRun(dir) removes it and its record.
 */
function recordRun({ settings, command, pid = process.pid, cwd = process.cwd() }, env = process.env) {
  const dir = path.join(stacksDir(env), `run-${pid}`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const appConfig = path.join(dir, 'app.json');
  fs.writeFileSync(appConfig, `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
  const rec = {
    kind: 'run', dir, command, cwd, appConfig, nginxConf: null, listen: settings.listen,
    appPid: pid, appStart: (readStat(pid) || {}).start || null, startedAt: new Date().toISOString(),
  };
  const file = recordFile(dir, env);
  const tmp = `${file}.tmp-${pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(rec, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
  return dir;
}

/** Remove a runner's record and its dir (the runner's exit, or a stale record found). */
function forgetRun(dir, env = process.env) {
  fs.rmSync(recordFile(dir, env), { force: true });
  fs.rmSync(dir, { recursive: true, force: true });
}

const isRun = (rec) => rec.kind === 'run';

/**
 * Its processes still running: a kept stack's recorded pids whose command line
 * names its dir; a runner's pid, started when it was recorded.
 */
function running(rec) {
  if (isRun(rec)) return alive(rec.appPid) && (readStat(rec.appPid) || {}).start === rec.appStart ? [rec.appPid] : [];
  return [rec.nginxPid, rec.appPid].filter((pid) => pid && alive(pid) && cmdline(pid).includes(rec.dir));
}

/** What a record is, in words, for the lines that name it. */
function describe(rec) {
  return isRun(rec) ? `the runner \`${rec.command}\` (pid ${rec.appPid}, recorded in ${rec.dir})` : `the stack kept by \`demo --keep\` in ${rec.dir}`;
}

/**
 * Every record: [{ file, ...record, live }], oldest first; a file that is not a
 * record is skipped. kind: 'demo' (kept stacks) or 'run' (runners) only.
 */
function records(env = process.env, { kind = null } = {}) {
  let names = [];
  try {
    names = fs.readdirSync(stacksDir(env)).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const out = [];
  for (const n of names) {
    const file = path.join(stacksDir(env), n);
    let rec;
    try {
      rec = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch {
      continue;
    }
    if (!rec || typeof rec.dir !== 'string') continue;
    if (kind && (kind === 'run') !== isRun(rec)) continue;
    out.push({ file, ...rec, live: running(rec).length > 0 });
  }
  return out.sort((a, b) => String(a.startedAt).localeCompare(String(b.startedAt)));
}

/**
 * The stale-record line: whose processes are gone, and what removes it. A
 * runner's record is removed here: it is all that is left of the runner.
 */
function staleLine(rec, kit, env = process.env) {
  if (isRun(rec)) {
    forgetRun(rec.dir, env);
    return `${describe(rec)} is stale: its process is gone and did not remove the record (a runner killed with SIGKILL cannot); record removed`;
  }
  return `the stack kept by \`demo --keep\` in ${rec.dir} is stale: its processes are gone (nginx pid ${rec.nginxPid}, app pid ${rec.appPid}; ` +
    `record ${rec.file}); \`${kit} demo --stop ${rec.dir}\` removes it`;
}

/** The record of the stack in dir (given as --stack DIR); a UsageError when there is none or it is stale. */
function byDir(dir, kit, env = process.env) {
  const abs = path.resolve(dir);
  const rec = records(env).find((r) => r.dir === abs);
  if (!rec) {
    const kept = records(env).filter((r) => r.live).map((r) => r.dir);
    throw new UsageError(`--stack ${dir}: no stack kept by \`demo --keep\` and no \`tunekit run\` is recorded there (in ${stacksDir(env)}: ${kept.length ? kept.join(', ') : 'none running'})`);
  }
  if (!rec.live) throw new UsageError(`--stack ${dir}: ${staleLine(rec, kit, env)}`);
  return rec;
}

/**
 * The kept stack (or recorded runner) a command acts on when no flag names its
 * files: the one live record, unless the host has an app of its own
 * (hostAppConfig exists, the commands' default, which wins). { rec } | { notes:
 * [line] } (nothing to use; each note says why, a stale record among them).
 * Several live: a UsageError naming them and --stack DIR.
 */
function theOne({ hostAppConfig, kit, flag = '--stack DIR' }, env = process.env) {
  if (hostAppConfig && fs.existsSync(hostAppConfig)) return { notes: [] };
  const all = records(env);
  const live = all.filter((r) => r.live);
  if (live.length > 1) {
    const what = live.every((r) => !isRun(r)) ? `${live.length} stacks kept by \`demo --keep\` are running (${live.map((r) => r.dir).join(', ')})`
      : `${live.length} ${live.every(isRun) ? 'runners started with `tunekit run`' : 'recorded stacks and runners'} are running (${live.map(describe).join('; ')})`;
    throw new UsageError(`${what}: name one with ${flag}`);
  }
  const notes = all.filter((r) => !r.live).map((r) => staleLine(r, kit, env));
  if (live.length === 1) return { rec: live[0], notes };
  return { notes };
}

/** The record whose stack dir holds `file` (a flag naming one of its files), or null. */
function holding(file, env = process.env) {
  const abs = path.resolve(file);
  return records(env).find((r) => r.live && abs.startsWith(`${r.dir}${path.sep}`)) || null;
}

/**
 * The files a command reads (status, doctor, reload, logs): --stack DIR's; the
 * flags' (a flag naming a file of a kept stack brings the stack's other file);
 * with no flag that points anywhere (`pointed`: --app NAME, --socket, --metrics ...),
 * the one kept stack's, unless the host has its own app (hostAppConfig).
 * Returns { appConfig, nginxConf, rec, notes }: rec the kept stack used, or null;
 * notes, lines to say (a stale record).
 */
function filesFor({ stack, appConfig, nginxConf, pointed = false }, { hostAppConfig, kit }, env = process.env) {
  if (stack !== undefined) {
    if (appConfig || nginxConf || pointed) {
      throw new UsageError('--stack DIR names a kept stack\'s files (app.json, nginx.conf); give it alone, or the files\' own flags');
    }
    const rec = byDir(stack, kit, env);
    return { appConfig: rec.appConfig, nginxConf: rec.nginxConf, rec, notes: [] };
  }
  if (appConfig || nginxConf || pointed) {
    const rec = appConfig || nginxConf ? holding(appConfig || nginxConf, env) : null;
    if (rec) return { appConfig: appConfig || rec.appConfig, nginxConf: nginxConf || rec.nginxConf, rec, notes: [] };
    return { appConfig, nginxConf, rec: null, notes: [] };
  }
  const { rec, notes } = theOne({ hostAppConfig, kit }, env);
  if (rec) return { appConfig: rec.appConfig, nginxConf: rec.nginxConf, rec, notes };
  return { appConfig, nginxConf, rec: null, notes };
}

/**
 * filesFor() from a command's parsed options (--stack, --app-config, --nginx-conf),
 * with the lines it says on stderr (`say`): which kept stack it reads, a stale record.
 */
function forCommand(name, opts, { pointed = false } = {}) {
  const kit = require('./kit').invocation();
  const where = filesFor({ stack: opts.stack, appConfig: opts['app-config'], nginxConf: opts['nginx-conf'], pointed }, { hostAppConfig: hostAppConfig(), kit });
  const say = where.notes.map((n) => `tunekit ${name}: ${n}`);
  if (where.rec && opts.stack === undefined && !opts['app-config'] && !opts['nginx-conf']) {
    say.push(`tunekit ${name}: ${describe(where.rec)} (--stack DIR names another)`);
  }
  return { ...where, say };
}

/** The --stack option of the commands that act on a stack, one wording for all. */
const STACK_OPTION = {
  type: 'string',
  value: 'DIR',
  get help() {
    return 'a stack left running by `tunekit demo --keep` (its dir), or a `tunekit run` (the dir it logged as "recorded"); without this or a file\'s flag, ' +
      `the one recorded, when the host has no ${hostAppConfig()}`;
  },
};

module.exports = { stateDir, record, forget, recordRun, forgetRun, records, running, describe, byDir, theOne, holding, staleLine, filesFor, forCommand, STACK_OPTION };
