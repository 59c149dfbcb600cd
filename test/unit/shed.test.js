'use strict';
// app/shed.js: the wait a request's X-Request-Start names, and when the runner
// sheds it; app/metrics.js: the shed count in the runner's exposition.

const test = require('node:test');
const assert = require('node:assert/strict');
const shed = require('../../app/shed');
const metrics = require('../../app/metrics');

const req = (value) => ({ headers: value === undefined ? {} : { 'x-request-start': value } });

test('X-Request-Start as nginx stamps it (t=$msec, seconds with millisecond resolution) and in the other spellings in use', () => {
  assert.equal(shed.requestStartMs('t=1417001234.123'), 1417001234123);
  assert.equal(shed.requestStartMs('1417001234.5'), 1417001234500);
  assert.equal(shed.requestStartMs('1417001234123'), 1417001234123, 'Heroku: integer milliseconds');
  assert.equal(shed.requestStartMs('t=1417001234123456'), 1417001234123.456, 'Apache t=%t: microseconds');
  for (const bad of [undefined, '', 't=', 't=abc', 't=-5', 'x=1417001234.123', '1417001234.123, 1417001235.000']) {
    assert.equal(shed.requestStartMs(bad), null, `${JSON.stringify(bad)} is no time`);
  }
});

test('a request is shed only when it carries a stamp and waited longer than a budget above 0', () => {
  const now = 1417001234123 + 250;
  assert.equal(shed.overBudget(req('t=1417001234.123'), 200, now), true, 'waited 250 ms, budget 200');
  assert.equal(shed.overBudget(req('t=1417001234.123'), 250, now), false, 'waited exactly the budget');
  assert.equal(shed.overBudget(req('t=1417001234.123'), 0, now), false, 'budget 0: never');
  assert.equal(shed.overBudget(req(undefined), 1, now), false, 'no header (the app reached without nginx): never');
  assert.equal(shed.overBudget(req('garbage'), 1, now), false, 'a header that is no time: never');
  assert.equal(shed.overBudget(req(`t=${(now + 5000) / 1000}`), 1, now), false, 'a stamp in the future waited nothing');
});

test('the runner exposes its shed requests by reason, 0 before the first', () => {
  const meter = metrics.createMeter();
  const text = () => metrics.render({ workers: [{ worker: 1, pid: 10, sample: metrics.sample(meter, {}) }] });
  assert.match(text(), /^# TYPE tunekit_app_shed_total counter$/m);
  assert.match(text(), /^tunekit_app_shed_total\{worker="1",pid="10",reason="queue_time"\} 0$/m);
  metrics.countShed(meter, 'queue_time');
  metrics.countShed(meter, 'queue_time');
  assert.match(text(), /^tunekit_app_shed_total\{worker="1",pid="10",reason="queue_time"\} 2$/m);
  meter.monitor.disable();
});
