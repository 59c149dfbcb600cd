'use strict';
// Run a command inside another Debian root filesystem (a debootstrap tree),
// with that release's own binaries and libraries: nginx, OpenSSL, curl, Node.
// The command runs chrooted in a private mount and PID namespace; a tmpfs
// covers its /tmp and /run, so the tree itself is never written, and binds
// ({hostDir: pathInside}) are mounted there only. The network namespace is the
// caller's: a server started inside listens on this machine's loopback.
// Needs root (unshare, mount, chroot).

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

/** Refuse a tree that is not a root filesystem, or a bind target that would write into it. */
function checkRoot(root, binds) {
  if (!fs.existsSync(path.join(root, 'bin/sh'))) {
    throw new Error(`${root} is not a root filesystem (no bin/sh); build one with debootstrap, e.g. ` +
      `debootstrap --variant=minbase --include=nginx,curl,openssl,nodejs trixie ${root}`);
  }
  for (const inside of Object.values(binds)) {
    if (!inside.startsWith('/tmp/') && !fs.existsSync(path.join(root, inside))) {
      throw new Error(`bind target ${inside} is neither in ${root} nor under /tmp/ (a tmpfs); the tree stays untouched`);
    }
  }
}

/**
 * The `unshare … chroot` argv that runs `script` (sh) inside root. pidNamespace
 * false: in this machine's PID namespace, so a pid file written inside names the
 * process as /proc here shows it (a server another tool then reads, as doctor
 * reads nginx's master); the caller stops what it starts by that pid.
 */
function chrootArgv(root, script, binds = {}, { pidNamespace = true } = {}) {
  checkRoot(root, binds);
  const mounts = [
    `mount -t tmpfs tunekit-tmp ${root}/tmp`,
    `mount -t tmpfs tunekit-run ${root}/run`,
    `mount -t proc proc ${root}/proc`,
    ...Object.entries(binds).map(([host, inside]) => `mkdir -p ${root}${inside} && mount --bind ${host} ${root}${inside}`),
  ];
  const outer = `set -e; mount --make-rprivate /; ${mounts.join('; ')}; exec chroot ${root} /bin/sh -c "$0"`;
  // --kill-child: if unshare is killed (a timeout), its forked child, the PID
  // namespace's init, goes too, and with it everything started inside.
  return ['unshare', '--mount', '--fork', '--kill-child', ...(pidNamespace ? ['--pid'] : []), '/bin/sh', '-c', outer, script];
}

/**
 * Run `script` with /bin/sh inside root; resolves {code, signal, stdout, stderr}
 * when it ends (SIGKILL after timeoutMs). Never rejects. `prefix` is an argv
 * the chroot runs under (it must exec its arguments), e.g. one that enters a
 * network namespace of its own.
 */
function runInRoot(root, script, { binds = {}, timeoutMs = 60000, prefix = [] } = {}) {
  const argv = [...prefix, ...chrootArgv(root, script, binds)];
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const r = { code: 0, signal: null, stdout: '', stderr: '' };
    child.stdout.on('data', (d) => { r.stdout += d; });
    child.stderr.on('data', (d) => { r.stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => { r.stderr += `unshare: ${err.message}\n`; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      Object.assign(r, { code: code ?? 128, signal });
      resolve(r);
    });
  });
}

module.exports = { runInRoot, chrootArgv };
