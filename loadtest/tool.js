'use strict';
// Run a load generator (wrk, h2load) to its end: its stdout, or an error that
// names the command, how it ended and what it printed. A guard kills it after
// timeoutMs so that a hung generator cannot hang the run.

const { spawn } = require('node:child_process');

function runTool(bin, args, timeoutMs) {
  const name = bin.split('/').pop();
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const guard = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    // 'close', not 'exit': the process can end before its last output is read
    // ('close' waits for stdout and stderr to end; wrk's result line is the last).
    child.on('close', (code, signal) => {
      clearTimeout(guard);
      if (code === 0) resolve(out);
      else reject(new Error(`${name} ${args.join(' ')} failed (${signal || `exit ${code}`}): ${err.trim() || out.trim()}`));
    });
  });
}

module.exports = { runTool };
