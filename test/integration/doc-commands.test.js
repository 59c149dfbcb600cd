'use strict';
// Every command in the project's docs works as written (test/lib/doccheck.js
// runs each one, or names why it cannot run here).

const test = require('node:test');
const assert = require('node:assert/strict');
const { check, verdict, commands } = require('../lib/doccheck');

test('every documented command runs as written, or is exempt with a reason', { timeout: 600_000 }, () => {
  const results = check();
  const ran = results.filter((r) => !r.exempt);
  assert.ok(ran.length >= 5, `${ran.length} commands run`);
  const failed = ran.filter((r) => !r.ok).map((r) => `${r.file}:${r.line} ${r.command}: ${r.problems.join('; ')}\n${r.stderr.trim().split('\n').slice(-3).join('\n')}`);
  assert.deepEqual(failed, []);
  for (const r of results.filter((x) => x.exempt)) assert.ok(r.exempt.length > 10, `${r.command} says why it is exempt`);
});

test('the doc-check finds the commands and would catch one that fails', () => {
  const found = commands(['nginx/README.md']).map((c) => c.command);
  assert.ok(found.includes('nginx -t -c /tmp/t/etc/nginx/nginx.conf'), found.join('\n'));
  // A subcommand without its arguments prints usage and exits 2: a failure.
  const { runOne } = require('../lib/doccheck');
  const r = runOne('node bin/tunekit.js sysctl', require('node:os').tmpdir());
  assert.equal(r.ok, false);
  assert.deepEqual(r.problems, ['exit 2, expected 0']);
  assert.deepEqual(verdict('node bin/tunekit.js render --out DIR --vars FILE.yml').exempt !== undefined, true);
  assert.deepEqual(verdict('node bin/tunekit.js bench --help'), { run: true });
});

test('tunekit --version prints the version of package.json', () => {
  const path = require('node:path');
  const { spawnSync } = require('node:child_process');
  const root = path.resolve(__dirname, '../..');
  const r = spawnSync(process.execPath, [path.join(root, 'bin/tunekit.js'), '--version'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.equal(r.stdout, `tunekit ${require('../../package.json').version}\n`);
});
