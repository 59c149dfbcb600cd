'use strict';
// The installed package on a booted Debian 13 host: `tunekit render --out DIR`
// run there, then every command of the numbered steps it prints, as printed, as
// root, one after the other; then the app answers through nginx on :80 (step 8's
// curl) and `tunekit doctor` passes. The kit reaches the host as `npm install -g
// ./tunekit-VERSION.tgz` leaves it (PREFIX/lib/node_modules/tunekit and the bin
// link PREFIX/bin/tunekit, PREFIX /usr/local): the hosts have no network and no
// npm, so the install is made here (test/lib/package.js) and its tree copied.
// Step 8's "on another host" repack (npm pack of the installed folder) is run by
// test/integration/package.test.js.

const test = require('node:test');
const assert = require('node:assert/strict');
const { installed } = require('../lib/package');
const nspawn = require('../lib/nspawn');

const skip = process.getuid() !== 0 ? 'needs root (systemd-nspawn)' : false;

async function sh(host, cmd, timeoutMs = 120000) {
  const r = await host.ssh(cmd, { timeoutMs });
  assert.equal(r.code, 0, `\`${cmd}\` on ${host.name} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('installed on a Debian 13 host: render there, every printed step as printed, the app answers through nginx, doctor passes', { skip, timeout: 900_000 }, async (t) => {
  const kit = await installed();
  t.after(() => kit.cleanup());
  const hosts = await nspawn.bootHosts(1, { name: 'tkpkg' });
  t.after(() => nspawn.stopHosts(hosts));
  const [host] = hosts;

  // What npm install -g leaves under /usr/local.
  nspawn.copyInto(host, kit.home, 'usr/local/lib/node_modules/tunekit');
  await sh(host, 'ln -s ../lib/node_modules/tunekit/bin/tunekit.js /usr/local/bin/tunekit && command -v tunekit');

  const out = await sh(host, 'cd /root && tunekit render --out /root/host');
  const steps = out.slice(out.indexOf('Next, as root on the host:'));
  assert.doesNotMatch(steps, /npm ci|bin\/tunekit\.js/);
  const lines = steps.split('\n').filter((l) => /^ {5}\S/.test(l)).map((l) => l.trim());
  // The runner's copy comes from the installed package's own folder.
  assert.ok(lines.includes('mkdir -p /opt/tunekit-app && cp -r /usr/local/lib/node_modules/tunekit/app /opt/tunekit-app/'), lines.join('\n'));
  const ran = [];
  for (const line of lines) {
    await sh(host, line);
    ran.push(line);
  }
  t.diagnostic(`ran on ${host.name}:\n${ran.join('\n')}`);
  assert.ok(ran.some((l) => l.startsWith('tunekit sysctl apply ')) && ran.some((l) => l.startsWith('nginx -t && systemctl')), ran.join('\n'));

  // The unit is Type=exec: `systemctl enable --now` returns once node runs, before
  // a worker listens. The runner gives the socket its path once one does: wait for it.
  const ready = await host.ssh('for i in $(seq 600); do [ -S /run/tunekit-app/app.sock ] && exit 0; sleep 0.1; done; exit 1', { timeoutMs: 90000 });
  assert.equal(ready.code, 0, 'the app\'s socket /run/tunekit-app/app.sock within 60 s of its start');
  // Step 8, as printed: curl through nginx, then the audit.
  const last = /^ 8\. Check the result: (curl -s \S+) answers through nginx; (tunekit doctor) audits every layer/m.exec(steps);
  assert.ok(last, steps);
  const body = await sh(host, last[1]);
  let answer = null;
  try {
    answer = JSON.parse(body);
  } catch {
    // Not the app's answer: what the host says about it.
    const why = await host.ssh('curl -si http://127.0.0.1/ | head -5; systemctl status --no-pager tunekit-app | head -20; ' +
      'journalctl -u tunekit-app -n 30 --no-pager; tail -n 20 /var/log/nginx/*error.log; ls -l /run/tunekit-app', { timeoutMs: 60000 });
    assert.fail(`${last[1]} answered, not the app:\n${body.slice(0, 300)}\n${why.stdout}\n${why.stderr}`);
  }
  assert.equal(answer.ok, true, body);
  const doctor = await host.ssh(last[2], { timeoutMs: 120000 });
  assert.equal(doctor.code, 0, `${doctor.stdout}\n${doctor.stderr}`);
  assert.match(doctor.stdout, /^read: .*\/etc\/tunekit-app\/app\.json/m, 'doctor audited the app the steps installed');
});
