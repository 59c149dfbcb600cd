'use strict';
// The runner as an ordinary user: the README's and the guide's "as yourself, no
// root" lines, run as written (from a checkout, with `node` on PATH) by the
// unprivileged user `nobody` with a home directory of its own. The socket is
// created in that home with the user's own group and mode 0660, answers HTTP,
// and is removed on SIGTERM. The guide's `app.js` is the reader's app: here the
// kit's example app, copied into the user's home.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const h = require('../fixtures/runner/harness');
const { users, group: lookupGroup } = require('../../lib/accounts');

// A checkout's `node bin/tunekit.js run` (README) or an installed `tunekit run` (the guide).
const AS_YOURSELF = /^mkdir -p "\$HOME\/\.run" && (node bin\/tunekit\.js|tunekit) run\b/;

/** The documented lines, where they are: [{ file, line, command }]. */
function documented() {
  const out = [];
  for (const file of ['README.md', 'docs/guide.md']) {
    fs.readFileSync(path.join(h.ROOT, file), 'utf8').split('\n').forEach((text, i) => {
      const command = text.replace(/\s+#.*$/, '').trim();
      if (AS_YOURSELF.test(command)) out.push({ file, line: i + 1, command });
    });
  }
  return out;
}

const nobody = users().has('nobody') ? { name: 'nobody', ...users().get('nobody') } : null;
const nogroup = nobody && lookupGroup(nobody.gid);
const skip = process.getuid() !== 0 ? 'needs root to run a command as the user nobody (setpriv)'
  : !nobody || !nogroup ? 'no user nobody with a primary group here'
    : spawnSync('setpriv', ['--reuid', String(nobody.uid), '--regid', String(nobody.gid), '--clear-groups', 'test', '-r', h.CLI]).status !== 0
      ? `nobody cannot read ${h.CLI} (a checkout under a private directory)` : false;

test('the docs show the no-root line in the README and the guide', () => {
  assert.deepEqual(documented().map((d) => d.file), ['README.md', 'docs/guide.md']);
});

for (const { file, line, command } of documented()) {
  test(`${file}:${line} works as an ordinary user: ${command}`, { skip }, async (t) => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-user-home-'));
    fs.chmodSync(home, 0o755);
    fs.chownSync(home, nobody.uid, nobody.gid);
    t.after(() => fs.rmSync(home, { recursive: true, force: true }));
    fs.copyFileSync(path.join(h.ROOT, 'app/example.js'), path.join(home, 'app.js'));
    // `app.js` in the guide is the reader's own app, in their working directory.
    // `tunekit` is this checkout's CLI (the README's alias), in the foreground: the
    // guide's log file and `&` are the reader's shell, not what is checked here
    // (test/integration/package.test.js runs the line as written, installed).
    const script = command.replace(/ run app\.js /, ` run "$HOME/app.js" `)
      .replace(/&& (node bin\/tunekit\.js|tunekit) run/, '&& exec node bin/tunekit.js run')
      .replace(/ >> app\.log 2>&1 &$/, '');
    const r = h.start(t, {
      via: 'argv',
      argv: ['setpriv', '--reuid', String(nobody.uid), '--regid', String(nobody.gid), '--clear-groups', 'sh', '-c', script],
      env: { HOME: home, TUNEKIT_LOG: 'json' },
    });
    await r.ready();
    const sock = path.join(home, '.run/app.sock');
    const st = fs.lstatSync(sock);
    assert.ok(st.isSocket());
    assert.deepEqual([st.uid, st.gid, (st.mode & 0o777).toString(8)], [nobody.uid, nobody.gid, '660'],
      `owned by ${nobody.name}:${nogroup.name}, mode 0660`);
    const reply = await h.request(sock);
    assert.equal(reply.status, 200);
    assert.equal(reply.json.ok, true);
    r.signal('SIGTERM');
    const { code } = await r.exited;
    assert.equal(code, 0, r.stderr);
    assert.equal(fs.existsSync(sock), false, 'the socket is removed on a clean stop');
  });
}
