'use strict';
// Requests that wait in the queue in front of a blocked app worker for longer
// than a budget, made by events rather than by the machine's speed. The app is
// test/fixtures/overload/queue-app.js (its only worker blocks its event loop on
// GET /block while HOLD_DIR/hold exists). The requests are sent, then the helper
// waits until nginx has taken every one (stub_status's Writing count; with one
// nginx worker a request counted there was stamped with X-Request-Start in the
// same call), then lets more than the budget pass before it releases the worker:
// every request nginx stamped has then waited longer than the budget, on any
// machine. Used by test/integration/overload-queue.test.js and the shedding case
// of test/faults/alerts.test.js.

const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { until } = require('./util');

const FIXTURE = path.join(__dirname, '../fixtures/overload/queue-app.js');
const WAIT_MS = 30000;

/** One GET (`url` through nginx, or `socketPath` straight to the app): { status, retryAfter, body }. */
function get({ url, socketPath, urlPath = '/', headers = {} }) {
  return new Promise((resolve, reject) => {
    const options = { agent: false, timeout: WAIT_MS, headers };
    const done = (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], body }));
    };
    const req = socketPath ? http.get({ ...options, socketPath, path: urlPath }, done) : http.get(url, options, done);
    req.on('timeout', () => req.destroy(new Error(`no answer to ${socketPath ? urlPath : url} within ${WAIT_MS} ms`)));
    req.on('error', reject);
  });
}

/** The fixture's HOLD_DIR, removed after the test; `held`: start with the worker's block armed. */
function holdDir(t, held = true) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-queue-'));
  fs.chmodSync(dir, 0o777);
  if (held) fs.writeFileSync(path.join(dir, 'hold'), '');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Requests whose handler ran, all workers. */
function seen(dir) {
  return fs.readdirSync(dir).filter((f) => f.startsWith('seen.'))
    .reduce((n, f) => n + Number(fs.readFileSync(path.join(dir, f), 'utf8')), 0);
}

/** nginx's requests in progress (stub_status's Writing, the status request itself included). */
async function writing(stack) {
  const v = stack.vars;
  const r = await get({ url: `http://127.0.0.1:${v.tunekit_nginx_status_port}${v.tunekit_nginx_status_path}` });
  return Number(/Writing: (\d+)/.exec(r.body)[1]);
}

/**
 * The app's worker blocked, `queued` requests through nginx (and, with `direct`,
 * one straight to the app's socket: no nginx, no X-Request-Start) waiting behind
 * it for longer than `budgetMs`; then the worker released. Returns the answers.
 */
async function queueBehindBlockedWorker(stack, dir, { queued, budgetMs, direct = false }) {
  fs.writeFileSync(path.join(dir, 'hold'), '');
  fs.rmSync(path.join(dir, 'blocked'), { force: true });
  const blocker = get({ url: `${stack.url}block` });
  await until('the app\'s worker to block', () => fs.existsSync(path.join(dir, 'blocked')), WAIT_MS, 20);
  const sent = Array.from({ length: queued }, (_, i) => get({ url: `${stack.url}queued/${i}` }));
  const straight = direct ? get({ socketPath: stack.socketPath, urlPath: '/direct' }) : null;
  // The blocker, the queued ones and this status request itself (a scrape of
  // stub_status by an exporter may be in progress too).
  await until(`nginx to hold ${queued + 1} proxied requests`, async () => (await writing(stack)) >= queued + 2, WAIT_MS, 20);
  // Each queued request was stamped before it was counted: once more than the
  // budget has passed since, each has waited longer than the budget.
  await new Promise((r) => setTimeout(r, 2 * budgetMs));
  fs.rmSync(path.join(dir, 'hold'));
  return { blocker: await blocker, queued: await Promise.all(sent), direct: straight && await straight };
}

module.exports = { FIXTURE, get, holdDir, seen, queueBehindBlockedWorker };
