'use strict';
// `tunekit render --target kubernetes`: the manifests pass the Kubernetes API
// schemas of the last three releases kubernetes-validate bundles, and the pod's
// two containers, run here as two processes with exactly the manifest's
// commands, users and groups (no container runtime runs on this machine),
// serve through the shared socket and stop without losing a request; without
// the app's preStop the same stop loses requests.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');
const { freePorts, alive, childrenOf } = require('../../lib/proc');
const { runCommand, until } = require('../lib/util');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'bin/tunekit.js');
const VENV = path.join(ROOT, '.venv/bin');

async function renderPod(outDir, set = []) {
  const args = [CLI, 'render', '--target', 'kubernetes', '--out', outDir];
  for (const s of set) args.push('--set', s);
  const r = await runCommand(process.execPath, args);
  assert.equal(r.code, 0, r.out);
  const objects = {};
  for (const file of fs.readdirSync(outDir).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of YAML.parseAllDocuments(fs.readFileSync(path.join(outDir, file), 'utf8'))) {
      const o = doc.toJS();
      objects[`${o.kind}/${o.metadata.name}`] = o;
    }
  }
  return objects;
}

// The schema versions kubernetes-validate bundles (X.Y.0), newest last.
function bundledVersions() {
  const r = spawnSync(path.join(VENV, 'python'), ['-c',
    'import kubernetes_validate, os; print("\\n".join(os.listdir(os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema"))))'],
  { encoding: 'utf8' });
  assert.equal(r.status, 0, `kubernetes-validate is not installed in .venv (pip install -r requirements-dev.txt): ${r.stderr}`);
  const versions = [...new Set(r.stdout.split('\n').map((l) => /^v(\d+\.\d+\.\d+)-local/.exec(l)).filter(Boolean).map((m) => m[1]))];
  const key = (v) => v.split('.').map(Number).reduce((a, n) => a * 1000 + n, 0);
  return versions.sort((a, b) => key(a) - key(b));
}

test('the rendered manifests pass the schemas of the last three Kubernetes releases (strict: no unknown field)', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-k8s-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  await renderPod(dir);
  const files = fs.readdirSync(dir).map((f) => path.join(dir, f));
  assert.deepEqual(files.map((f) => path.basename(f)).sort(), ['configmap.yaml', 'deployment.yaml', 'service.yaml']);
  const versions = bundledVersions().slice(-3);
  assert.equal(versions.length, 3, `kubernetes-validate bundles ${versions.join(', ')}`);
  for (const v of versions) {
    const r = await runCommand(path.join(VENV, 'kubernetes-validate'), ['--strict', '-k', v, ...files]);
    assert.equal(r.code, 0, `Kubernetes ${v}:\n${r.out}`);
    assert.equal((r.out.match(/ passed for resource /g) || []).length, 4, r.out); // 2 ConfigMaps, Deployment, Service
  }
  // The validator does check: a misspelt field of the pod spec is refused.
  const deployment = path.join(dir, 'deployment.yaml');
  fs.writeFileSync(deployment, fs.readFileSync(deployment, 'utf8').replace('terminationGracePeriodSeconds:', 'terminationGracePeriodSecond:'));
  const bad = await runCommand(path.join(VENV, 'kubernetes-validate'), ['--strict', '-k', versions[2], deployment]);
  assert.notEqual(bad.code, 0, bad.out);
  assert.match(bad.out, /terminationGracePeriodSecond/);
});

test('the pod is derived from the definition: workers from CPU limits, grace from the drain, somaxconn from the backlog', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-k8s-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const o = await renderPod(dir, ['tunekit_k8s_app_cpu_limit_m=2500', 'tunekit_k8s_nginx_cpu_limit_m=500',
    'tunekit_app_drain_timeout_s=7', 'tunekit_k8s_endpoint_delay_s=3', 'tunekit_listen_backlog=2048']);
  const pod = o['Deployment/tunekit-app'].spec.template.spec;
  const app = JSON.parse(o['ConfigMap/tunekit-app-app'].data['app.json']);
  assert.equal(app.workers, 3); // 2500m rounds up to 3 CPUs
  assert.match(o['ConfigMap/tunekit-app-nginx'].data['nginx.conf'], /^worker_processes 1;$/m); // 500m: at least one
  assert.equal(pod.terminationGracePeriodSeconds, 3 + 2 * 7 + 5);
  assert.deepEqual(pod.securityContext.sysctls, [{ name: 'net.core.somaxconn', value: '2048' }]);
  assert.equal(app.socketGroup, String(pod.securityContext.fsGroup));
  assert.equal(app.listen, 'unix:/run/tunekit/app.sock');
  for (const c of pod.containers) {
    assert.equal(c.securityContext.readOnlyRootFilesystem, true, c.name);
    assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], c.name);
    assert.notEqual(c.securityContext.runAsUser, 0, c.name);
  }
  const service = o['Service/tunekit-app'].spec.ports[0];
  assert.equal(service.port, 80);
  assert.equal(pod.containers[0].ports[0].containerPort, 8080);
  // A TCP upstream cannot be a pod's shared socket: refused, naming the values.
  const r = await runCommand(process.execPath, [CLI, 'render', '--target', 'kubernetes', '--out', dir, '--set', 'tunekit_upstream_kind=tcp']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /tunekit_upstream_kind=tcp/);
});

