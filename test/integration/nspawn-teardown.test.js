'use strict';
// The teardown of test/lib/nspawn.js against the kernel, with `unshare --pid
// --fork sleep` standing in for systemd-nspawn and its container (nothing is
// booted): a process whose child is PID 1 of a new PID namespace. A SIGKILL to
// the wrapper alone leaves that init running, handed to PID 1, which is how a
// booted test host outlived ansible-site.test.js; killContainerSync ends the
// init by the pid and start time recorded for it, and the namespace with it.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { spawn, spawnSync } = require('node:child_process');
const { until } = require('../lib/util');
const { containerInit, containerProcesses, killContainerSync } = require('../lib/nspawn');
const { alive, readStat } = require('../../lib/proc');

function canUnshare() {
  if (process.getuid() !== 0) return 'needs root (unshare --pid)';
  const r = spawnSync('unshare', ['--pid', '--fork', 'true']);
  return r.status === 0 ? null : `unshare --pid --fork failed: ${String(r.stderr).trim()}`;
}
const skip = canUnshare() || false;

// A wrapper and the init of its PID namespace, recorded as bootOne records a
// host's; both killed by pid after the test, whatever it left.
async function startWrapper(t) {
  const proc = spawn('unshare', ['--pid', '--fork', 'sleep', '600'], { stdio: 'ignore' });
  const h = { name: 'unshare', pid: proc.pid, init: null };
  h.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  h.exited.then(() => { h.pid = null; }); // reaped: the pid may be another process's now
  t.after(() => {
    if (containerProcesses(h).length) process.kill(h.init.pid, 'SIGKILL');
    if (h.pid) proc.kill('SIGKILL');
  });
  h.init = await until('the init of the new PID namespace', () => containerInit(proc.pid), 10000);
  return h;
}

test('a SIGKILL to the wrapper alone leaves its init running; killContainerSync ends it by its recorded pid', { skip }, async (t) => {
  const h = await startWrapper(t);
  assert.notEqual(h.init.pidns, fs.readlinkSync('/proc/self/ns/pid'));
  // A record with another start time (the pid reused) names nothing.
  assert.deepEqual(containerProcesses({ init: { ...h.init, start: `${h.init.start}0` } }), []);

  const wrapper = h.pid;
  process.kill(wrapper, 'SIGKILL');
  await h.exited;
  // The leak: the wrapper is gone, its init is not, and is no longer its child.
  assert.deepEqual(containerProcesses(h), [h.init.pid]);
  assert.notEqual(readStat(h.init.pid).ppid, wrapper);

  killContainerSync(h);
  assert.deepEqual(containerProcesses(h), []);
});

test('killContainerSync with the wrapper running and no init recorded: it finds the init, kills it, and the wrapper is gone too', { skip }, async (t) => {
  const h = await startWrapper(t);
  const { pid: init } = h.init;
  const wrapper = h.pid;
  h.init = null; // as after a boot that failed before recording it
  killContainerSync(h);
  assert.equal(h.init && h.init.pid, init);
  assert.deepEqual(containerProcesses(h), []);
  assert.equal(alive(wrapper), false);
  await h.exited;
});
