'use strict';
// The oldest Node the kit runs on, and the check each entry point makes before it
// loads anything else (bin/tunekit.js, app/cluster.js). Written for any Node from
// 8 on: no `node:` requires, no `??` or `?.`, so an old Node prints one line that
// names its version and the minimum, instead of a stack trace from a missing API.
//
// 18.19.0 is the oldest Node 18 a supported distribution ships (Ubuntu 24.04;
// Debian 12 has 18.20). package.json's "engines" and the Ansible role's check read
// this value (test/unit/node-version.test.js keeps engines equal to it).

var MIN_NODE = '18.19.0';

function parts(version) {
  return String(version).replace(/^v/, '').split('.').map(Number);
}

/** True when version (e.g. "12.22.12") is older than MIN_NODE. */
function tooOld(version) {
  var have = parts(version);
  var need = parts(MIN_NODE);
  for (var i = 0; i < need.length; i++) {
    if ((have[i] || 0) !== need[i]) return (have[i] || 0) < need[i];
  }
  return false;
}

/** Exit 1 with one line on stderr when this Node is too old. */
function requireSupportedNode(program) {
  if (!tooOld(process.versions.node)) return;
  process.stderr.write(program + ': Node ' + process.versions.node + ' is too old; tunekit needs Node ' + MIN_NODE +
    ' or newer (Debian 12 and Ubuntu 24.04 ship one; or install a newer Node and run it instead)\n');
  process.exit(1);
}

module.exports = { MIN_NODE: MIN_NODE, tooOld: tooOld, requireSupportedNode: requireSupportedNode };