// --- the pod without a cluster ------------------------------------------------

// A container as a process: its command and args under its uid, gid and the
// pod's fsGroup (which Kubernetes adds to every container's groups).
function asContainer(c, fsGroup, argv) {
  const sc = c.securityContext;
  return ['setpriv', '--reuid', String(sc.runAsUser), '--regid', String(sc.runAsGroup), '--groups', String(fsGroup), '--', ...argv];
}

function get(port, agent, urlPath) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent, timeout: 10000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
      res.on('error', (err) => resolve({ error: err.code || err.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.code || err.message }));
  });
}

function killTree(pid) {
  for (const c of childrenOf(pid)) { try { process.kill(c, 'SIGKILL'); } catch { /* gone */ } }
  try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
}

// Boot the pod as processes, check the socket, put a bounded load on it and
// delete it. appPreStop false: the app container gets SIGTERM at once (no hook),
// the mistake the matched hooks exist to prevent.
async function runPod(t, { appPreStop = true } = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-pod-'));
  fs.chmodSync(tmp, 0o755);
  const started = [];
  t.after(() => {
    for (const p of started) if (alive(p.pid)) killTree(p.pid);
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const [port, metricsPort] = await freePorts(2);
  const delay = 2;
  const drain = 3;
  // The same manifest with the volumes' mount paths under tmp (this machine has
  // no mount namespace per container) and a free port; every other value as shipped.
  const o = await renderPod(path.join(tmp, 'manifests'), [
    `tunekit_k8s_container_port=${port}`,
    // The pod binds every address; here, on a shared machine, loopback.
    'tunekit_k8s_metrics_address=127.0.0.1',
    `tunekit_k8s_metrics_port=${metricsPort}`,
    `tunekit_k8s_nginx_conf_dir=${tmp}/nginx-conf`,
    `tunekit_k8s_app_conf_dir=${tmp}/app-conf`,
    `tunekit_k8s_run_dir=${tmp}/run`,
    `tunekit_k8s_nginx_tmp_dir=${tmp}/nginx-tmp`,
    `tunekit_k8s_app_dir=${ROOT}`,
    `tunekit_k8s_endpoint_delay_s=${delay}`,
    `tunekit_app_drain_timeout_s=${drain}`,
    'tunekit_k8s_app_cpu_limit_m=1000',
    'tunekit_k8s_nginx_cpu_limit_m=1000',
  ]);
  const pod = o['Deployment/tunekit-app'].spec.template.spec;
  const fsGroup = pod.securityContext.fsGroup;
  const grace = pod.terminationGracePeriodSeconds;

  // The volumes as the kubelet makes them: ConfigMap files root-owned 0644;
  // an emptyDir 0777, with fsGroup its group and set-group-ID.
  const volumes = Object.fromEntries(pod.volumes.map((v) => [v.name, v]));
  for (const c of pod.containers) {
    for (const m of c.volumeMounts) {
      const v = volumes[m.name];
      fs.mkdirSync(m.mountPath, { recursive: true, mode: 0o755 });
      if (v.configMap) {
        for (const [key, content] of Object.entries(o[`ConfigMap/${v.configMap.name}`].data)) {
          fs.writeFileSync(path.join(m.mountPath, key), content, { mode: 0o644 });
        }
      } else {
        fs.chownSync(m.mountPath, 0, fsGroup);
        fs.chmodSync(m.mountPath, 0o2777);
      }
    }
  }

  const [nginxC, appC] = ['nginx', 'app'].map((n) => pod.containers.find((c) => c.name === n));
  // nginx reopens /dev/stdout and /dev/stderr (its logs): give it files its user may open.
  const logs = {};
  const start = (c) => {
    const log = path.join(tmp, `${c.name}.log`);
    const fd = fs.openSync(log, 'w', 0o666);
    fs.fchmodSync(fd, 0o666);
    const argv = asContainer(c, fsGroup, [...c.command, ...c.args]);
    const child = spawn(argv[0], argv.slice(1), { cwd: tmp, stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    const rec = { pid: child.pid, exit: new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig, at: Date.now() }))) };
    started.push(rec);
    logs[c.name] = log;
    return rec;
  };
  const app = start(appC);
  const nginx = start(nginxC);
  const probe = nginxC.readinessProbe.httpGet.path;
  await until('the readiness probe passes through nginx to the app', async () => (await get(port, undefined, probe)).status === 200, 30000)
    .catch((err) => { throw new Error(`${err.message}\nnginx: ${fs.readFileSync(logs.nginx, 'utf8')}\napp: ${fs.readFileSync(logs.app, 'utf8')}`); });

  // The socket: the fsGroup's, mode 0660; another user in the pod cannot connect.
  const settings = JSON.parse(o['ConfigMap/tunekit-app-app'].data['app.json']);
  const sock = settings.listen.replace(/^unix:/, '');
  const st = fs.statSync(sock);
  assert.equal(st.gid, fsGroup);
  assert.equal(st.mode & 0o777, 0o660);
  const stranger = spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', '--', process.execPath, '-e',
    `require('net').connect(${JSON.stringify(sock)}).on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log(e.code); process.exit(0); })`],
  { encoding: 'utf8' });
  assert.equal(stranger.stdout.trim(), 'EACCES', stranger.stderr);

  // The runner's metrics on the app container's port named "metrics", the one
  // the pod's prometheus.io annotations send a scraper to: a series per worker.
  const annotations = o['Deployment/tunekit-app'].spec.template.metadata.annotations;
  const named = appC.ports.find((p) => p.name === 'metrics');
  assert.equal(named.containerPort, metricsPort);
  assert.deepEqual([annotations['prometheus.io/scrape'], annotations['prometheus.io/port'], annotations['prometheus.io/path']],
    ['true', String(metricsPort), '/metrics']);
  // (worker="N" is a slot; the warm spare is worker="spare".) A worker's
  // series appear with its first sample: waited for, not assumed.
  const url = `http://127.0.0.1:${metricsPort}${annotations['prometheus.io/path']}`;
  const slots = async () => new Set([...(await (await fetch(url)).text())
    .matchAll(/^tunekit_app_connections_active\{[^}]*worker="(\d+)"/gm)].map((m) => m[1])).size;
  await until(`a series per worker (${settings.workers}) at ${url}`, async () => (await slots()) === settings.workers, 30000);

  // The load runs until the event it is there for: the endpoints are gone
  // (routed turns false, half the endpoint delay after the delete). It is
  // bounded by time only (60 s at most), never by a request count: a count
  // runs out early on a fast machine, before the delete happens at all.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const tally = { ok: 0, okAfterDelete: 0, failed: [] };
  let routed = true;
  let deletedAt = Infinity;
  const until60 = Date.now() + 60000;
  const client = async () => {
    while (routed && Date.now() < until60) {
      const r = await get(port, agent, '/');
      if (r.status === 200) {
        tally.ok += 1;
        if (Date.now() >= deletedAt) tally.okAfterDelete += 1;
      } else tally.failed.push(r.error || r.status);
    }
  };
  const clients = Array.from({ length: 8 }, client);
  // The delete comes once the load is under way (the upstream pool is warm).
  await until('160 requests answered before the delete', async () => tally.ok >= 160, 30000);

  // The pod is deleted: both preStop hooks start, as the endpoints are removed.
  // Endpoint removal reaches the clients within the endpoint delay (here: half of it).
  deletedAt = Date.now();
  const deadline = deletedAt + grace * 1000;
  setTimeout(() => { routed = false; }, (delay * 1000) / 2);
  const stop = async (c, rec) => {
    if (c.name === 'nginx' || appPreStop) {
      const hook = asContainer(c, fsGroup, c.lifecycle.preStop.exec.command);
      const r = await runCommand(hook[0], hook.slice(1), { cwd: tmp, timeoutMs: grace * 1000 });
      assert.equal(r.code, 0, `${c.name} preStop: ${r.out}`);
    }
    if (alive(rec.pid)) process.kill(rec.pid, 'SIGTERM'); // after its preStop returns, as the kubelet does
    const killer = setTimeout(() => killTree(rec.pid), Math.max(0, deadline - Date.now()));
    const exit = await rec.exit;
    clearTimeout(killer);
    return exit;
  };
  const [nginxExit, appExit] = await Promise.all([stop(nginxC, nginx), stop(appC, app)]);
  await Promise.all(clients);
  agent.destroy();

  return { tally, nginxExit, appExit, deadline, grace, appLog: () => fs.readFileSync(logs.app, 'utf8') };
}

