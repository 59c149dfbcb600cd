'use strict';
// Overload protection by queue time (settings.queueBudgetMs, from
// tunekit_app_queue_budget_ms): how long a request waited before the worker's
// handler got it, read from the X-Request-Start header nginx stamps on every
// request it proxies (proxy.conf: "t=${msec}", seconds since the epoch with
// millisecond resolution, https://nginx.org/en/docs/http/ngx_http_core_module.html#var_msec).
// nginx replaces whatever a client sent in that header, so only nginx's stamp
// reaches the app through it. nginx takes $msec when it builds the request for
// the app (after it has read a buffered body): the wait is the time in nginx's
// hands, the app socket's accept queue and the worker's event loop, the queue an
// overloaded app builds. nginx and the app read the same clock: the kit runs
// them on one host (Unix socket, or TCP on loopback).
//
// The header's other spellings in use are read too (a proxy in front that stamps
// its own): Heroku's router sends integer milliseconds, Apache's mod_headers
// "t=%t" microseconds; the unit is told by the number's size, as APM agents do.
// A header that is absent or not a time gives no wait: the request is never shed.

// Seconds since the epoch stay below 1e11 until the year 5138; milliseconds below
// 1e14 until then too; above that, microseconds.
const SECONDS_BELOW = 1e11;
const MILLISECONDS_BELOW = 1e14;

/** The epoch milliseconds an X-Request-Start value names, or null. */
function requestStartMs(value) {
  if (typeof value !== 'string') return null;
  const m = /^\s*(?:t=)?(\d+(?:\.\d+)?)\s*$/.exec(value);
  if (!m) return null;
  const n = Number(m[1]);
  if (n < SECONDS_BELOW) return n * 1000;
  if (n < MILLISECONDS_BELOW) return n;
  return n / 1000;
}

/** How long (ms) the request waited before `nowMs`, or null when it carries no stamp. */
function queueWaitMs(req, nowMs) {
  const start = requestStartMs(req.headers['x-request-start']);
  return start === null ? null : nowMs - start;
}

/** Whether a request waited longer than the budget (a budget of 0 never sheds). */
function overBudget(req, budgetMs, nowMs) {
  if (!(budgetMs > 0)) return false;
  const waited = queueWaitMs(req, nowMs);
  return waited !== null && waited > budgetMs;
}

/**
 * Answer a shed request: 503 with Retry-After, a one-line body that says why.
 * Its body, if any, is left to Node, which reads and drops it once the response
 * has ended, so the connection stays usable for nginx's next request.
 */
function answerShed(res, retryAfterS, budgetMs, reason = 'queue_time', sustainedAfterS = 0) {
  const why = reason === 'sustained'
    ? `the app has been past its capacity for ${sustainedAfterS} s or more, and its queue already held more than ${budgetMs} ms of waiting`
    : `this request waited longer than the app's queue budget (${budgetMs} ms) before the app could take it`;
  const body = `503 Service Unavailable: ${why}; retry after ${retryAfterS} s\n`;
  res.writeHead(503, {
    'retry-after': String(retryAfterS),
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

module.exports = { requestStartMs, queueWaitMs, overBudget, answerShed };
