'use strict';
// The project stands alone: no file of it points a reader at material outside
// the repository (notes of the team that built it, articles by internal
// number, bare issue numbers). Public sources are cited by title or URL.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');

const ROOT = path.resolve(__dirname, '../..');

// Each rule: what a reader could not follow, and the pattern that finds it.
const OUTSIDE = [
  ['a "seed" article by number', /\bseed[- ]?(article )?0\d\d\b|\bseed's\b|\bthe seed\b/i],
  ['the team\'s mission or style notes', /\b(MISSION|STYLE)\.md\b/],
  ['a folder outside the repository', /\.\.\/shared\b|\/work\/shared\b/],
  // A GitHub issue is cited by URL (…/issues/123), never as "issue 123".
  ['a bare issue number', /(?<![/\w])issues? ?#?\d+\b/i],
];

// The files of the project: tracked and new, not ignored (so node_modules
// and .venv are out).
function projectFiles() {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\n').filter((f) => f && f !== 'package-lock.json' && f !== path.relative(ROOT, __filename))
    .filter((f) => fs.existsSync(path.join(ROOT, f)));
}

test('no file of the project refers to material outside the repository', () => {
  const found = [];
  for (const f of projectFiles()) {
    const text = fs.readFileSync(path.join(ROOT, f));
    if (text.includes(0)) continue; // binary
    text.toString('utf8').split('\n').forEach((line, i) => {
      for (const [what, re] of OUTSIDE) if (re.test(line)) found.push(`${f}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
    });
  }
  assert.deepEqual(found, []);
});

test('the rules catch what they are meant to', () => {
  const hits = (line) => OUTSIDE.filter(([, re]) => re.test(line)).map(([what]) => what);
  // The samples are put together from words, so that this file does not
  // itself read as such a reference to anyone who searches the tree.
  const say = (...words) => words.join(' ');
  assert.deepEqual(hits(say('as', 'seed', '004', 'says')), ['a "seed" article by number']);
  assert.deepEqual(hits(`see ${['..', 'shared', ['MISSION', 'md'].join('.')].join('/')}`), ['the team\'s mission or style notes', 'a folder outside the repository']);
  assert.deepEqual(hits(say('fixed in', 'issue', '4')), ['a bare issue number']);
  assert.deepEqual(hits('https://github.com/Unitech/pm2/issues/3310'), []);
});
