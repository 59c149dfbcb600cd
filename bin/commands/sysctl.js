'use strict';
// tunekit sysctl apply FILE [--out PATH] [--dry-run] [--json] [--proc DIR]
//
// Applies a sysctl.d drop-in (the rendered sysctl/sysctl.conf.j2) without ever
// lowering a live value, then writes the effective drop-in (the values it set or
// kept) to --out (default: FILE itself), so a reboot applies the same values.
// --json prints the decision per key for Ansible (sysctl/README.md).

const fs = require('node:fs');
const os = require('node:os');
const { KitError, UsageError } = require('../../lib/errors');
const command = require('../../lib/command');
const { reason } = require('../../lib/files');
const sysctl = require('../../lib/sysctl');

const COMMAND = {
  name: 'sysctl',
  usage: ['apply FILE [options]'],
  about: 'Apply a sysctl.d drop-in without lowering any live value: for each key the higher of the live and the ' +
    'desired value wins (ip_local_port_range: the union of both ranges; tcp_tw_reuse: 0 < 2 < 1), then write the ' +
    'effective drop-in so a reboot applies the same values. Keys this system cannot set (a container, a global key ' +
    'seen from a network namespace) are reported, not fatal. FILE is the drop-in (render --layer sysctl writes one). ' +
    'Writing /proc/sys needs root: as another user it sets and writes nothing and says the command to run (--dry-run works as any user).',
  positionals: 2,
  options: {
    out: { type: 'string', value: 'PATH', help: 'where to write the effective drop-in (default: FILE itself)' },
    'dry-run': { type: 'boolean', help: 'decide and print, write nothing (neither /proc/sys nor a file)' },
    json: { type: 'boolean', help: 'print {"changed", "file", "keys": [...]} instead of a table' },
    proc: { type: 'string', value: 'DIR', default: sysctl.PROC_SYS, help: 'read and write DIR instead of /proc/sys, for tests' },
  },
  examples: [
    'tunekit sysctl apply /etc/sysctl.d/60-tunekit.conf',
    'tunekit sysctl apply /etc/sysctl.d/60-tunekit.conf --dry-run --json',
  ],
  notes: 'Exit status: 0 applied (or nothing to do), 1 the kernel refused a value, 2 usage, an unreadable drop-in, or not root (nothing done).',
};

function parse(argv) {
  const { values, positionals } = command.parse(COMMAND, argv);
  if (values.help) return values;
  const [sub, file] = positionals;
  if (sub !== 'apply' || !file) throw new UsageError('expected "sysctl apply FILE"; see tunekit sysctl --help');
  return { ...values, file };
}

// CAP_NET_ADMIN (capability 12) in this process's effective set, from /proc/self/status.
function hasNetAdmin() {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    return Boolean(m && (BigInt(`0x${m[1]}`) >> 12n) & 1n);
  } catch {
    return false;
  }
}

function whoami() {
  try {
    return os.userInfo().username;
  } catch {
    return `uid ${process.geteuid()}`;
  }
}

function pad(s, n) {
  return String(s).padEnd(n);
}

function table(steps) {
  const rows = steps.map((s) => [s.key, s.live === null ? '-' : s.live, s.desired, s.effective, s.action, s.why]);
  const w = [0, 1, 2, 3, 4].map((i) => Math.max(...rows.map((r) => String(r[i]).length), 9));
  const head = ['key', 'live', 'desired', 'effective', 'action'];
  const line = (r) => `${r.slice(0, 5).map((c, i) => pad(c, w[i])).join('  ')}${r[5] ? `  ${r[5]}` : ''}`;
  return [line([...head, '']), ...rows.map(line)].join('\n');
}

async function main(argv) {
  const values = parse(argv);
  if (values.help) {
    console.log(command.helpText(COMMAND));
    return 0;
  }
  const { file } = values;
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the drop-in ${file}: ${reason(err)}; give the path of a sysctl.d file (render --layer sysctl writes one)`);
  }
  const out = values.out || file;
  const dryRun = values['dry-run'];
  // Only root writes /proc/sys (the kernel's sysctl permission check looks at the
  // euid; for net.* keys CAP_NET_ADMIN counts too): as another user every key
  // would fail with EACCES, which reads like a container's, and the drop-in would
  // be written with each of them marked "cannot be set here". Say what it is
  // instead, before anything.
  if (!dryRun && values.proc === sysctl.PROC_SYS && process.geteuid && process.geteuid() !== 0 && !hasNetAdmin()) {
    throw new KitError(`sysctl apply sets kernel values in ${sysctl.PROC_SYS}, which only root may write (you are ${whoami()}); ` +
      `nothing was set or written. Run it as root: ${command.asRoot(COMMAND.name, argv)} (--dry-run shows what it would change, as any user)`);
  }

  const steps = sysctl.apply(sysctl.plan(text, { procRoot: values.proc, file }), { procRoot: values.proc, dryRun });
  const failed = steps.filter((s) => s.action === 'failed');
  let fileChanged = false;
  // Only a fully applied set is persisted: a drop-in naming a value the kernel
  // refused would fail again at every boot.
  if (!dryRun && failed.length === 0) {
    const effective = sysctl.effectiveDropIn(text, steps);
    try {
      fileChanged = sysctl.writeIfChanged(out, effective);
    } catch (err) {
      throw new UsageError(`cannot write the effective drop-in ${out}: ${reason(err)}; choose a writable --out`);
    }
  }
  const raised = steps.filter((s) => s.action === 'raise');
  const report = {
    changed: !dryRun && (raised.length > 0 || fileChanged),
    dryRun,
    file: out,
    keys: steps.map(({ key, live, desired, effective, action, why, error }) => ({
      key, live, desired, effective, action, why, ...(error ? { error } : {}),
    })),
  };
  if (values.json) {
    console.log(JSON.stringify(report, null, 2));
  } else {
    console.log(table(steps));
    const skipped = steps.filter((s) => s.action === 'not-settable' || s.action === 'unreadable');
    if (skipped.length) {
      console.log(`\n${skipped.length} key(s) cannot be set here (a container or a network namespace): ` +
        `${skipped.map((s) => s.key).join(', ')}. Set them on the host.`);
    }
    if (dryRun) console.log('\n--dry-run: nothing written');
    else if (failed.length) console.log(`\nnot written: ${out} (the kernel refused ${failed.map((s) => s.key).join(', ')})`);
    else console.log(`\n${fileChanged ? 'wrote' : 'unchanged'}: ${out}`);
  }
  return failed.length ? 1 : 0;
}

module.exports = { main, parse, COMMAND };
