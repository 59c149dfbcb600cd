'use strict';
// test/lib/slots.js: the network slots of booted test hosts are unique across
// processes. Three processes claim at once (two children and this one, all with
// the same name prefix, as two runs of one e2e file would): no address, machine
// name or veth is handed out twice. A holder killed with SIGKILL leaves no stale
// claim: the kernel released its names, and its slots are claimed again.
// No root and no host is needed: a claim is an abstract Unix socket name.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { claimSlot } = require('../lib/slots');

const SLOTS = path.join(__dirname, '../lib/slots.js');
const PER_PROCESS = 4;

// A child that claims `count` slots and holds them until its stdin closes;
// resolves the child and its slots.
function holder(t, count) {
  const child = spawn(process.execPath, [SLOTS, 'tkslot', String(count)], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve({ child, slots: JSON.parse(out) });
    });
    child.on('exit', (code) => reject(new Error(`slot holder exited ${code} before it claimed: ${out}`)));
  });
}

const exited = (child) => new Promise((r) => child.once('exit', r));

test('slots claimed by three processes at once are distinct: addresses, machine names and veths', async (t) => {
  const [a, b, mine] = await Promise.all([holder(t, PER_PROCESS), holder(t, PER_PROCESS),
    Promise.all(Array.from({ length: PER_PROCESS }, () => claimSlot('tkslot')))]);
  t.after(() => mine.forEach((s) => s.release()));
  const all = [...a.slots, ...b.slots, ...mine];
  assert.equal(all.length, 3 * PER_PROCESS);
  for (const key of ['n', 'ip', 'cidr', 'machine', 'iface']) {
    assert.equal(new Set(all.map((s) => s[key])).size, all.length, `a ${key} was handed out twice: ${all.map((s) => s[key]).join(' ')}`);
  }
  for (const s of all) {
    assert.equal(s.machine, `tkslot${s.n}`);
    assert.equal(s.iface, `ve-tkslot${s.n}`);
    assert.equal(s.cidr, `10.213.${s.n}.0/30`);
    assert.ok(s.iface.length <= 15, `${s.iface} is longer than an interface name may be`);
  }
});

test('a holder killed with SIGKILL leaves no stale claim: its slots are claimed again', async (t) => {
  const a = await holder(t, PER_PROCESS);
  const held = a.slots.map((s) => s.n);
  const during = await claimSlot('tkslot');
  assert.ok(!held.includes(during.n), `slot ${during.n} was handed out while ${held.join(' ')} are held`);
  during.release();
  a.child.kill('SIGKILL');
  await exited(a.child);
  // Nothing else in this lane claims slots, so the lowest free ones are the
  // killed holder's (and the one just released, below or among them).
  const again = [];
  for (let i = 0; i < PER_PROCESS + 1; i++) again.push(await claimSlot('tkslot'));
  t.after(() => again.forEach((s) => s.release()));
  const ns = again.map((s) => s.n);
  for (const n of held) assert.ok(ns.includes(n), `slot ${n} of the killed holder was not claimed again (got ${ns.join(' ')})`);
});

test('a prefix that would make a machine or veth name too long is refused by name', async () => {
  await assert.rejects(claimSlot('Tk'), /host name prefix "Tk" must be 1-8 of \[a-z0-9-\], starting with a letter/);
  await assert.rejects(claimSlot('abcdefghi'), /host name prefix "abcdefghi" must be 1-8/);
});
