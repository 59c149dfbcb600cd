'use strict';
// Where a socket really is (app/address.js) and how the primary puts a Unix socket
// at its path (app/socket.js bindName, publish), on real sockets in this process:
// a TCP bind that failed is seen before anything listens on it, /proc/net reads
// back as written, a socket bound beside its path gets the path only while the path
// is free (or holds the stale file found at the start), and the name it keeps is
// read back as the path by lib/ and metrics/.
// test/integration/runner-listen.test.js and runner-rebind.test.js run the runner itself.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const address = require('../../app/address');
const sock = require('../../app/socket');
const { parseListen } = require('../../app/settings');
const { servedPath } = require('../../lib/proc');
const { runnerSettings } = require('../lib/fake-workers');

function tmp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-addr-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A listening server on loopback, closed after the test: its port. */
async function taken(t, host = '127.0.0.1') {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, host, resolve));
  t.after(() => srv.close());
  return srv.address().port;
}

test('a TCP bind that failed is seen before listen(): getsockname returns the deferred EADDRINUSE', async (t) => {
  const port = await taken(t);
  const handle = net._createServerHandle('127.0.0.1', port, 4);
  assert.equal(typeof handle, 'object', 'libuv reports no error at bind(): it keeps EADDRINUSE for listen()');
  t.after(() => handle.close());
  assert.deepEqual(address.tcpBound(handle), { error: 'EADDRINUSE' });
  assert.equal(address.handleFault(handle, parseListen(`tcp:127.0.0.1:${port}`)), 'its bind failed (EADDRINUSE)');
  assert.equal(address.handleFault(handle, parseListen('fd:3')), 'its bind failed (EADDRINUSE)');
});

test('a TCP handle bound elsewhere than asked, or not at all, is refused; bound where asked, it is not', async (t) => {
  const a = net._createServerHandle('127.0.0.1', 0, 4);
  t.after(() => a.close());
  const { port } = address.tcpBound(a);
  assert.equal(address.handleFault(a, parseListen(`tcp:127.0.0.1:${port}`)), null);
  assert.equal(address.handleFault(a, parseListen(`tcp:127.0.0.1:${port === 65535 ? 1 : port + 1}`)), `it is bound to tcp:127.0.0.1:${port}`);
  assert.equal(address.handleFault(a, parseListen('fd:3')), null, 'an inherited socket only has to be bound');
});

test('bindTcp refuses a taken port in one line naming the address and the fix', async (t) => {
  const port = await taken(t);
  const endpoint = parseListen(`tcp:127.0.0.1:${port}`);
  assert.throws(() => sock.bindTcp(endpoint), (err) => {
    assert.equal(err.code, 'EADDRINUSE');
    // The holder is this process, which the runner never names as its own holder.
    assert.equal(err.message, `tcp:127.0.0.1:${port} is already in use, held by another process (ss names none: a process of another user${process.getuid() !== 0 ? '; run ss -ltnp or ss -xlp as root to see it' : ''}): stop that process or choose another port (tunekit_app_tcp_port, --listen tcp:HOST:PORT)`);
    return true;
  });
});

test('bind errors other than a taken port name the cause and the fix', () => {
  const ep = (text) => parseListen(text);
  assert.match(address.tcpBindFailure(ep('tcp:127.0.0.1:80'), 'EACCES'),
    /^cannot bind tcp:127\.0\.0\.1:80: binding a port below \d+ needs root or CAP_NET_BIND_SERVICE; use a port >= \d+ .*AmbientCapabilities=CAP_NET_BIND_SERVICE/);
  assert.equal(address.tcpBindFailure(ep('tcp:localhost:3000'), 'EINVAL'),
    'cannot bind tcp:localhost:3000: HOST must be an IP address, not a name (tcp:127.0.0.1:3000 or tcp:[::1]:3000)');
  assert.match(address.tcpBindFailure(ep('tcp:10.255.255.1:3000'), 'EADDRNOTAVAIL'), /no interface of this host has the address 10\.255\.255\.1/);
});

test('/proc/net/tcp and tcp6 addresses read back as written (each 32-bit word in the host\'s byte order)', () => {
  const word = (hex) => (os.endianness() === 'LE' ? Buffer.from(hex, 'hex').reverse().toString('hex') : hex).toUpperCase();
  assert.deepEqual(address.procTcpAddress(`${word('7f000001')}:0050`, false), { address: '127.0.0.1', port: 80 });
  assert.deepEqual(address.procTcpAddress(`${word('00000000')}${word('00000000')}${word('00000000')}${word('00000001')}:0BB8`, true), { address: '::1', port: 3000 });
  assert.ok(address.sameHost('::1', '0:0:0:0:0:0:0:1'));
  assert.ok(!address.sameHost('127.0.0.1', '127.0.0.2'));
});

