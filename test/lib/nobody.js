'use strict';
// The kit's CLI run by the unprivileged user nobody (setpriv), as a user on a
// shared host runs it: what a command says when it needs root, or meets a path of
// another user's. The tests themselves run as root (setpriv needs it).
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { users } = require('../../lib/accounts');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'bin/tunekit.js');
const nobody = users().get('nobody') || null;
/** The argv prefix that runs a command as nobody:nogroup, no other groups. */
const AS_NOBODY = nobody ? ['setpriv', '--reuid', String(nobody.uid), '--regid', String(nobody.gid), '--clear-groups'] : null;

/** Why the CLI cannot run as nobody here (a test's skip reason), or false. */
const skipNobody = process.getuid() !== 0 ? 'needs root to run the CLI as the user nobody (setpriv)'
  : !nobody ? 'no user nobody here'
    : spawnSync(AS_NOBODY[0], [...AS_NOBODY.slice(1), 'test', '-r', CLI]).status !== 0 ? `nobody cannot read ${CLI} (a checkout under a private directory)` : false;

/**
 * `tunekit ARGS` from the kit's folder (so it names itself `node bin/tunekit.js`
 * in what it prints), as nobody, or as the test's own user with asRoot.
 * @returns {{status: number, stdout: string, stderr: string}}
 */
function tunekit(args, { asRoot = false } = {}) {
  const argv = [...(asRoot ? [] : AS_NOBODY), process.execPath, CLI, ...args];
  return spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', cwd: ROOT });
}

module.exports = { CLI, nobody, AS_NOBODY, skipNobody, tunekit };
