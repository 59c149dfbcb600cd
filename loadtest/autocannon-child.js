'use strict';
// One autocannon generator process, forked by autocannon.js. It records every
// response into its own microsecond histogram (autocannon's `response` event
// gives the time in fractional ms from process.hrtime, measured from the write
// of the request to the end of the parsed response), counts which app worker
// answered (the example app's JSON body carries "pid":N), and sends the
// encoded histogram and counts to the parent, which merges all processes.
//
// Protocol (IPC): parent sends { opts }, child sends { type: 'tick', responses, elapsedS }
// once a second and { type: 'result', ... } at the end, then exits.

const autocannon = require('autocannon');
const H = require('./histogram');

const PID_KEY = Buffer.from('"pid":');

// A target that has answered nothing for this long while every request errors
// (refused, reset, timed out) has stopped: the generator stops early rather than
// fill the rest of the run with errors. Long enough to ride out a restart that
// refuses connections for a second or two.
const STALL_S = 3;

// Count every '"pid":N' in a chunk of response bytes (a chunk can hold more
// than one small response, and the key never appears in the headers).
function countPids(buf, byPid) {
  let n = 0;
  let i = buf.indexOf(PID_KEY);
  while (i !== -1) {
    let j = i + PID_KEY.length;
    let pid = 0;
    while (j < buf.length && buf[j] >= 48 && buf[j] <= 57) pid = pid * 10 + (buf[j++] - 48);
    if (j > i + PID_KEY.length) {
      byPid[pid] = (byPid[pid] || 0) + 1;
      n++;
    }
    i = buf.indexOf(PID_KEY, j);
  }
  return n;
}

function headerObject(lines) {
  if (!lines || !lines.length) return undefined;
  return Object.fromEntries(lines.map((h) => {
    const i = h.indexOf(':');
    return [h.slice(0, i).trim(), h.slice(i + 1).trim()];
  }));
}

function run(opts) {
  const histogram = H.createHistogram();
  const byPid = {};
  const counts = { responses: 0, ok: 0, non2xx: 0, sampled: 0 };
  const kinds = {};
  const count = (kind) => { kinds[kind] = (kinds[kind] || 0) + 1; };
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const now = () => Number(process.hrtime.bigint() - t0) / 1e9;
  // Seconds since the start of the last response, and errors since then.
  let lastResponseS = 0;
  let errorsSince = 0;
  let stalled = null;

  const instance = autocannon({
    url: opts.url,
    socketPath: opts.socketPath || undefined,
    connections: opts.connections,
    duration: opts.duration,
    overallRate: opts.rate || undefined,
    timeout: opts.timeoutS,
    pipelining: 1,
    // Extra request headers, "Name: value" as wrk takes them (tunekit tune --gzip).
    headers: headerObject(opts.headers),
    // A request mix (tunekit tune --paths): each connection cycles through the paths.
    requests: opts.paths && opts.paths.length ? opts.paths.map((p) => ({ method: 'GET', path: p })) : undefined,
    setupClient: opts.workerShare
      ? (client) => client.on('body', (buf) => { counts.sampled += countPids(buf, byPid); })
      : undefined,
  }, (err, result) => {
    const elapsedS = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    if (err) {
      process.send({ type: 'error', message: err.message }, () => process.exit(1));
      return;
    }
    process.send({
      type: 'result',
      pid: process.pid,
      elapsedS,
      cpuUs: cpu.user + cpu.system,
      histogram: H.encode(histogram),
      responses: counts.responses,
      ok: counts.ok,
      non2xx: counts.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      sampled: counts.sampled,
      kinds,
      byPid,
      stalled,
    }, (sendErr) => {
      // A result the parent never got is a failed run, said as such, not a clean exit.
      if (sendErr) process.stderr.write(`autocannon generator ${process.pid}: its result could not be sent: ${sendErr.message}\n`);
      process.exit(sendErr ? 3 : 0);
    });
  });

  instance.on('response', (client, statusCode, resBytes, responseTime) => {
    counts.responses++;
    lastResponseS = now();
    errorsSince = 0;
    if (statusCode >= 200 && statusCode < 300) {
      counts.ok++;
      H.recordMs(histogram, responseTime);
    } else {
      counts.non2xx++;
      count(`HTTP ${statusCode}`);
    }
  });
  // autocannon reports a timeout as an Error without a code.
  instance.on('reqError', (err) => {
    errorsSince++;
    count(err.code || (/timed out/.test(err.message) ? 'timeout' : err.message));
  });
  instance.on('tick', () => {
    const t = now();
    process.send({ type: 'tick', responses: counts.responses, elapsedS: t });
    if (!stalled && errorsSince > 0 && t - lastResponseS >= STALL_S) {
      stalled = { atS: t, lastResponseS, errors: errorsSince };
      instance.stop();
    }
  });
}

if (require.main === module) {
  process.once('message', (msg) => run(msg.opts));
  // The parent going away ends this generator too.
  process.on('disconnect', () => process.exit(2));
}

module.exports = { countPids, STALL_S };