test('the kernel\'s view of this process\'s own listening socket: its address, and that it listens', async (t) => {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.after(() => srv.close());
  const s = address.socketOf(srv._handle.fd);
  assert.deepEqual(s, { kind: 'tcp', address: '127.0.0.1', port: srv.address().port, listening: true });
  assert.ok(address.ownListening().some((x) => x.kind === 'tcp' && x.port === srv.address().port));
});

test('a Unix socket is bound beside its path (PATH~PID) and gets the path only once published: link() while the path is free', (t) => {
  const dir = tmp(t);
  const p = path.join(dir, 'app.sock');
  const s = runnerSettings({ listen: `unix:${p}`, socketGroup: '' });
  const b = sock.bindUnix(p, s);
  t.after(() => b.handle.close());
  assert.equal(b.name, `${p}~${process.pid}`);
  assert.equal(b.published, false);
  assert.equal(fs.existsSync(p), false, 'nothing at the path before publish');
  assert.equal(fs.lstatSync(b.name).mode & 0o777, 0o660, 'mode from the first moment');
  assert.equal(b.handle.listen(8), 0);
  sock.publish(b);
  assert.deepEqual(fs.readdirSync(dir), ['app.sock'], 'the bind name is gone');
  assert.equal(BigInt(fs.lstatSync(p).ino), b.ino, 'the same file, now at the path');
  assert.equal(sock.pathState(b), 'ours');
  assert.equal(sock.release(b), 'removed', 'the identity read again after the link: released as ours');
});

test('publish never replaces a file that appeared at the path; it replaces, in one rename(), only the stale file found at the start', async (t) => {
  const dir = tmp(t);
  const p = path.join(dir, 'app.sock');
  const s = runnerSettings({ listen: `unix:${p}`, socketGroup: '' });

  const a = sock.bindUnix(p, s);
  t.after(() => a.handle.close());
  fs.writeFileSync(p, 'someone else\'s\n');
  assert.throws(() => sock.publish(a), { code: 'EADDRINUSE', message: `${p} was taken while the runner bound it: a regular file is there now; refusing to replace it: stop what put it there, or choose another socket path` });
  assert.equal(fs.readFileSync(p, 'utf8'), 'someone else\'s\n');
  assert.equal(a.published, false);
  fs.rmSync(p);
  fs.rmSync(a.name);

  // A stale socket file: bound and never listened on (as one whose process died).
  const stale = net._createServerHandle(p, -1, -1);
  t.after(() => stale.close());
  const found = await sock.inspectPath(p);
  assert.ok(found && found.stale, 'a socket nobody listens on is stale');
  const b = sock.bindUnix(p, s, { replaces: found.stale });
  t.after(() => b.handle.close());
  assert.equal(b.handle.listen(8), 0);
  sock.publish(b);
  assert.equal(BigInt(fs.lstatSync(p).ino), b.ino, 'renamed over the stale file');
  assert.deepEqual(fs.readdirSync(dir), ['app.sock']);
});

test('the name a published socket keeps is read back as its path (lib/proc.js servedPath; metrics/queue-sampler.js)', () => {
  const p = '/run/tunekit-app/app.sock';
  assert.equal(servedPath(sock.bindName(p, 123456)), p);
  assert.equal(servedPath(`${p}.2`), `${p}.2`);
  assert.equal(servedPath(sock.bindName(`${p}.2`, 7)), `${p}.2`);
  // A path with no room for the suffix is bound at the path itself.
  const long = `/tmp/${'x'.repeat(100)}`;
  assert.equal(Buffer.byteLength(long), 105);
  assert.equal(sock.bindName(long, 1234567), long);
});

test('leftovers of a runner that died before it published are removed; those of a live pid are not', (t) => {
  const dir = tmp(t);
  const p = path.join(dir, 'app.sock');
  const dead = net._createServerHandle(sock.bindName(p, 2 ** 22 + 1), -1, -1); // above pid_max: no such process
  t.after(() => dead.close());
  const live = net._createServerHandle(sock.bindName(p, process.ppid), -1, -1);
  t.after(() => live.close());
  assert.deepEqual(sock.removeLeftovers(p), [sock.bindName(p, 2 ** 22 + 1)]);
  assert.deepEqual(fs.readdirSync(dir), [path.basename(sock.bindName(p, process.ppid))]);
});
