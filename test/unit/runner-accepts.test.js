'use strict';
// app/accepts.js: the worker's extra descriptors of its listening socket are held
// closed to epoll while the loop turns quickly (one accept a turn: a burst of new
// connections spreads over the workers), opened by a slow turn (the queue must
// drain), closed again after a quiet spell and replaced by fresh ones from the
// primary. Made-up turns on a made-up clock; the real sockets are in
// test/integration/runner-accept.test.js.

const test = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { createAccepts, SLOW_TURN_MS, QUIET_MS } = require('../../app/accepts');

function world() {
  const clock = { t: 0 };
  const w = { listened: [], asked: [], clock };
  w.handle = (id) => ({ id, closed: false, close() { this.closed = true; } });
  w.accepts = createAccepts({
    now: () => clock.t,
    ask: (n) => w.asked.push(n),
    listen: (handle) => {
      // An acceptor holding `connections`: close(cb) calls back once they are gone.
      const a = new EventEmitter();
      Object.assign(a, { handle, connections: 0, closed: false });
      a.close = (cb) => {
        a.closed = true;
        if (cb) a.once('close', cb);
        if (a.connections === 0) setImmediate(() => a.emit('close'));
      };
      a.lose = () => { if (--a.connections === 0 && a.closed) a.emit('close'); };
      w.listened.push(a);
      return a;
    },
  });
  return w;
}

test('handles are held, not listened on, while turns are quick', () => {
  const w = world();
  for (let i = 0; i < 31; i++) w.accepts.add(w.handle(i));
  for (let i = 0; i < 100; i++) { w.clock.t += 100; w.accepts.turn(SLOW_TURN_MS - 1); }
  assert.equal(w.listened.length, 0, 'no extra descriptor listens: one accept a turn');
  assert.equal(w.accepts.descriptors, 31, 'all 31 still count as open files');
  assert.equal(w.accepts.wide, false);
});

test('one slow turn opens every held descriptor at once; a handle arriving then is opened at once too', () => {
  const w = world();
  for (let i = 0; i < 31; i++) w.accepts.add(w.handle(i));
  w.clock.t += 100;
  w.accepts.turn(SLOW_TURN_MS);
  assert.equal(w.listened.length, 31);
  assert.equal(w.accepts.wide, true);
  w.accepts.add(w.handle(99));
  assert.equal(w.listened.length, 32);
  assert.equal(w.accepts.descriptors, 32);
});

test('quick turns for QUIET_MS after the last slow one close them and ask the primary for as many', async () => {
  const w = world();
  for (let i = 0; i < 31; i++) w.accepts.add(w.handle(i));
  w.accepts.turn(200); // slow at t=0
  w.clock.t = QUIET_MS / 2;
  w.accepts.turn(SLOW_TURN_MS + 10); // slow again: the quiet spell starts over
  w.clock.t = QUIET_MS / 2 + QUIET_MS - 1;
  w.accepts.turn(0);
  assert.equal(w.accepts.wide, true, 'not yet quiet for QUIET_MS');
  assert.deepEqual(w.asked, []);
  w.clock.t += 1;
  w.accepts.turn(0);
  assert.equal(w.accepts.wide, false);
  assert.ok(w.listened.every((a) => a.closed), 'every extra acceptor closed');
  assert.deepEqual(w.asked, [31], 'asked for 31 fresh descriptors');
  assert.equal(w.accepts.descriptors, 0);
  // The fresh ones are held until the next slow turn.
  for (let i = 0; i < 31; i++) w.accepts.add(w.handle(100 + i));
  assert.equal(w.listened.length, 31, 'held, not listened on');
  w.accepts.turn(SLOW_TURN_MS);
  assert.equal(w.listened.length, 62);
});

test('end(): held handles closed, open acceptors closed, and it waits for the connections of those still closing', async () => {
  const w = world();
  for (let i = 0; i < 3; i++) w.accepts.add(w.handle(i));
  w.accepts.turn(SLOW_TURN_MS);
  const [a] = w.listened;
  a.connections = 1; // a keep-alive connection accepted through it
  w.clock.t = QUIET_MS;
  w.accepts.turn(0); // narrowed: `a` is closing, its connection still open
  const held = w.handle('held');
  w.accepts.add(held);
  let done = false;
  const ended = w.accepts.end().then(() => { done = true; });
  assert.equal(held.closed, true);
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(done, false, 'still waiting for the connection accepted through a closing acceptor');
  a.lose();
  await ended;
  const late = w.handle('late');
  w.accepts.add(late);
  assert.equal(late.closed, true, 'a handle arriving after end() is closed, not held');
});

test('keepWide (a worker that holds its queue): every descriptor listens at once and stays open through any quiet spell', () => {
  const w = world();
  for (let i = 0; i < 31; i++) w.accepts.add(w.handle(i));
  w.accepts.keepWide();
  assert.equal(w.listened.length, 31);
  w.accepts.add(w.handle(99));
  assert.equal(w.listened.length, 32, 'a handle arriving later listens at once');
  for (let i = 0; i < (QUIET_MS / 100) * 3; i++) { w.clock.t += 100; w.accepts.turn(0); }
  assert.equal(w.accepts.wide, true, 'still open after three quiet spells');
  assert.deepEqual(w.listened.filter((a) => a.closed), []);
  assert.deepEqual(w.asked, [], 'nothing closed, nothing asked of the primary');
});
