'use strict';
// The Node floor is defined once (app/node-version.js); package.json's engines
// must say the same, and the comparison must order versions numerically.
const test = require('node:test');
const assert = require('node:assert/strict');
const { MIN_NODE, tooOld } = require('../../app/node-version');
const pkg = require('../../package.json');

test("package.json's engines.node is the runner's minimum", () => {
  assert.equal(pkg.engines.node, `>=${MIN_NODE}`);
});

test('tooOld compares numerically, component by component', () => {
  assert.equal(tooOld('12.22.12'), true);
  assert.equal(tooOld('18.12.1'), true);
  assert.equal(tooOld('18.19.0'), false);
  assert.equal(tooOld('18.20.4'), false);
  assert.equal(tooOld('20.19.2'), false);
  assert.equal(tooOld('v24.22.2'), false);
  assert.equal(tooOld('9.0.0'), true);
});
