'use strict';
// Small helpers the suites share.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Every file under dir, as sorted paths relative to it ([] if dir is missing). */
function listFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p));
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out.sort();
}

/** Poll fn until it returns something truthy; throw naming `what` after timeoutMs. */
async function until(what, fn, timeoutMs = 30000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last && last.message ? last.message : last})`);
}

/**
 * Run a command to its end and collect what it printed: stdout, stderr, and `out`,
 * both interleaved in the order they arrived. SIGKILL after timeoutMs. `input`
 * is written to its stdin (closed at once otherwise). Never rejects: a command
 * killed by a signal reports code 128 and the signal.
 * @returns {Promise<{code:number, signal:string|null, stdout:string, stderr:string, out:string}>}
 */
function runCommand(cmd, args, { cwd, env, input, timeoutMs = 600000 } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd,
      env: env ? { ...process.env, ...env } : process.env,
      stdio: [input == null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const r = { code: 0, signal: null, stdout: '', stderr: '', out: '' };
    child.stdout.on('data', (d) => { r.stdout += d; r.out += d; });
    child.stderr.on('data', (d) => { r.stderr += d; r.out += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => { r.stderr += `${cmd}: ${err.message}\n`; });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ ...r, code: code ?? 128, signal });
    });
    if (input != null) {
      child.stdin.on('error', () => {}); // the command may exit without reading it
      child.stdin.end(input);
    }
  });
}

module.exports = { sleep, listFiles, until, runCommand };
