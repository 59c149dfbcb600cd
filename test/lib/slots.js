'use strict';
// Network slots of the booted test hosts, unique across every process on this
// machine: two e2e files (or two whole suites) booting at once never share an
// address, a machine name or a veth.
//
//   const { claimSlot } = require('./slots');
//   const slot = await claimSlot('tkhost');   // { n, cidr, hostIp, ip, machine, iface, release() }
//   ...
//   slot.release();                            // at teardown (the process's exit releases it too)
//
// Slot N owns 10.213.N.0/30 (the host side .1, the container .2), the machine
// name PREFIX+N and the veth ve-PREFIX+N that systemd-nspawn names after it.
//
// The claim is a listening Unix socket in the abstract namespace,
// "\0tunekit-test-slot-N", held by the claiming process: bind() is atomic (one
// process gets it, every other gets EADDRINUSE), and the kernel releases the name
// when the socket is closed or its process dies, however it dies, so a claim is
// never stale and nothing has to be reclaimed (a lock file whose owner is gone
// has to be, and two processes reclaiming one at once could both win). Abstract
// names belong to the network namespace: every test process here runs in the
// machine's own one.
//
// Under the claim, a slot whose range is still routed here, or whose veth name
// exists (a container an earlier, killed run left behind, handed to PID 1), is
// released and skipped: it is taken, whoever holds it.

const fs = require('node:fs');
const net = require('node:net');
const { spawnSync } = require('node:child_process');

const FIRST = 1;
const LAST = 254; // 10.213.N.0/30 for N in FIRST..LAST
const NAME_MAX = 12; // ve- + the machine name fits IFNAMSIZ (15 characters)

function slotAddresses(n) {
  const net3 = `10.213.${n}`;
  return { hostIp: `${net3}.1`, ip: `${net3}.2`, cidr: `${net3}.0/30` };
}

// The range of slot n is in use here when an address or a route of this
// machine falls in it.
function routedHere(n) {
  const { cidr } = slotAddresses(n);
  const show = (args) => spawnSync('ip', ['-4', '-o', ...args], { encoding: 'utf8' }).stdout || '';
  return Boolean(show(['route', 'show', 'match', cidr]).split('\n').some((l) => l.startsWith(cidr)) ||
    show(['addr', 'show', 'to', cidr]).trim());
}

// Binds the abstract name of slot n; resolves the server, or null when another
// process holds it.
function bindClaim(n) {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err) => (err.code === 'EADDRINUSE' ? resolve(null) : reject(err)));
    server.listen(`\0tunekit-test-slot-${n}`, () => {
      server.unref(); // a claim never keeps its process alive
      resolve(server);
    });
  });
}

/**
 * Claims the lowest free slot for a host named PREFIX+N.
 * @returns {Promise<{n, cidr, hostIp, ip, machine, iface, release: () => void}>}
 */
async function claimSlot(prefix) {
  if (!/^[a-z][a-z0-9-]{0,7}$/.test(prefix)) throw new Error(`host name prefix "${prefix}" must be 1-8 of [a-z0-9-], starting with a letter`);
  for (let n = FIRST; n <= LAST; n++) {
    const machine = `${prefix}${n}`;
    if (machine.length > NAME_MAX) break;
    const server = await bindClaim(n);
    if (!server) continue;
    const iface = `ve-${machine}`;
    if (routedHere(n) || fs.existsSync(`/sys/class/net/${iface}`)) {
      server.close();
      continue;
    }
    let held = true;
    return {
      n, machine, iface, ...slotAddresses(n),
      release() {
        if (held) server.close();
        held = false;
      },
    };
  }
  throw new Error(`no free test network slot 10.213.${FIRST}-${LAST}.0/30 for "${prefix}": every one is claimed by a running test or routed here; stop old test containers (ip -4 route show | grep 10.213.)`);
}

module.exports = { claimSlot, slotAddresses, routedHere };

// `node test/lib/slots.js PREFIX COUNT`: claims COUNT slots, prints them as one
// JSON line, holds them until stdin closes (the allocator test's second process).
if (require.main === module) {
  const [prefix, count] = process.argv.slice(2);
  (async () => {
    const slots = [];
    for (let i = 0; i < Number(count || 1); i++) slots.push(await claimSlot(prefix));
    process.stdout.write(`${JSON.stringify(slots.map(({ n, machine, iface, ip, cidr }) => ({ n, machine, iface, ip, cidr })))}\n`);
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
  })().catch((err) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}
