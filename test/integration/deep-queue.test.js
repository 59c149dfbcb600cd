'use strict';
// An app whose accept queue is deep: what an overloaded app's socket looks like,
// and the moment its queue is worth reading. `ss -l -x -e` (the file inode of
// each socket) lists no Unix listener at all once one of them has about 1,000
// connections waiting (the kernel's dump adds each waiting peer, and they no
// longer fit): ss prints nothing and exits 0. Seen first as "nothing listens on
// …" from `tunekit reload` and `tunekit profile` on a loaded machine. Here a
// real process holds a socket with a 4096 backlog and stops accepting (SIGSTOP),
// 1,500 real connections wait in its queue, and every reader of the kit still
// finds it: the live host facts (doctor, status, reload, logs, profile), the
// queue sampler node_exporter reads, and the runner's "already in use" message.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { runCommand } = require('../lib/util');
const { listeners } = require('../../lib/live/sockets');
const { unixHeldBy } = require('../../app/address');

const ROOT = path.resolve(__dirname, '../..');
const WAITING = 1500;

// A listener with room for every connection, stopped so that none is accepted.
async function stoppedListener(t, sock) {
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen({ path: ${JSON.stringify(sock)}, backlog: 4096 }, () => process.send('up'))`],
    { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  t.after(() => {
    try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
  });
  await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`the listener exited (${code}) before listening`)));
  });
  process.kill(child.pid, 'SIGSTOP');
  return child;
}

// n connections that the kernel completed into the stopped listener's queue.
async function queued(t, sock, n) {
  const conns = [];
  t.after(() => { for (const c of conns) c.destroy(); });
  await Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const c = net.connect(sock, resolve);
    c.once('error', reject);
    conns.push(c);
  })));
  return conns;
}

test(`a listener with ${WAITING} connections in its accept queue is still found by every reader, with its queue`, { timeout: 120000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-deep-queue-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'app.sock');
  const child = await stoppedListener(t, sock);
  await queued(t, sock, WAITING);

  // The host facts doctor, status, reload, logs and profile read.
  const mine = listeners().filter((l) => l.kind === 'unix' && l.local === sock);
  assert.equal(mine.length, 1, `listeners() does not list ${sock}`);
  assert.ok(mine[0].queued >= 1000, `queued ${mine[0].queued}`);
  assert.equal(mine[0].backlog, 4096);
  assert.deepEqual(mine[0].pids, [child.pid]);

  // The sampler's file for node_exporter: the queue, as deep as it is.
  const textfiles = path.join(dir, 'textfiles');
  fs.mkdirSync(textfiles);
  const r = await runCommand(process.execPath, [path.join(ROOT, 'metrics/queue-sampler.js'), '--textfile-dir', textfiles, '--unix', sock, '--once'], { timeoutMs: 60000 });
  assert.equal(r.code, 0, r.out);
  const text = fs.readFileSync(path.join(textfiles, fs.readdirSync(textfiles).find((f) => f.endsWith('.prom'))), 'utf8');
  const length = new RegExp(`^tunekit_listen_queue_length\\{[^}]*${sock.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}[^}]*\\} (\\d+)$`, 'm').exec(text);
  assert.ok(length, `no queue length for ${sock} in the sampler's file:\n${text}`);
  assert.ok(Number(length[1]) >= 1000, `the sampler's queue length: ${length[1]}`);

  // The runner's message when the path is taken: it names the holder.
  assert.match(unixHeldBy(sock), new RegExp(`pid ${child.pid}\\b`));
});
