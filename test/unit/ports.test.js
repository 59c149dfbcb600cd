'use strict';
// lib/proc.js freePorts(): ports for a stack's listeners, chosen below the
// kernel's ephemeral range, where no outgoing connection can take them between
// the choice and the bind.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { freePorts, freePort, portRange } = require('../../lib/proc');

test('the range: below ip_local_port_range\'s first port, from 20000; none when that leaves less than 1000', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-ports-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'range');
  fs.writeFileSync(file, '32768\t60999\n');
  assert.deepEqual(portRange(file), [20000, 32768]);
  fs.writeFileSync(file, '20500\t60999\n');
  assert.equal(portRange(file), null);
  assert.equal(portRange(path.join(dir, 'missing')), null);
});

test('freePorts: distinct, outside the ephemeral range, bindable, never one of except', async (t) => {
  const range = portRange();
  const taken = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => taken.once('listening', resolve));
  t.after(() => taken.close());
  const except = [taken.address().port];
  const ports = await freePorts(20, except);
  assert.equal(new Set(ports).size, 20);
  for (const p of ports) {
    assert.ok(!except.includes(p));
    if (range) assert.ok(p >= range[0] && p < range[1], `port ${p} is not below the ephemeral range (${range})`);
  }
  const one = await freePort();
  const srv = net.createServer().listen(one, '127.0.0.1');
  await new Promise((resolve, reject) => { srv.once('listening', resolve); srv.once('error', reject); });
  srv.close();
});
