'use strict';
// What the runner's meter counted during a run: its Prometheus endpoint
// (tunekit_metrics_listen) read once before and once after each run of a
// stack that has one, outside the measured window. The difference of
// tunekit_app_requests_total (every worker, every class) is the requests the
// meter saw; it must cover every response the driver counted, so a bench's
// metrics-on figures are those of a meter that counts, and is read, as
// Prometheus reads it.

const http = require('node:http');

const SCRAPE_TIMEOUT_MS = 5000;

/** Sum of tunekit_app_requests_total over every series of one scrape of `url`. */
function requestsCounted(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: SCRAPE_TIMEOUT_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        if (res.statusCode !== 200) {
          reject(new Error(`metrics endpoint ${url} answered HTTP ${res.statusCode}`));
          return;
        }
        let sum = 0;
        for (const m of text.matchAll(/^tunekit_app_requests_total\{[^}]*\} (\d+)$/gm)) sum += Number(m[1]);
        resolve(sum);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`metrics endpoint ${url}: no answer within ${SCRAPE_TIMEOUT_MS} ms`)));
    req.on('error', reject);
  });
}

/**
 * Run `fn` (a measurement) between two scrapes of `url`; the result gains
 * `metered: { url, requests }` and a warning when the meter counted fewer
 * requests than the driver's responses. `url` null: `fn` alone, metered null.
 */
async function withMeter(url, fn) {
  if (!url) return { ...(await fn()), metered: null };
  const before = await requestsCounted(url);
  const r = await fn();
  const requests = (await requestsCounted(url)) - before;
  const warnings = requests < r.requests.completed
    ? [...r.warnings, `the runner's meter counted ${requests} requests, fewer than the ${r.requests.completed} responses (${url})`]
    : r.warnings;
  return { ...r, warnings, metered: { url, requests } };
}

module.exports = { requestsCounted, withMeter };
