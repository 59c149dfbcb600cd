'use strict';
// Booted systemd hosts for tests: Debian 13 (trixie) containers run by
// systemd-nspawn, each reachable over its own veth pair and a private /30.
//
//   const { bootHosts, stopHosts, ensureRootfs } = require('../lib/nspawn');
//   const hosts = await bootHosts(2, { name: 'tk' });
//   const mixed = await bootHosts([{ name: 'tkd11', suite: 'bullseye' }, { name: 'tkd12', suite: 'bookworm' }]);
//   // hosts[i] = { name, suite, ip, hostIp, iface, sshArgs, ssh(cmd), root, keyFile,
//   //              init: { pid, start, pidns } of the container's init }
//   const r = await hosts[0].ssh('systemctl is-system-running');
//   // r = { code, stdout, stderr }
//   await stopHosts(hosts);   // in an after() hook; also runs on process exit
//   await stopAllHosts();     // every host this process booted, whatever failed
//
// ensureRootfs() debootstraps the rootfs once into
// /var/cache/tunekit/rootfs-trixie-<hash of the package lists> (a minute or
// two, needs Debian's mirror); later runs reuse it. Containers have no
// internet: every package a test or the Ansible roles need is in PACKAGES or
// APT_PACKAGES. Other suites: ensureRootfs({ suite }) and bootHosts(n, { suite }).
// bootHosts builds what it needs before it boots anything, in child processes.
//
// Each host boots an overlay (lowerdir = the cache, upper = a mkdtemp dir), so
// the cache stays pristine and a boot costs no copy; `root` is the merged tree.
//
// Network: each host claims a slot, unique across every process on the machine
// (./slots.js: an abstract Unix socket name the kernel releases with its
// holder; a slot whose range is routed here is skipped). Slot N owns
// 10.213.N.0/30, the machine name <name>N and the veth "ve-<name>N": the host
// side gets 10.213.N.1 and the container's host0 10.213.N.2 (a oneshot unit
// written into the copy). The only route added is the /30's own link route;
// nothing is forwarded or NATed, so the containers reach nothing but their host
// side.
//
// Every container carries TUNEKIT_TEST_HOST=<machine> (and test/run.js's
// TUNEKIT_TEST_TAG) in its init's environment: leftoversOf(host) finds a
// container whose nspawn is gone, and test/run.js sweeps what a test file left.
//
// Teardown (stopHosts, or the process 'exit' hook when a test dies): SIGTERM to
// systemd-nspawn (an orderly poweroff of the container); past a grace period, or
// at once from the exit hook, SIGKILL to the container's init, which ends every
// process of its PID namespace, then to nspawn if it has not exited by then;
// then the overlay is unmounted and the dirs removed; the veth goes with the
// container's network namespace. A SIGKILL to nspawn alone is not enough: it
// cannot pass it on, and the init, handed to PID 1, boots on (killContainerSync).
//
// The machine here runs a cgroup v1/hybrid hierarchy; trixie's systemd (257)
// has dropped v1 and boots on it only in a degraded compat mode (errors at
// boot), so nspawn is told to give the container a unified cgroup v2 hierarchy
// (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1). That hierarchy is the machine's one
// cgroup2 mount, whose root holds every process here (no systemd on this side
// places them): a container's cgroup namespace is rooted where nspawn starts,
// so every container would share one tree, and two hosts' systemd would both
// own system.slice/nginx.service: a restart on one removed the cgroup the
// other was starting nginx into ("Failed to spawn executor: No such file or
// directory", Result: resources; 2-3 of 80 concurrent restarts). Each nspawn
// therefore starts in a cgroup of its own (ownCgroup), removed at teardown.
//
// Needs root, systemd-nspawn (systemd-container), debootstrap, ssh, ssh-keygen.

const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { alive, childrenOf, readStat } = require('../../lib/proc');
const { runInRoot } = require('../../lib/chroot');
const { sleep, runCommand } = require('./util');
const { claimSlot } = require('./slots');
const { taggedProcesses } = require('./tags');

