'use strict';
// tunekit_app_max_semi_space_mb reaches the app's workers as Node's
// --max-semi-space-size and bounds V8's young generation: under an allocation
// pattern that makes V8 grow it (test/fixtures/runner/young-gen.js), a worker
// started with 1 MiB keeps both semi-spaces at 2 MiB, and one left to V8 (0, the
// definition's value) grows past that: the control that makes the test able to fail.
// tunekit_app_memory_reducer reaches them the same way (--no-memory-reducer when off).
// Counted in requests served, not time.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const h = require('../fixtures/runner/harness');

const group = h.someGroup();
const APP = path.join(h.FIXTURES, 'young-gen.js');
const REQUESTS = 10; // 3,000 batches kept 20 at a time: V8 grew the young generation to 32 MiB here

async function youngGeneration(t, mb, extra = []) {
  const sock = path.join(h.tmpDir(t), 'app.sock');
  const r = h.start(t, {
    args: [APP, '--listen', `unix:${sock}`, '--workers', '1', '--strategy', 'shared', '--socket-group', group.name,
      '--set', `tunekit_app_max_semi_space_mb=${mb}`, ...extra],
  });
  await r.ready();
  for (let i = 0; i < REQUESTS; i++) assert.equal((await h.request(sock, '/alloc')).status, 200);
  const res = await h.request(sock, '/stats');
  assert.equal(res.status, 200, res.body);
  r.signal('SIGTERM');
  assert.deepEqual(await r.exited, { code: 0, signal: null });
  return res.json;
}

test('tunekit_app_max_semi_space_mb=1: the worker runs with --max-semi-space-size=1 and its young generation stays at 2 × 1 MiB', async (t) => {
  const { newSpace, execArgv } = await youngGeneration(t, 1);
  assert.ok(execArgv.includes('--max-semi-space-size=1'), `the worker's flags: ${execArgv.join(' ')}`);
  assert.ok(newSpace <= 2 * 1024 * 1024, `new space ${newSpace} bytes, above 2 × 1 MiB`);
});

test('0 (the definition\'s value) leaves the young generation to V8, which grows it past 2 MiB under the same requests', async (t) => {
  const { newSpace, execArgv } = await youngGeneration(t, 0);
  assert.ok(!execArgv.some((a) => a.startsWith('--max-semi-space-size')), `the worker's flags: ${execArgv.join(' ')}`);
  assert.ok(newSpace > 2 * 1024 * 1024, `new space ${newSpace} bytes: V8 did not grow it, so the bound above shows nothing`);
  // The definition's tunekit_app_memory_reducer (off) reaches the worker too.
  assert.ok(execArgv.includes('--no-memory-reducer'), `the worker's flags: ${execArgv.join(' ')}`);
});

test('tunekit_app_memory_reducer=true: the worker runs with V8\'s memory reducer (no --no-memory-reducer)', async (t) => {
  const { execArgv } = await youngGeneration(t, 0, ['--set', 'tunekit_app_memory_reducer=true']);
  assert.ok(!execArgv.includes('--no-memory-reducer'), `the worker's flags: ${execArgv.join(' ')}`);
});
