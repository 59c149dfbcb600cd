'use strict';
// The app's unit on the systemd of each Debian release (its cached rootfs,
// chrooted in a private mount namespace: test/lib/nspawn.js runInRootfs).
// Rendered for that release's own systemd (tunekit_systemd_version, what the
// role reads with `systemctl --version`), it passes that release's
// `systemd-analyze verify` without a warning: RestartSteps= and
// RestartMaxDelaySec= from 254 on (trixie 257, sid), a fixed RestartSec= before
// (bookworm 252). And the unit rendered for 257 draws bookworm's
// "Unknown key 'RestartSteps' in section [Service]": why the unit is rendered for the host.
// Not bullseye: its systemd-analyze (247) will not start its manager outside a
// booted system ("Cannot determine cgroup we are running in"); its unit is the
// same as bookworm's, and the e2e suite boots it. The restarts themselves, on a
// booted host, are the e2e suite's too.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ensureRootfsAll, runInRootfs } = require('../lib/nspawn');

const SUITES = ['bookworm', 'trixie', 'sid'];
const { restart_steps: steps } = config.loadDefaults().tunekit_systemd_versions.features;
const versions = {}; // suite -> systemd version number

function tmpdir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The app's unit rendered for systemd `version` into a temp dir: its path. */
function unitFor(t, version) {
  const dir = tmpdir(t, `tunekit-systemd-${version}-`);
  const vars = config.resolve({ set: [`tunekit_systemd_version=${version}`] });
  renderer.render(vars, dir, { layers: ['systemd'] });
  return { dir, file: path.join(dir, 'etc/systemd/system', `${vars.tunekit_app_name}.service`) };
}

/** `systemd-analyze verify` of that release on a unit: what it printed (verify exits 0 on unknown keys). */
async function verify(suite, { dir, file }) {
  const r = await runInRootfs(suite, `SYSTEMD_LOG_COLOR=0 systemd-analyze verify ${file} 2>&1; echo "rc=$?"`, { binds: { [dir]: dir } });
  assert.equal(r.code, 0, `${suite}: ${r.stderr}`);
  const [rc, ...lines] = r.stdout.trim().split('\n').reverse();
  return { rc, out: lines.reverse().join('\n') };
}

test.before(async () => {
  await ensureRootfsAll(SUITES);
  await Promise.all(SUITES.map(async (suite) => {
    const r = await runInRootfs(suite, 'systemctl --version');
    versions[suite] = Number((/^systemd (\d+)/.exec(r.stdout) || [])[1]);
    assert.ok(versions[suite] > 0, `${suite}: systemctl --version said ${r.stdout}${r.stderr}`);
  }));
  process.stderr.write(`systemd: ${JSON.stringify(versions)}\n`);
});

for (const suite of SUITES) {
  test(`${suite}: its own systemd-analyze verifies the app's unit rendered for its version, without a warning`, async (t) => {
    const version = versions[suite];
    const unit = unitFor(t, version);
    const stepped = version >= steps.since;
    assert.equal(/^RestartSteps=/m.test(fs.readFileSync(unit.file, 'utf8')), stepped, `systemd ${version}: RestartSteps= ${stepped ? 'rendered' : 'left out'}`);
    const { rc, out } = await verify(suite, unit);
    assert.equal(rc, 'rc=0', out);
    assert.equal(out, '', `systemd ${version} (${suite}) warned`);
  });
}

test('both branches are exercised, and the stepped unit is refused by a systemd before 254 (bookworm\'s)', async (t) => {
  assert.ok(SUITES.some((s) => versions[s] >= steps.since) && SUITES.some((s) => versions[s] < steps.since), JSON.stringify(versions));
  const { out } = await verify('bookworm', unitFor(t, versions.trixie));
  assert.match(out, /Unknown key 'RestartSteps' in section \[Service\]/);
});
