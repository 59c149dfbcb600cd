'use strict';
// Who served a run, counted by the runner: its metrics endpoint
// (tunekit_metrics_listen; app/metrics.js) read once before and once after each
// run of a stack that has one, outside the measured window (measure.js). The
// change of tunekit_app_requests_total per worker (its pid label, every class)
// is each worker's share, whatever the app writes in its answers. It must also
// cover every response the driver counted: the meter is then read as Prometheus
// reads it.

const http = require('node:http');

const SCRAPE_TIMEOUT_MS = 5000;
const SAMPLE = /^tunekit_app_requests_total\{([^}]*)\} (\d+)$/gm;

/** { pid: requests } of one scrape of `url`: tunekit_app_requests_total summed per worker pid. */
function requestsByPid(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: SCRAPE_TIMEOUT_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        if (res.statusCode !== 200) {
          reject(new Error(`answered HTTP ${res.statusCode}`));
          return;
        }
        const byPid = {};
        for (const m of text.matchAll(SAMPLE)) {
          const pid = /(?:^|,)pid="(\d+)"/.exec(m[1]);
          if (pid) byPid[pid[1]] = (byPid[pid[1]] || 0) + Number(m[2]);
        }
        resolve(byPid);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${SCRAPE_TIMEOUT_MS} ms`)));
    req.on('error', reject);
  });
}

/**
 * The runner's count between two scrapes, as a driver's body count is shaped:
 * { sampled: requests counted, byPid: { pid: requests } }. A worker seen only in
 * `after` (started during the run) counts from zero.
 */
function counted(before, after) {
  const byPid = {};
  for (const [pid, n] of Object.entries(after)) byPid[pid] = n - (before[pid] || 0);
  return { sampled: Object.values(byPid).reduce((a, b) => a + b, 0), byPid };
}

/**
 * Scrape `url` around `fn` (the driven run): { value: fn's result, counts, error }.
 * counts null and error the reason when the endpoint did not answer (the run is
 * measured all the same; who served it is not known).
 */
async function aroundRun(url, fn) {
  let before = null;
  let error = null;
  try {
    before = await requestsByPid(url);
  } catch (err) {
    error = err.message;
  }
  const value = await fn();
  if (error) return { value, counts: null, error };
  try {
    return { value, counts: counted(before, await requestsByPid(url)), error: null };
  } catch (err) {
    return { value, counts: null, error: err.message };
  }
}

module.exports = { requestsByPid, counted, aroundRun };
