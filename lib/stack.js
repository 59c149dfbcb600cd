'use strict';
// The local stack: nginx in front of the tunekit cluster, both rendered from the
// one definition into a temp dir (`tunekit render --prefix`), listening on
// loopback only. Used by `tunekit demo`, the nginx integration tests and the
// load-test harness.
//
//   const stack = await startStack({ upstream: 'uds', profile: 'tuned', workers: 2 });
//   stack.url                 http://127.0.0.1:PORT/
//   stack.pids()              { nginx: [master, ...workers], app: [primary, ...workers] }
//   stack.metrics             [{ name: 'app', url }]: every metrics endpoint of the stack
//   await stack.stop()        nginx quits, the app drains, the temp dir goes
//   await stack.appExited     { code, signal } of the runner's primary, once it exits
//
// Layout of the temp dir (DIR): the rendered tree (DIR/etc/nginx/..., DIR/etc/
// tunekit-app/app.json), the socket in DIR/run/tunekit-app/, logs in
// DIR/var/log/ (nginx's error and access logs, app.log = the runner's JSON lines),
// pid files DIR/run/nginx.pid and DIR/run/app.pid (what `tunekit demo --stop DIR`
// reads).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const { spawn } = require('node:child_process');
const config = require('./config');
const { freePorts, alive, cmdline, childrenOf, readPid, signal } = require('./proc');
const renderer = require('./render');
const { nginxBinary } = require('./nginx');
const { ROOT } = require('./template');
const { StackError } = require('./errors');
const accounts = require('./accounts');

const CLI = path.join(ROOT, 'bin/tunekit.js');
const STOCK_PROFILE = path.join(ROOT, 'ansible/profiles/stock.yml');
const STACK_PREFIX = 'tunekit-stack-';
const READY_TIMEOUT_MS = 60000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function tail(file, lines = 20) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

async function waitGone(pids, ms) {
  const deadline = Date.now() + ms;
  while (pids.some(alive) && Date.now() < deadline) await sleep(50);
  return !pids.some(alive);
}