// Debian suites the tests boot. trixie (Debian 13) is the default lab host;
// the others stand in for the distributions operators run: bullseye (Debian 11:
// nginx 1.18, Node 12, as Ubuntu 22.04), bookworm (Debian 12: nginx 1.22,
// Node 18, as Ubuntu 24.04) and sid (the newest nginx and Node Debian ships).
const DEFAULT_SUITE = 'trixie';
const MIRROR = process.env.TUNEKIT_DEBIAN_MIRROR || 'http://deb.debian.org/debian';
const CACHE_DIR = process.env.TUNEKIT_ROOTFS_CACHE || '/var/cache/tunekit';

// Everything the containers need, since they have no network beyond the veth.
// python3-apt: Ansible's apt module; acl: become to an unprivileged user;
// procps: sysctl(8); git, tar, xz-utils: the role's app sources.
const PACKAGES = [
  'systemd-sysv', 'dbus', 'openssh-server', 'sudo',
  'python3', 'python3-apt', 'acl', 'procps', 'iproute2', 'curl', 'ca-certificates',
  'nginx', 'nodejs', 'git', 'tar', 'xz-utils',
].sort();
// Installed afterwards with apt-get in a chroot: debootstrap's own resolver
// cannot satisfy npm's dependencies (it fails configuring node-gyp, node-gauge
// and npm: "Package node-cssesc is not installed", trixie, 2026-11). Only the
// default suite needs them: npm for the e2e that deploys an app with
// dependencies, a dynamic nginx module for the shared-host e2e (a host whose
// modules-enabled/ must stay in force), the exporters tunekit_metrics_exporters
// installs (ansible-site e2e).
const APT_PACKAGES = {
  [DEFAULT_SUITE]: ['npm', 'libnginx-mod-http-headers-more-filter', 'prometheus-nginx-exporter', 'prometheus-node-exporter', 'mtail'],
};

function suitePackages(suite) {
  return { packages: PACKAGES, apt: APT_PACKAGES[suite] || [] };
}

function rootfsPath(suite = DEFAULT_SUITE) {
  const { packages, apt } = suitePackages(suite);
  const hash = crypto.createHash('sha256').update(`${suite}\n${packages.join('\n')}\n${apt.join('\n')}`).digest('hex').slice(0, 12);
  return path.join(CACHE_DIR, `rootfs-${suite}-${hash}`);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  return { code: r.status, stdout: r.stdout || '', stderr: r.stderr || '' };
}

function must(cmd, args, opts) {
  const r = run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r;
}

const BUILD_WAIT_MS = 20 * 60 * 1000; // a build is minutes; past this a lock is stuck

