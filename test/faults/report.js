'use strict';
// The suite's own figures: each case records what it measured, and with
// TUNEKIT_FAULTS_REPORT=<file> set, the figures are merged into that JSON file
// (test/faults/table.js turns it into the table of docs/reliability.md).
const fs = require('node:fs');
const os = require('node:os');

function record(key, figures) {
  const file = process.env.TUNEKIT_FAULTS_REPORT;
  if (!file) return;
  let all = {};
  try { all = JSON.parse(fs.readFileSync(file, 'utf8')); } catch { /* first case writes it */ }
  all[key] = {
    ...figures,
    measured: new Date().toISOString(),
    machine: `${os.cpus().length} cores (${os.cpus()[0].model}), load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`,
  };
  fs.writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
}

module.exports = { record };