/** One GET (https: trusting `ca`); resolves {status, body} or rejects on a connection error. */
function get(url, timeoutMs = 5000, ca = null) {
  return new Promise((resolve, reject) => {
    const client = url.startsWith('https:') ? https : http;
    const req = client.get(url, { agent: false, timeout: timeoutMs, ...(ca && { ca: fs.readFileSync(ca) }) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/** The paths a stack in dir uses (also for `tunekit demo --stop DIR`). */
function stackFiles(dir) {
  return {
    appPid: path.join(dir, 'run/app.pid'),
    nginxPid: path.join(dir, 'run/nginx.pid'),
    appLog: path.join(dir, 'var/log/app.log'),
    nginxStderr: path.join(dir, 'var/log/nginx/stderr.log'),
    nginxConf: path.join(dir, 'etc/nginx/nginx.conf'),
  };
}

/**
 * Stop the stack living in dir, from this process or another one: nginx quits
 * gracefully (SIGQUIT), the app primary drains (SIGTERM); stragglers get SIGKILL
 * after the drain window; the socket is left for its owner to remove, the dir is
 * removed last. Only processes whose command line names dir are signalled (and
 * their own children), so a recycled pid is never hit.
 */
async function stopDir(dir, { appPid = null, nginxPid = null, drainMs = 15000 } = {}) {
  const f = stackFiles(dir);
  const ours = (pid) => pid && alive(pid) && cmdline(pid).includes(dir);
  const nginx = [nginxPid, readPid(f.nginxPid)].find(ours) || null;
  const app = [appPid, readPid(f.appPid)].find(ours) || null;
  const nginxKids = childrenOf(nginx);
  const appKids = childrenOf(app);
  if (nginx) signal(nginx, 'SIGQUIT');
  if (app) signal(app, 'SIGTERM');
  const all = [nginx, app, ...nginxKids, ...appKids].filter(Boolean);
  let clean = await waitGone(all, drainMs);
  if (!clean) {
    for (const pid of all) if (alive(pid)) signal(pid, 'SIGKILL');
    // And whatever else their process groups hold (a worker nginx or the runner
    // started after the list above was read).
    for (const pid of [nginx, app].filter(Boolean)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch { /* no such group: gone */ }
    }
    clean = await waitGone(all, 5000);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return { stopped: all, clean };
}

async function waitForReady(child, files, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let exited = null;
  child.once('exit', (code, sig) => { exited = { code, sig }; });
  while (Date.now() < deadline) {
    let text = '';
    try {
      text = fs.readFileSync(files.appLog, 'utf8');
    } catch {
      // not written yet
    }
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      let ev;
      try {
        ev = JSON.parse(line);
      } catch {
        continue;
      }
      if (ev.event === 'ready') return ev;
      if (ev.event === 'listen-refused' || ev.event === 'crash-loop') {
        throw new StackError(`the app did not start (${ev.event}): ${ev.error && ev.error.message ? ev.error.message : ev.error || ev.message || line}`);
      }
    }
    if (exited) {
      throw new StackError(`the app exited (code ${exited.code}, signal ${exited.sig}) before it was ready:\n${tail(files.appLog)}`);
    }
    await sleep(50);
  }
  throw new StackError(`the app printed no "ready" line within ${timeoutMs} ms:\n${tail(files.appLog)}`);
}

async function waitForNginx(child, url, files, errorLog, timeoutMs, ca = null) {
  const deadline = Date.now() + timeoutMs;
  let exited = null;
  child.once('exit', (code, sig) => { exited = { code, sig }; });
  let last = '';
  while (Date.now() < deadline) {
    if (exited) {
      throw new StackError(`nginx exited (code ${exited.code}, signal ${exited.sig}) at start:\n${tail(files.nginxStderr)}\n${tail(errorLog)}`);
    }
    try {
      const r = await get(url, 2000, ca);
      if (r.status === 200) return;
      last = `HTTP ${r.status}`;
    } catch (err) {
      last = err.message;
    }
    await sleep(100);
  }
  throw new StackError(`nginx did not answer 200 on ${url} within ${timeoutMs} ms (last: ${last}):\n${tail(errorLog)}`);
}

/**
 * nginxUser's account, when its workers can run as it: nginx's `user NAME;` (the
 * rendered nginx.conf) runs them in the group named NAME, and the render gives the
 * socket the user's primary group, so the two must be one.
 */
function workerAccount(user) {
  const u = accounts.users().get(user);
  if (!u) throw new StackError(`nginxUser ${user} does not exist on this machine: pass an existing unprivileged user (www-data, nobody)`);
  const group = accounts.groupName(u.gid);
  if (group !== user) {
    throw new StackError(`nginxUser ${user}: its primary group is ${group}, but nginx's "user ${user};" runs the workers in the group named ${user}: pass a user whose primary group has its name (www-data)`);
  }
  return u;
}

/**
 * The filesystem side of nginxUser (the render already named the user and the
 * socket group): its workers may search the tree's top directory and the socket's.
 */
function openToWorkers(dir, vars, u) {
  fs.chmodSync(dir, 0o711); // mkdtemp's 0700 would stop the workers at the top
  fs.chownSync(vars.tunekit_socket_dir, process.getuid(), u.gid);
}

/** The definition's values for a stack: the profile, loopback ports, the caller's sets last. */
async function stackVars({ upstream, profile, workers: given, module, set, varsFiles, port, tls }) {
  const profiles = config.choices('tunekit_profile');
  if (!profiles.includes(profile)) throw new config.ConfigError(`profile must be one of ${profiles.join(', ')}, not ${profile}`);
  const { kind, workers } = config.stackShape({ upstream, workers: given, profile, varsFiles });
  // Every port the stack listens on, chosen at once: distinct from each other and from a given one.
  const [free, metricsPort, statusPort, tcpPort, freeTls] = await freePorts(5, port ? [port] : []);
  const nginxPort = port || free;
  const sets = [
    `tunekit_upstream_kind=${kind}`,
    `tunekit_app_workers=${workers}`,
    'tunekit_nginx_listen_address=127.0.0.1',
    `tunekit_nginx_listen_port=${nginxPort}`,
    // The runner's metrics endpoint on a free loopback port (a caller's set may turn it off).
    `tunekit_metrics_listen=tcp:127.0.0.1:${metricsPort}`,
    // The status listener (tunekit_nginx_status) on a free port too: two stacks never share one.
    `tunekit_nginx_status_port=${statusPort}`,
  ];
  if (kind === 'tcp') sets.push(`tunekit_app_tcp_port=${tcpPort}`);
  const tlsPort = tls ? freeTls : null;
  if (tls) sets.push('tunekit_nginx_tls=true', `tunekit_nginx_tls_port=${tlsPort}`);
  if (module) sets.push(`tunekit_app_module=${path.resolve(module)}`);
  const hostVars = config.resolve({
    varsFiles: [...(profile === 'stock' ? [STOCK_PROFILE] : []), ...varsFiles],
    set: [...sets, ...set],
  });
  return { hostVars, kind, nginxPort, tlsPort };
}

// Ctrl-C or SIGTERM ends a process without its 'exit' handlers, so the stacks it
// started would outlive it (nginx and the app on a temp dir no one removes). Once a
// stack is armed, a command that does not handle these signals itself (demo and
// profile do, and stop their stack gracefully) exits 130/143 on them instead, which
// runs each armed stack's exit handler.
let signalNet = false;
function armSignalNet() {
  if (signalNet) return;
  signalNet = true;
  for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
    process.on(sig, () => {
      if (process.listenerCount(sig) > 1) return;
      process.stderr.write(`\n${sig}: stopping the local stacks this command started (nginx and the app), then leaving\n`);
      process.exit(code);
    });
  }
}

/**
 * stop() for a stack in dir whose processes are procs.app / procs.nginx once
 * spawned; unless detached, the stack is also killed if this process exits
 * without stop() (`armed()` registers that, stop() removes it).
 */
function stopper(dir, procs, detached) {
  let stopped = null;
  const onExit = () => {
    // This process is going away without stop(), or in the middle of it: leave
    // nothing running. nginx and the runner lead process groups of their own
    // (spawned detached), so their workers go too, even one whose parent is gone.
    for (const pid of [procs.nginx && procs.nginx.pid, procs.app && procs.app.pid]) {
      if (!pid) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        for (const k of childrenOf(pid)) signal(k, 'SIGKILL');
        signal(pid, 'SIGKILL');
      }
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const stop = () => {
    if (!stopped) {
      const drainMs = procs.vars ? procs.vars.tunekit_app_drain_timeout_s * 1000 + 5000 : 15000;
      // The exit hook stays until the stop is done: a process that leaves while its
      // stacks drain still leaves nothing behind.
      stopped = stopDir(dir, { appPid: procs.app && procs.app.pid, nginxPid: procs.nginx && procs.nginx.pid, drainMs })
        .finally(() => { if (!detached) process.removeListener('exit', onExit); });
    }
    return stopped;
  };
  const armed = () => {
    if (detached) return;
    process.on('exit', onExit);
    armSignalNet();
  };
  return { stop, armed };
}

/**
 * The runner on the rendered app.json (or `appProgram` in its place), its output
 * in files.appLog; resolves its ready event.
 */
async function startApp(procs, files, { env, appProgram, appWrapper }) {
  const appOut = fs.openSync(files.appLog, 'a');
  // Not recorded as a runner of its own: `demo --keep` records the whole stack.
  const argv = [process.execPath, ...(appProgram ? [appProgram] : [CLI, 'run', '--no-record']), '--config', procs.vars.tunekit_app_config_path];
  const command = [...(appWrapper || []), ...argv];
  procs.app = spawn(command[0], command.slice(1), {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', appOut, appOut],
    detached: true, // a process group of its own (stopper's exit hook); unref'd only when `detached`
  });
  fs.closeSync(appOut);
  procs.appExited = new Promise((resolve) => procs.app.once('exit', (code, sig) => resolve({ code, signal: sig })));
  fs.writeFileSync(files.appPid, `${procs.app.pid}\n`);
  return waitForReady(procs.app, files, READY_TIMEOUT_MS);
}

/** nginx on the rendered nginx.conf, until url answers 200 (https: trusting ca). */
async function startNginx(procs, files, url, ca) {
  const nginxErr = fs.openSync(files.nginxStderr, 'a');
  procs.nginx = spawn(nginxBinary(), ['-c', files.nginxConf, '-g', 'daemon off;'], {
    stdio: ['ignore', nginxErr, nginxErr],
    detached: true, // as the app's
  });
  fs.closeSync(nginxErr);
  await waitForNginx(procs.nginx, url, files, procs.vars.tunekit_nginx_error_log_path, READY_TIMEOUT_MS, ca);
}

/**
 * Render and start nginx + the cluster on loopback.
 * @param {object} [o]
 * @param {'uds'|'tcp'|'per-worker'} [o.upstream]  default uds (tcp for the stock profile)
 * @param {'tuned'|'stock'} [o.profile='tuned']
 * @param {number} [o.workers=2]       app workers
 * @param {string|null} [o.module]     the app module (default: the example app)
 * @param {string[]} [o.set]           extra key=value, applied last
 * @param {string[]} [o.varsFiles]     extra variable files
 * @param {number} [o.port=0]          nginx's port on 127.0.0.1; 0 picks a free one
 * @param {boolean} [o.tls=false]      the HTTPS front on a second free port, with a throwaway
 *                                     certificate from a local CA (stack.ca); the plain port redirects
 * @param {'ec'|'rsa'} [o.tlsKey='ec'] the throwaway certificate's key: ECDSA P-256, or RSA 2048
 * @param {object} [o.env]             extra environment for the app
 * @param {string|null} [o.appProgram] a Node program started in place of the runner, as
 *                                     `node FILE --config APP_JSON` (the rendered app.json); it
 *                                     prints the runner's "ready" line (listen, workers) and stops
 *                                     on SIGTERM (the bench's bare cluster, loadtest/bare-cluster.js)
 * @param {string[]|null} [o.appWrapper] a command the app's `node ...` line is run under
 *                                     (callgrind, for loadtest/runner-cost.js --instructions)
 * @param {boolean} [o.detached=false] let the stack outlive this process (demo --keep)
 * @param {function} [o.beforeStart]   test-only: called with the rendered values after the render,
 *                                     before anything starts: where a fault test changes the tree by
 *                                     hand, as an operator would on a host (the fault suite's inverted
 *                                     keep-alive timeouts, a set the render refuses)
 * @param {string|null} [o.nginxUser]  run nginx's workers as this user, as on a host (the master
 *                                     stays root): the render names it in nginx.conf and gives the
 *                                     socket its primary group (app.json's socketGroup); the socket's
 *                                     directory gets that group, the tree's top directory is
 *                                     searchable. A prefixed render runs them as the caller, and
 *                                     root's workers pass every permission check (the fault suite's
 *                                     EACCES case)
 */
async function startStack(o = {}) {
  const {
    workers = null, profile = 'tuned', set = [], varsFiles = [], port = 0, tls = false, tlsKey = 'ec',
    env = {}, detached = false, beforeStart = null, nginxUser = null, appProgram = null, appWrapper = null,
  } = o;
  const { hostVars, kind, nginxPort, tlsPort } = await stackVars({ ...o, workers, profile, set, varsFiles, port, tls });
  const account = nginxUser ? workerAccount(nginxUser) : null;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), STACK_PREFIX));
  const files = stackFiles(dir);
  const procs = { app: null, nginx: null, vars: null };
  const { stop, armed } = stopper(dir, procs, detached);
  try {
    const { vars } = renderer.render(hostVars, dir, { prefix: true, layers: ['nginx', 'app'], throwawayKey: tlsKey, nginxUser });
    procs.vars = vars;
    fs.mkdirSync(path.dirname(files.appLog), { recursive: true });
    if (account) openToWorkers(dir, vars, account);
    if (beforeStart) beforeStart(vars);
    armed();

    const ready = await startApp(procs, files, { env, appProgram, appWrapper });
    const url = tls ? `https://127.0.0.1:${tlsPort}/` : `http://127.0.0.1:${nginxPort}/`;
    // The throwaway CA the render made beside the leaf (lib/render.js, lib/tls.js).
    const ca = tls ? path.join(path.dirname(vars.tunekit_nginx_tls_certificate), 'ca.pem') : null;
    await startNginx(procs, files, url, ca);
    if (detached) {
      procs.app.unref();
      procs.nginx.unref();
    }
    const socketPath = kind === 'tcp' ? null : vars.tunekit_socket_path;
    return {
      url,
      port: nginxPort,
      tlsPort,
      ca,
      upstream: kind,
      profile,
      socketPath,
      sockets: ready.sockets || (socketPath ? [socketPath] : []),
      appListen: ready.listen, // as the runner bound it (its ready event)
      metrics: metricsEndpoints(vars),
      renderDir: dir,
      errorLogPath: vars.tunekit_nginx_error_log_path,
      accessLogPath: vars.tunekit_nginx_access_log_path,
      appLogPath: files.appLog,
      vars,
      ready,
      appExited: procs.appExited, // resolves { code, signal } when the runner's primary exits
      pids: () => stackPids(procs),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Every metrics endpoint of a stack, as Prometheus scrapes it: [{ name, url }]. */
function metricsEndpoints(vars) {
  if (!vars.tunekit_metrics) return [];
  const m = /^tcp:(.+):(\d+)$/.exec(vars.tunekit_metrics_listen);
  return m ? [{ name: 'app', url: `http://${m[1]}:${m[2]}/metrics` }] : [];
}

/** { nginx: [master, ...workers], app: [primary, ...workers] } of the processes still alive. */
function stackPids({ nginx, app }) {
  const n = nginx && alive(nginx.pid) ? nginx.pid : null;
  const a = app && alive(app.pid) ? app.pid : null;
  return {
    nginx: n ? [n, ...childrenOf(n)] : [],
    app: a ? [a, ...childrenOf(a)] : [],
  };
}

module.exports = { startStack, stopDir, stackFiles, STACK_PREFIX };