// The build lock of one rootfs: an atomic mkdir holding its owner's pid. Two
// test files (the e2e and local lanes run side by side) that want the same
// tree on a fresh machine: one builds it, the other waits for it. A lock whose
// owner is gone is taken over. Returns the release function, or null when the
// tree was completed while waiting.
function buildLock(dest, log) {
  const lock = `${dest}.lock`;
  const deadline = Date.now() + BUILD_WAIT_MS;
  let said = false;
  for (;;) {
    if (fs.existsSync(path.join(dest, '.tunekit-complete'))) return null;
    try {
      fs.mkdirSync(lock);
      fs.writeFileSync(path.join(lock, 'pid'), String(process.pid));
      return () => fs.rmSync(lock, { recursive: true, force: true });
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const owner = Number((() => { try { return fs.readFileSync(path.join(lock, 'pid'), 'utf8'); } catch { return ''; } })());
    if (owner && !alive(owner)) {
      fs.rmSync(lock, { recursive: true, force: true }); // its builder died
      continue;
    }
    if (Date.now() > deadline) throw new Error(`waited ${BUILD_WAIT_MS / 60000} min for pid ${owner || '?'} to build ${dest}; if no build is running, remove ${lock}`);
    if (!said) log(`waiting for pid ${owner || '?'}, which builds ${dest}`);
    said = true;
    spawnSync('sleep', ['1']);
  }
}

// Builds the cached rootfs if missing; returns its path. Builds into a
// sibling temp dir and renames, so a half-built tree is never used; one
// builder at a time (buildLock).
function ensureRootfs({ suite = DEFAULT_SUITE, log = (m) => process.stderr.write(`nspawn: ${m}\n`) } = {}) {
  const dest = rootfsPath(suite);
  if (fs.existsSync(path.join(dest, '.tunekit-complete'))) return dest;
  if (process.getuid() !== 0) throw new Error(`building ${dest} needs root (debootstrap)`);
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  const release = buildLock(dest, log);
  if (!release) return dest;
  try {
    buildRootfs(suite, dest, log);
  } finally {
    release();
  }
  return dest;
}

function buildRootfs(suite, dest, log) {
  const { packages, apt } = suitePackages(suite);
  if (fs.existsSync(path.join(dest, '.tunekit-complete'))) return;
  const tmp = fs.mkdtempSync(`${dest}.building-`);
  const started = Date.now();
  log(`building ${dest} with debootstrap ${suite} from ${MIRROR} (takes minutes, once)`);
  try {
    must('debootstrap', ['--variant=minbase', `--include=${packages.join(',')}`, suite, tmp, MIRROR],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    if (apt.length) {
      must('chroot', [tmp, 'apt-get', 'install', '-y', '-q', '--no-install-recommends', ...apt],
        { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    }
    must('chroot', [tmp, 'apt-get', 'clean']);
    prepareRootfs(tmp);
    fs.writeFileSync(path.join(tmp, '.tunekit-complete'), `${new Date().toISOString()}\n${[...packages, ...apt].join(' ')}\n`);
    fs.rmSync(dest, { recursive: true, force: true }); // an unfinished tree
    fs.renameSync(tmp, dest);
  } catch (err) {
    unmountUnder(tmp);
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  log(`built ${dest} in ${Math.round((Date.now() - started) / 1000)} s`);
}

// Builds the rootfs of every suite given that is not cached yet, in parallel
// (one child process each; a build is mostly download and unpack).
async function ensureRootfsAll(suites, { log = (m) => process.stderr.write(`nspawn: ${m}\n`) } = {}) {
  const missing = suites.filter((s) => !fs.existsSync(path.join(rootfsPath(s), '.tunekit-complete')));
  await Promise.all(missing.map(async (suite) => {
    log(`building the ${suite} rootfs`);
    const r = await runCommand(process.execPath, [__filename, 'build', suite]);
    if (r.code !== 0) throw new Error(`building the ${suite} rootfs failed (exit ${r.code}): ${r.stderr.trim()}`);
  }));
  return Object.fromEntries(suites.map((s) => [s, rootfsPath(s)]));
}

/**
 * Run a shell script chrooted into a suite's cached rootfs, in a private mount
 * namespace: binds ({hostDir: pathInside}) are mounted there only, and a tmpfs
 * covers /tmp and /run, so the cached tree is never written and nothing outlives
 * the call. A bind target must be a directory the rootfs has, or lie under /tmp
 * (created on that tmpfs), for the same reason. The distribution's own binaries run with their own libraries (Debian's
 * Node needs its /usr/share/nodejs). Resolves {code, stdout, stderr}.
 */
function runInRootfs(suite, script, { binds = {}, timeoutMs = 60000 } = {}) {
  return runInRoot(rootfsPath(suite), script, { binds, timeoutMs });
}

// debootstrap mounts /proc and /sys inside its target; a failed build may
// leave them: unmount everything below dir (deepest first) before removing it.
function unmountUnder(dir) {
  const mounts = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')
    .map((l) => (l.split(' ')[1] || '').replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) run('umount', ['-l', m]);
}

// One-time changes to the cached tree that every booted copy wants.
function prepareRootfs(root) {
  const w = (rel, text, mode = 0o644) => {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, text, { mode });
  };
  // The distro enables nginx on install; the tests want a host that has the
  // package but where the playbook decides what runs.
  fs.rmSync(path.join(root, 'etc/systemd/system/multi-user.target.wants/nginx.service'), { force: true });
  w('etc/hostname', 'tunekit\n');
  w('etc/ssh/sshd_config.d/tunekit.conf', 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n');
  // Host keys are generated per booted copy (configureCopy), never shared.
  for (const f of fs.readdirSync(path.join(root, 'etc/ssh'))) {
    if (f.startsWith('ssh_host_')) fs.rmSync(path.join(root, 'etc/ssh', f));
  }
}



// ---------------------------------------------------------------- booting

const live = new Set(); // hosts not yet stopped, for the exit hook
// A tag every process of this test run carries (test/run.js sets it per test
// file): the containers get it too (nspawn's --setenv, in their init's
// environment), so a sweep after the file finds what it left whatever happened
// to this process, and their scratch dirs are named after it.
const RUN_TAG = process.env.TUNEKIT_TEST_TAG || '';
const TMP_PREFIX = `tunekit-nspawn-${RUN_TAG ? `${RUN_TAG}-` : ''}`;

// Each step of a boot has its own time: a step that starts late (the machine
// busy with another file's boots) still gets all of it, and the message says
// which step it was.
const UP_MS = 120000; // systemd-nspawn started -> the host side of its veth exists
const INIT_MS = 10000; // veth -> the container's init found
const SSH_MS = 120000; // veth up -> sshd answers
const SETTLE_MS = 120000; // systemctl is-system-running --wait

function writeInto(root, rel, text, mode = 0o644) {
  const p = path.join(root, rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, text, { mode });
}

function configureCopy(host, publicKey) {
  const { root, name, ip, hostIp } = host;
  writeInto(root, 'etc/hostname', `${name}\n`);
  writeInto(root, 'etc/hosts', `127.0.0.1 localhost\n127.0.1.1 ${name}\n${hostIp} tunekit-test-host\n`);
  must('ssh-keygen', ['-A', '-f', root]);
  writeInto(root, 'root/.ssh/authorized_keys', publicKey, 0o600);
  fs.chmodSync(path.join(root, 'root/.ssh'), 0o700);
  writeInto(root, 'etc/systemd/system/tunekit-net.service', [
    '# Test harness: the container side of the veth (test/lib/nspawn.js).',
    '[Unit]',
    'Description=tunekit test network (host0)',
    'DefaultDependencies=no',
    'Before=network.target ssh.service',
    'After=local-fs.target',
    '',
    '[Service]',
    'Type=oneshot',
    'RemainAfterExit=yes',
    'ExecStart=/usr/sbin/ip link set host0 up',
    `ExecStart=/usr/sbin/ip addr replace ${ip}/30 dev host0`,
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n'));
  fs.mkdirSync(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
  fs.symlinkSync('/etc/systemd/system/tunekit-net.service',
    path.join(root, 'etc/systemd/system/multi-user.target.wants/tunekit-net.service'));
}

function sshArgsFor(keyFile) {
  return [
    '-i', keyFile,
    '-o', 'StrictHostKeyChecking=no',
    '-o', 'UserKnownHostsFile=/dev/null',
    '-o', 'GlobalKnownHostsFile=/dev/null',
    '-o', 'LogLevel=ERROR',
    '-o', 'BatchMode=yes',
    '-o', 'ConnectTimeout=5',
    '-o', 'IdentitiesOnly=yes',
  ];
}

// Where this machine mounts cgroup2 (the unified hierarchy), or null.
function cgroup2Mount() {
  const line = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => / - cgroup2 /.test(l));
  return line ? line.split(' ')[4] : null;
}

// A cgroup2 directory and everything under it, deepest first (each must be
// empty of processes; rmdir takes a cgroup's own files with it).
function removeCgroupTree(dir) {
  let entries;
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  for (const e of entries) if (e.isDirectory()) removeCgroupTree(path.join(dir, e.name));
  try { fs.rmdirSync(dir); } catch { /* still holds a process: leftoversOf reports it */ }
}

// The cgroup a container's nspawn starts in, so that its cgroup namespace is
// its own (see the top of this file); null on a machine with no cgroup2 mount.
function ownCgroup(machine) {
  const mount = cgroup2Mount();
  if (!mount) return null;
  const dir = path.join(mount, `tunekit-nspawn-${machine}`);
  removeCgroupTree(dir); // a run killed before its teardown
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// Polls check() every `everyMs` until it returns something truthy; past `ms`
// throws what failed() says. `check` runs at least once after the time is up, so
// an event loop held up elsewhere never fails a step that has not been tried.
async function waitStep(ms, check, failed, everyMs = 100) {
  const deadline = Date.now() + ms;
  for (;;) {
    const late = Date.now() > deadline;
    const v = await check();
    if (v) return v;
    if (late) throw new Error(failed());
    await sleep(everyMs);
  }
}

async function bootOne(index, { name, suite, prepare, sshWaitMs = SSH_MS, rootfs, tmp, keyFile, publicKey, log }) {
  const slot = await claimSlot(name);
  const { machine, ip, hostIp, cidr, iface } = slot;
  const host = {
    name: machine, suite, ip, hostIp, cidr, slot, iface, keyFile,
    dir: path.join(tmp, `host${index}`), root: null, pid: null, init: null, proc: null, mounted: false,
    sshArgs: sshArgsFor(keyFile), consoleLog: null, cgroup: null, tmp,
  };
  live.add(host);
  fs.mkdirSync(host.dir);
  const upper = path.join(host.dir, 'upper');
  const work = path.join(host.dir, 'work');
  host.root = path.join(host.dir, 'root');
  for (const d of [upper, work, host.root]) fs.mkdirSync(d);
  must('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${rootfs},upperdir=${upper},workdir=${work}`, host.root]);
  host.mounted = true;
  // systemd-nspawn leaves a lock file named after the root's device and inode,
  // and a propagation dir named after the machine; teardown removes both.
  const st = fs.statSync(host.root);
  host.leftovers = [`/run/systemd/nspawn/locks/inode-${st.dev}:${st.ino}`, `/run/systemd/nspawn/propagate/${machine}`];
  configureCopy(host, publicKey);
  if (prepare) prepare(host.root);

  host.consoleLog = path.join(host.dir, 'console.log');
  const out = fs.openSync(host.consoleLog, 'a');
  const nspawn = [
    'systemd-nspawn', '-q', '-b', '-D', host.root, '-M', machine,
    '--register=no', '--keep-unit', '--network-veth',
    '--console=read-only',
    `--setenv=TUNEKIT_TEST_HOST=${machine}`, ...(RUN_TAG ? [`--setenv=TUNEKIT_TEST_TAG=${RUN_TAG}`] : []),
  ];
  host.cgroup = ownCgroup(machine);
  // sh moves itself into that cgroup, then becomes nspawn (the same pid).
  const argv = host.cgroup ? ['sh', '-c', 'echo $$ > "$0" && exec "$@"', path.join(host.cgroup, 'cgroup.procs'), ...nspawn] : nspawn;
  const proc = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', out, out],
    env: { ...process.env, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY: '1' },
  });
  fs.closeSync(out);
  // A host never keeps this process alive: a test that forgot one, or failed
  // before it could stop it, still ends, and the exit hook stops the host.
  proc.unref();
  host.proc = proc;
  host.pid = proc.pid;
  host.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  host.exited.then(() => { host.pid = null; });
  const where = `${machine} (${suite}, ${ip}, veth ${iface})`;
  const stopped = (what) => `systemd-nspawn for ${where} exited ${what}:\n${tail(host.consoleLog)}`;

  // Host side of the veth appears once nspawn has set the container up.
  await waitStep(UP_MS, () => {
    if (!host.pid) throw new Error(stopped('before its veth appeared'));
    return fs.existsSync(`/sys/class/net/${iface}`);
  }, () => `no interface ${iface} ${UP_MS / 1000} s after systemd-nspawn started ${where}:\n${tail(host.consoleLog)}`);
  // nspawn moves the veth's peer into the container's namespaces once its init
  // is cloned, so the init is there now (a moment later, its parent may still
  // be nspawn's intermediate child: containerInit looks one level down too).
  host.init = await waitStep(INIT_MS, () => host.pid && alive(host.pid) && containerInit(host.pid),
    () => `systemd-nspawn for ${where} (pid ${host.pid}) has no child in a PID namespace of its own; teardown could not stop the container without its init`);
  must('ip', ['addr', 'replace', `${hostIp}/30`, 'dev', iface]);
  must('ip', ['link', 'set', iface, 'up']);

  host.ssh = (cmd, opts) => runCommand('ssh', [...host.sshArgs, `root@${ip}`, cmd], opts);
  // Wait for sshd; then for boot to settle (nginx etc. may still be starting).
  let last = null;
  let tries = 0;
  await waitStep(sshWaitMs, async () => {
    if (!host.pid) throw new Error(stopped('during boot'));
    tries += 1;
    last = await host.ssh('true', { timeoutMs: 10000 });
    return last.code === 0;
  }, () => {
    const said = (last.stderr || last.stdout).trim() || `no output, exit ${last.code}${last.signal ? ` (${last.signal})` : ''}`;
    return `ssh root@${ip} to ${where} failed for ${sshWaitMs / 1000} s (${tries} tries); ssh's last error: ${said}\nits console:\n${tail(host.consoleLog)}`;
  }, 500);
  const settled = await host.ssh('systemctl is-system-running --wait', { timeoutMs: SETTLE_MS });
  if (!/^(running|degraded)$/m.test(settled.stdout)) {
    throw new Error(`${where} did not finish booting within ${SETTLE_MS / 1000} s: systemctl is-system-running says "${(settled.stdout + settled.stderr).trim()}"\n${tail(host.consoleLog)}`);
  }
  log(`${machine} up at ${ip} (host side ${iface} ${hostIp})`);
  return host;
}

function tail(file, n = 30) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

/**
 * Boot containers from the cached root filesystems, in parallel: `n` of the
 * default suite named NAME+slot, or one per spec of a list
 * ([{ name, suite, prepare(root), sshWaitMs }, ...]: several releases at once;
 * `prepare` changes the host's copy before it boots). Every rootfs is built
 * first (in child processes, so nothing blocks this process's event loop while
 * a host boots). When any host fails to boot, every host of the call is stopped,
 * those that booted included, and the first error is thrown, with the records
 * of every host of the call as its `hosts` (for a leftovers check).
 * @returns {Promise<Array<{name, suite, ip, hostIp, iface, sshArgs, ssh, root, keyFile}>>}
 */
async function bootHosts(n, { name = 'tk', suite = DEFAULT_SUITE, log = (m) => process.stderr.write(`nspawn: ${m}\n`) } = {}) {
  const specs = Array.isArray(n) ? n.map((s) => ({ suite, ...s })) : Array.from({ length: n }, () => ({ name, suite }));
  if (process.getuid() !== 0) throw new Error('booting test hosts needs root (systemd-nspawn, mount, ip)');
  const roots = await ensureRootfsAll([...new Set(specs.map((s) => s.suite))], { log });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), TMP_PREFIX));
  const keyFile = path.join(tmp, 'id_ed25519');
  must('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'tunekit-test', '-f', keyFile]);
  const publicKey = fs.readFileSync(`${keyFile}.pub`, 'utf8');
  const results = await Promise.allSettled(specs.map((s, i) =>
    bootOne(i, { ...s, rootfs: roots[s.suite], tmp, keyFile, publicKey, log })));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) {
    const mine = [...live].filter((h) => h.tmp === tmp);
    await stopHosts(mine);
    failed.reason.hosts = mine;
    if (![...live].some((h) => h.tmp === tmp)) fs.rmSync(tmp, { recursive: true, force: true });
    throw failed.reason;
  }
  return results.map((r) => r.value);
}

/** Stops every host this process booted and has not stopped yet (an after() hook's safety net). */
function stopAllHosts() {
  return stopHosts([...live]);
}

// ---------------------------------------------------------------- stopping

const POWEROFF_GRACE_MS = 30000; // an orderly poweroff of a test host takes seconds
const KILL_WAIT_MS = 10000; // the kernel ends a killed PID namespace at once; past this something is stuck
const NSPAWN_EXIT_MS = 5000; // nspawn exits as soon as its init is gone

function pidNamespace(pid) {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * The container's init, as {pid, start, pidns}: the child (or grandchild) of
 * systemd-nspawn in a PID namespace other than ours (nspawn is the subreaper of what it starts, so
 * the init stays its child), or null. pid and start time name the process even
 * after nspawn is gone and the init has been handed to PID 1.
 */
function containerInit(nspawnPid) {
  const ours = pidNamespace('self');
  // nspawn clones an intermediate child, which clones the init and exits; until
  // nspawn has reaped it, the init is its grandchild.
  for (const pid of childrenOf(nspawnPid).flatMap((c) => [c, ...childrenOf(c)])) {
    const pidns = pidNamespace(pid);
    const st = readStat(pid);
    if (pidns && st && pidns !== ours) return { pid, start: st.start, pidns };
  }
  return null;
}

/**
 * The live processes of a host's container: its init and every process in its
 * PID namespace; [] once the init is gone. Only the init recorded at boot
 * counts (same pid, same start time); while it lives its namespace does too,
 * so the namespace's id names this container and no other.
 */
function containerProcesses(h) {
  const init = h && h.init;
  const st = init && readStat(init.pid);
  if (!st || st.start !== init.start || st.state === 'Z' || st.state === 'X') return [];
  const pids = [init.pid];
  for (const name of fs.readdirSync('/proc')) {
    if (/^\d+$/.test(name) && Number(name) !== init.pid && pidNamespace(name) === init.pidns) pids.push(Number(name));
  }
  return pids.sort((a, b) => a - b);
}

function waitSync(done, ms) {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) spawnSync('sleep', ['0.1']);
  return done();
}

/**
 * Ends a host's container now, by pid only: SIGKILL to its init ends every
 * process of its PID namespace, and nspawn, its parent, exits on its own; nspawn
 * gets a SIGKILL only if it is still there after that. Never the other way
 * round: a SIGKILLed nspawn cannot stop its container, and the init, handed to
 * PID 1, runs on with journald, sshd and whatever the host had started, its
 * /proc/PID/root reading "/" once the overlay is unmounted here.
 */
function killContainerSync(h) {
  if (!h.init && h.pid && alive(h.pid)) h.init = containerInit(h.pid); // a boot that failed before recording it
  if (containerProcesses(h).length) {
    try { process.kill(h.init.pid, 'SIGKILL'); } catch { /* gone */ }
    if (!waitSync(() => !containerProcesses(h).length, KILL_WAIT_MS)) {
      process.stderr.write(`nspawn: ${h.name}: processes ${containerProcesses(h).join(' ')} of the container still run ${KILL_WAIT_MS / 1000} s after SIGKILL to its init ${h.init.pid}\n`);
    }
  }
  if (h.pid && !waitSync(() => !alive(h.pid), NSPAWN_EXIT_MS)) {
    try { process.kill(h.pid, 'SIGKILL'); } catch { /* gone */ }
    // Wait (bounded) for the kernel to reap it so the overlay is not busy.
    waitSync(() => !alive(h.pid), NSPAWN_EXIT_MS);
  }
}

/** Power the containers off and remove every trace (processes, veths, mounts, dirs). */
async function stopHosts(hosts = []) {
  const list = [...(hosts || [])].filter(Boolean);
  await Promise.all(list.map(async (h) => {
    if (h.pid) {
      try { process.kill(h.pid, 'SIGTERM'); } catch { /* gone */ }
      await Promise.race([h.exited, sleep(POWEROFF_GRACE_MS)]);
    }
    cleanupSync(h); // kills what the poweroff left
  }));
  const tmps = new Set(list.map((h) => h.tmp).filter(Boolean));
  for (const t of tmps) {
    if (![...live].some((h) => h.tmp === t)) fs.rmSync(t, { recursive: true, force: true });
  }
}

// Synchronous part of teardown, also used from the 'exit' hook.
function cleanupSync(h) {
  killContainerSync(h);
  if (fs.existsSync(`/sys/class/net/${h.iface}`)) run('ip', ['link', 'del', h.iface]);
  if (h.mounted) {
    let r = run('umount', [h.root]);
    if (r.code !== 0) r = run('umount', ['-l', h.root]);
    if (r.code === 0) h.mounted = false;
  }
  if (!h.mounted) fs.rmSync(h.dir, { recursive: true, force: true });
  if (h.cgroup) removeCgroupTree(h.cgroup);
  for (const p of h.leftovers || []) {
    try {
      if (fs.statSync(p).isDirectory()) fs.rmdirSync(p); // empty once the container is gone
      else fs.rmSync(p);
    } catch { /* already gone, or still in use: leave it */ }
  }
  // The slot (address, name, veth) is free again only once the veth is gone.
  if (h.slot && !fs.existsSync(`/sys/class/net/${h.iface}`)) h.slot.release();
  live.delete(h);
}

function cleanupAllSync() {
  for (const h of [...live]) {
    cleanupSync(h);
    if (h.tmp && ![...live].some((o) => o.tmp === h.tmp)) fs.rmSync(h.tmp, { recursive: true, force: true });
  }
}
process.on('exit', cleanupAllSync);
// Interrupted (Ctrl-C, the test runner's SIGTERM): clean up, then die of the
// same signal as we would have without this handler.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    cleanupAllSync();
    process.kill(process.pid, sig);
  });
}

/**
 * What is left of a host after teardown: [] when nothing. The container's own
 * processes are found by its PID namespace and by the name in its init's
 * environment (a container whose nspawn is gone included); in their own mount
 * namespace their /proc/PID/root reads "/", so the root scan below sees only
 * processes of this side chrooted into the host's tree.
 */
function leftoversOf(h) {
  const found = [];
  if (h.pid && alive(h.pid)) found.push(`process ${h.pid} (systemd-nspawn)`); // a zombie is not left: its parent is gone, PID 1 reaps it
  const inNamespace = containerProcesses(h);
  for (const pid of inNamespace) found.push(`process ${pid} of the container (init ${h.init.pid}, ${h.init.pidns})`);
  for (const pid of taggedProcesses('TUNEKIT_TEST_HOST', h.name).filter((p) => !inNamespace.includes(p))) found.push(`process ${pid} with TUNEKIT_TEST_HOST=${h.name} (a container's init)`);
  if (fs.existsSync(`/sys/class/net/${h.iface}`)) found.push(`veth ${h.iface}`);
  const mounts = fs.readFileSync('/proc/self/mounts', 'utf8');
  if (mounts.includes(h.dir)) found.push(`mount under ${h.dir}`);
  if (fs.existsSync(h.dir)) found.push(`dir ${h.dir}`);
  if (h.cgroup && fs.existsSync(h.cgroup)) found.push(`cgroup ${h.cgroup}`);
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let root = '';
    try { root = fs.readlinkSync(`/proc/${pid}/root`); } catch { continue; }
    if (root.startsWith(h.dir)) found.push(`process ${pid} rooted in ${root}`);
  }
  // Only a route through this host's veth is its own: once teardown released
  // the slot, another file's host may already be routed in the same /30 (a
  // full run saw ve-tkhost2 in the range tkans2 had just left).
  const routes = run('ip', ['-4', '-o', 'route', 'show', h.cidr]).stdout.split('\n')
    .filter((line) => /\sdev (\S+)/.exec(line)?.[1] === h.iface);
  for (const line of routes) found.push(`route ${line.trim()}`);
  return found;
}

/** Copy SRC (a file or a tree, modes kept) to REL under a booted host's root, as if placed on the host. */
function copyInto(host, src, rel) {
  const dest = path.join(host.root, rel);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  const r = spawnSync('cp', ['-a', '--reflink=auto', src, dest], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cp ${src} ${dest}: ${r.stderr || r.error}`);
}

module.exports = {
  copyInto, ensureRootfs, ensureRootfsAll, runInRootfs, rootfsPath, bootHosts, stopHosts, stopAllHosts, leftoversOf,
  containerInit, containerProcesses, killContainerSync, PACKAGES, DEFAULT_SUITE,
};

if (require.main === module) {
  if (process.argv[2] === 'build') console.log(ensureRootfs({ suite: process.argv[3] || DEFAULT_SUITE }));
}
