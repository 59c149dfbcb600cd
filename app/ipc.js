'use strict';
// The messages between the runner's primary (cluster.js) and its workers
// (worker.js), named once. Each is an object { tunekit: <name>, ... }.

const MSG = Object.freeze({
  WANT_LISTEN: 'want-listen', // worker → primary: loaded, give me a listener
  LISTEN: 'listen', //           primary → worker: { via: 'handle' | 'cluster', address? } (+ handle)
  ACCEPT_MORE: 'accept-more', // primary → worker: (+ handle) another descriptor of the socket LISTEN sent, to accept through too
  ACCEPT_MORE_WANTED: 'accept-more-wanted', // worker → primary: { n }: it closed n of those (app/accepts.js), send n fresh ones
  LISTENING: 'listening', //     worker → primary: accepting; { source } names the app module
  FATAL: 'fatal', //             worker → primary: { error, open } before it exits 1 (open: requests it had open)
  DRAIN: 'drain', //             primary → worker: stop accepting, finish, exit
  METRICS: 'metrics', //         primary → worker: { seq }: send your sample (a scrape)
  METRICS_SAMPLE: 'metrics-sample', // worker → primary: { seq, sample } (app/metrics.js)
  HOLD: 'hold', //               worker → primary: { sustained, arrived, served, refused, windowMs, perRequestMs, utilization }: its held queue's and event loop's last second (app/shed-share.js)
});

// PM2's wait_ready convention: a bare 'ready' from a worker it runs.
const PM2_READY = 'ready';

module.exports = { MSG, PM2_READY };