test('the two containers as processes: the socket is theirs only, and the termination sequence loses no request', async (t) => {
  const { tally, nginxExit, appExit, deadline, grace, appLog } = await runPod(t);
  assert.deepEqual(tally.failed, [], `failed requests (of ${tally.ok + tally.failed.length})`);
  assert.ok(tally.ok > 0 && tally.okAfterDelete > 0, `served ${tally.ok}, ${tally.okAfterDelete} after the delete`);
  // Both stopped on their own within the grace period, nginx first.
  assert.deepEqual([nginxExit.code, appExit.code], [0, 0], `nginx ${JSON.stringify(nginxExit)}, app ${JSON.stringify(appExit)}\n${appLog().slice(-2000)}`);
  assert.ok(appExit.at <= deadline && nginxExit.at <= appExit.at, 'nginx exits before the app, both within the grace period');
  t.diagnostic(`served ${tally.ok} requests, ${tally.okAfterDelete} after the delete, 0 failed; grace ${grace} s`);
});

test('without the app\'s preStop (SIGTERM at once) the same delete fails requests: the matched hooks are what saves them', async (t) => {
  const { tally } = await runPod(t, { appPreStop: false });
  assert.ok(tally.failed.length > 0, `served ${tally.ok}, none failed although the app drained while nginx still accepted`);
  t.diagnostic(`${tally.failed.length} of ${tally.ok + tally.failed.length} failed: ${[...new Set(tally.failed)].join(', ')}`);
});
