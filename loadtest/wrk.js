'use strict';
// The wrk driver (Debian's wrk 4.x), to cross-check autocannon: wrk is C, so
// it leaves more of a small machine's CPU to the server. wrk speaks TCP only
// (no Unix sockets), so it always drives nginx (or a TCP app port). Its
// latency figures come from its own microsecond histogram through the Lua
// done() hook in wrk-report.lua (wrk's `--latency` text table only has
// 50/75/90/99). Its CPU is this process's reaped-children time across the run.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runTool } = require('./tool');
const { MissingToolError } = require('../lib/errors');
const { reapedChildrenUs } = require('./cpu');

const WRK = '/usr/bin/wrk';
const SCRIPT = path.join(__dirname, 'wrk-report.lua');

function available(bin = WRK) {
  return fs.existsSync(bin);
}

// The JSON line wrk-report.lua prints, plus wrk's own "Requests/sec" line.
function parseOutput(stdout) {
  const line = stdout.split('\n').find((l) => l.startsWith('TUNEKIT_WRK '));
  if (!line) throw new Error(`wrk printed no result line; its output was:\n${stdout.slice(0, 2000)}`);
  const r = JSON.parse(line.slice('TUNEKIT_WRK '.length));
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  r.wrkReqPerSec = rps ? Number(rps[1]) : null;
  return r;
}

// A Lua string literal of any bytes: printable ASCII as is, the rest (and " and \)
// as three-digit decimal escapes, which Lua 5.1 and LuaJIT read alike.
function luaString(text) {
  const byte = (b) => (b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${String(b).padStart(3, '0')}`);
  return `"${[...Buffer.from(text)].map(byte).join('')}"`;
}

// A request mix (tunekit tune --paths): a script whose request() cycles each of
// wrk's threads through `paths`, with wrk's headers (-H among them), followed by
// wrk-report.lua's done(). wrk takes one script.
function mixScript(paths) {
  return [
    '-- The request mix of a tunekit run (loadtest/wrk.js): each thread cycles through it.',
    `local paths = { ${paths.map(luaString).join(', ')} }`,
    'local n = 0',
    'request = function()',
    '  n = n % #paths + 1',
    '  return wrk.format(nil, paths[n])',
    'end',
    '',
    fs.readFileSync(SCRIPT, 'utf8'),
  ].join('\n');
}

// Drive `url` over TCP for `duration` s with `connections` on `threads`.
// headers: extra request headers, e.g. ['Connection: close'] (a new connection per
// request; over HTTPS wrk then offers the session it had: resumption).
// paths: a request mix, each thread cycling through it (default: the url's path).
async function runWrk({ url, connections, duration, threads = 2, timeoutS = 10, headers = [], paths = null, bin = WRK, onProgress = () => {} }) {
  if (!available(bin)) throw new MissingToolError(`wrk not found at ${bin}; install it (apt-get install -y wrk) or use --driver autocannon`);
  const t = Math.max(1, Math.min(threads, connections));
  const mixDir = paths && paths.length ? fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-wrk-')) : null;
  const script = mixDir ? path.join(mixDir, 'mix.lua') : SCRIPT;
  if (mixDir) fs.writeFileSync(script, mixScript(paths));
  const args = ['-t', String(t), '-c', String(connections), '-d', `${duration}s`, '--timeout', `${timeoutS}s`,
    ...headers.flatMap((h) => ['-H', h]), '-s', script, url];
  const cpu0 = reapedChildrenUs();
  const started = Date.now();
  const tick = setInterval(() => onProgress(null, (Date.now() - started) / 1000), 1000);
  let stdout;
  try {
    stdout = await runTool(bin, args, (duration + timeoutS + 30) * 1000);
  } finally {
    clearInterval(tick);
    if (mixDir) fs.rmSync(mixDir, { recursive: true, force: true });
  }
  const cpuUs = reapedChildrenUs() - cpu0;
  const r = parseOutput(stdout);
  const elapsedS = r.durationUs / 1e6;
  const e = r.errors;
  return {
    driver: 'wrk',
    generator: { processes: 1, threads: t, cpuUs: Math.round(cpuUs), perProcessCpuShare: [cpuUs / 1e6 / elapsedS / t] },
    elapsedS,
    reqPerSec: r.requests / elapsedS,
    requests: {
      completed: r.requests,
      // wrk counts status >= 400 as errors.status; it does not split 3xx.
      ok: r.requests - e.status,
      non2xx: e.status,
      errors: e.connect + e.read + e.write,
      timeouts: e.timeout,
      // wrk names socket error kinds, not errno codes.
      kinds: Object.fromEntries([['connect error', e.connect], ['read error', e.read], ['write error', e.write],
        ['timeout', e.timeout], ['HTTP >= 400', e.status]].filter(([, n]) => n > 0)),
    },
    latencyUs: { count: r.requests - e.status, ...r.latencyUs },
    workers: null,
    raw: { wrkReqPerSec: r.wrkReqPerSec, socketErrors: e, bytes: r.bytes },
  };
}

module.exports = { runWrk, parseOutput, available, mixScript, luaString, WRK };
