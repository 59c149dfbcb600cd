'use strict';
// Finding a test's processes by a variable in their environment: test/run.js
// gives each test file TUNEKIT_TEST_TAG, which every process it starts inherits
// (unless it clears its environment), and test/lib/nspawn.js passes it, with
// TUNEKIT_TEST_HOST, to the init of each container it boots. What still carries
// a file's tag after the file ended was left behind.

const fs = require('node:fs');

/** The pids of the processes (this one excepted) whose environment holds KEY=VALUE. */
function taggedProcesses(key, value) {
  const want = `${key}=${value}`;
  const pids = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let env;
    try { env = fs.readFileSync(`/proc/${name}/environ`, 'latin1'); } catch { continue; }
    if (env.split('\0').includes(want)) pids.push(Number(name));
  }
  return pids.sort((a, b) => a - b);
}

module.exports = { taggedProcesses };
