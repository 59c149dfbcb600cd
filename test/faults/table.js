#!/usr/bin/env node
'use strict';
// Turn the fault suite's figures (the JSON written with TUNEKIT_FAULTS_REPORT)
// into the table of docs/reliability.md, between its faults:begin/end markers.
//   node test/faults/table.js faults.json           print the table
//   node test/faults/table.js faults.json --write   rewrite docs/reliability.md and keep the
//                                                   figures in docs/reliability.json
// test/unit/reliability-doc.test.js checks that the doc's table is the one
// docs/reliability.json gives.
// The prose of each row (what the client sees, the log, doctor, the mitigation)
// lives here, next to the figures it explains; the figures come only from the JSON.
const fs = require('node:fs');
const path = require('node:path');

const DOC = path.join(__dirname, '../../docs/reliability.md');
const FIGURES = path.join(__dirname, '../../docs/reliability.json');
const BEGIN = '<!-- faults:begin (node test/faults/table.js faults.json --write) -->';
const END = '<!-- faults:end -->';

const pct = (n, of) => `${((100 * n) / of).toFixed(3)}%`;

// The plain reload, and the server-side settings tried against it (the same
// test with TUNEKIT_FAULTS_SET or TUNEKIT_FAULTS_NGINX_MAIN), each judged against
// the plain one: kept only if it removes resets without costing throughput.
function reloadRow(key, f, all) {
  const base = all.reload;
  const trial = key !== 'reload';
  const measured = [
    `${f.reloads} reloads in ${f.seconds} s, ${f.connectionsPerClient} connections per client, 3 clients at once:`,
    `no retry: ${f.raw.failed} of ${f.raw.requests} failed (${pct(f.raw.failed, f.raw.requests)})${f.raw.failed ? ', all resets' : ''};`,
    `retry on a reused connection: ${f.retryReused.failed} of ${f.retryReused.requests} failed (resets of fresh connections: ${f.retryReused.resetsOfFresh});`,
    `retry on any reset: ${f.retryAny.failed} of ${f.retryAny.requests} failed (${f.retryAny.retried} retried).`,
    `nginx error log at ${f.errorLogLevel}: ${f.errorLogLines} lines.`,
    stamp(f),
  ].join(' ');
  let mitigation = 'clients retry an idempotent request once on a reset, on a new connection; no server-side setting tried (the rows below) removes the resets for free';
  if (trial && base) {
    const share = `${(f.raw.requests / base.raw.requests).toFixed(2)}x`;
    mitigation = f.raw.resets === 0
      ? `removes the resets: with no client keep-alive there is no idle connection for an old worker to close; but every request pays a new connection: ${share} the plain reload's requests in the same time. Not kept`
      : `no help: ${f.raw.resets} resets against ${base.raw.resets} without it, at ${share} its requests. Not kept`;
  }
  return [
    trial ? `nginx reload under load, tuned with ${key.slice('reload '.length)}` : 'nginx reload (SIGHUP) under load, tuned',
    f.raw.resets === 0
      ? 'nothing: no reset, no 5xx'
      : 'ECONNRESET (or "socket hang up") on a request sent on a keep-alive connection an old worker just closed; never a 5xx',
    'nothing at warn (client resets are logged at info)',
    'nothing: the stack is healthy before and after',
    mitigation,
    measured,
  ];
}

const stamp = (f) => `${f.machine}, ${f.measured.slice(0, 16)}Z. \`${f.command}\``;

const counts = (c) => Object.entries(c).map(([k, v]) => `${v} x ${k}`).join(', ');

// What a client sees while new upstream connections fail and pooled ones still work.
const POOLED_ONLY = 'requests on nginx\'s pooled upstream connections still get 200; those needing a new upstream connection get 502';

// Two cases share the row function: the runner's check on (the kit's default), and off.
function socketDeletedRow(key, f) {
  if (key === 'socket-deleted check-off') {
    return [
      'app socket file deleted under a running stack, the runner\'s check off (tunekit_app_socket_check_ms=0)',
      `${POOLED_ONLY}, until the app is restarted`,
      `\`${f.nginx}\``,
      `fail: ${f.doctor}; fix: ${f.fix}`,
      'none with the check off: restart the app',
      `16 requests at once after the delete: ${counts(f.burst)}; ${f.waitedMs} ms later: ${counts(f.later)}. ${stamp(f)}`,
    ];
  }
  return [
    'app socket file deleted under a running stack',
    `until the runner binds the path again (it checks every ${f.checkMs} ms): ${POOLED_ONLY}; then 200 again, without a restart`,
    f.nginx ? `\`${f.nginx}\`, until then` : 'nothing',
    `after the re-bind: ${f.doctorAfter.length ? `fail: ${f.doctorAfter.join(', ')}` : 'no fail'}; while the file is gone, socket-deleted, as with the check off (next row)`,
    `the runner checks its socket path every tunekit_app_socket_check_ms (${f.checkMs} ms), binds a deleted one again with its mode and group and moves its workers onto it (the warm spare first), strategies shared and per-worker; round-robin logs socket-gone: restart the app`,
    [
      `16 requests at once right after the delete: ${counts(f.burst)}.`,
      `Then bursts 20 ms apart: the first all 200 of ${f.backRun} in a row (one alone may be served on pooled connections only) ended ${f.back.ms} ms after the unlink (burst ${f.back.bursts}).`,
      `The runner logged socket-rebound with the file missing ${f.missingMs.atLeast == null ? 'up to ' : `${f.missingMs.atLeast}-`}${f.missingMs.atMost} ms as far as it could tell, and had moved both workers ${f.movedMs} ms after the unlink.`,
      stamp(f),
    ].join(' '),
  ];
}

// The socket deleted under load through nginx: a steady load served on nginx's pool,
// and one that makes nginx open new upstream connections all along.
function socketRebindRow(key, f) {
  const churn = key !== 'socket-rebind steady';
  const spare = f.spareWorkers ? '' : ', no warm spare (tunekit_app_spare_workers=0): the new socket waits for a fresh worker';
  return [
    churn
      ? `app socket file deleted under a load that makes nginx open an upstream connection for nearly every request (${f.connections} client connections, each request held 20 ms by the app, tunekit_nginx_upstream_keepalive=${f.upstreamKeepalive})${spare}`
      : `app socket file deleted under a steady load (${f.connections} client keep-alive connections, the kit's upstream pool of ${f.upstreamKeepalive} per nginx worker)`,
    f.failed
      ? `502 for the requests that needed a new upstream connection while the path was gone (${f.failed}, started ${f.failedMs[0]}-${f.failedMs[1]} ms after the unlink); none sent after the path was back failed (${f.failedAfterBack})`
      : 'nothing: every request answered 200 (nginx needed no new upstream connection while the path was gone: its pooled ones reach the old socket\'s workers)',
    `${f.nginx.enoent} x \`connect() ... failed (2: No such file or directory)\`, ${f.nginx.refused} x \`(111: Connection refused)\``,
    f.doctorAfter.length ? `after: fail: ${f.doctorAfter.join(', ')}` : 'after the re-bind: no fail',
    'the runner binds the new socket beside the path (PATH~PID) and links it to the path only once a worker listens on it, so the path names a listening socket from its first moment: no ECONNREFUSED; the path is missing until the next check (tunekit_app_socket_check_ms) finds it gone and a worker has taken the new socket (the warm spare: milliseconds; without one, a fresh worker\'s start)',
    [
      `${f.requests} GETs of ${f.path} in ${f.seconds} s: ${counts(f.status)}${Object.keys(f.errors).length ? `, errors: ${counts(f.errors)}` : ''}.`,
      `The runner logged socket-rebound ${f.reboundMs} ms after the unlink (the path missing ${f.missingMs.atLeast == null ? 'up to ' : `${f.missingMs.atLeast}-`}${f.missingMs.atMost} ms, as far as it could tell) and had moved both workers ${f.movedMs} ms after the unlink.`,
      stamp(f),
    ].join(' '),
  ];
}

// The app's listen address held by another process when the runner starts (runner-listen.test.js).
function listenTakenRow(key, f) {
  const ms = f.cases.map((c) => c.ms);
  return [
    'the app\'s listen address taken when the runner starts: a TCP port (127.0.0.1 or ::1) or a live Unix socket held by another process',
    'the runner never serves: it exits 1 before any worker starts; whatever holds the address keeps answering',
    'nothing (nginx connects to whatever holds the address)',
    'not run: the runner is stopped (systemd restarts it after RestartSec)',
    'the primary checks its bind before anything uses it (libuv defers EADDRINUSE to listen(); a worker listening on a socket that never bound would take a random port on every interface), and a live Unix socket by connecting to it; it stops with one line naming the address and, where ss can tell, the process holding it',
    [
      `${f.cases.length} forms, every one exit ${[...new Set(f.cases.map((c) => c.code))].join('/')}, ${Math.min(...ms)}-${Math.max(...ms)} ms from the start of the process to its exit (${f.cases.map((c) => `${c.form}: ${c.ms} ms`).join('; ')}).`,
      `The line, for tcp:127.0.0.1:PORT: \`${f.cases[0].line}\`; for a Unix socket: \`${(f.cases.find((c) => c.form.startsWith('unix')) || f.cases[0]).line}\`.`,
      stamp(f),
    ].join(' '),
  ];
}

function appStoppedRow(key, f) {
  return [
    'app stopped (killed), its socket file left behind',
    `${f.status} Bad Gateway`,
    `\`${f.nginx}\``,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'the runner replaces a socket file nobody listens on when it starts',
    `${f.backMs === undefined ? '' : `Started again (a new runner on the same app.json): the first of 5 bursts of 16 in a row all 200 ended ${f.backMs} ms after the process was started (burst ${f.backBursts}), node's start and the app's load included. `}${stamp(f)}`,
  ];
}

function socketEaccesRow(key, f) {
  return [
    'app socket\'s mode changed (chmod 0600) so nginx\'s worker user may not connect',
    POOLED_ONLY,
    `\`${f.nginx}\``,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'the runner binds the socket with the mode and group of app.json from its first moment (tunekit_socket_mode, tunekit_socket_group); restore them or restart the app',
    [
      `16 requests at once after the chmod, workers as www-data: ${counts(f.burst)};`,
      `the same with the local stack's default (workers as root) and mode 0000: ${counts(f.rootBurst)}.`,
      `Once the mode is restored, the first burst of 16 all 200 after ${f.back.ms} ms (burst ${f.back.bursts}).`,
      stamp(f),
    ].join(' '),
  ];
}

function acceptQueueRow(key, f) {
  return [
    `accept queue of the app socket full: the app's workers stopped (SIGSTOP), backlog ${f.backlog}`,
    '502 at once for each request that needs a new upstream connection beyond the queue; requests already queued or on pooled connections wait, and are answered once the workers run',
    `\`${f.nginx}\``,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'tunekit_listen_backlog (4096, with net.core.somaxconn raised to match) absorbs bursts; nothing helps workers that do not accept',
    [
      `${f.requests} requests at once with the workers stopped: ${counts(f.whileStopped)}, ${f.waiting} waiting;`,
      `the waiting ones answered 200 ${f.waitedMs} ms after SIGCONT; the first burst of 16 all 200 after ${f.back.ms} ms${f.back.bursts > 1 ? ` (the ${f.back.bursts - 1} before it overflowed a queue of ${f.backlog} again)` : ' (the first one)'}.`,
      stamp(f),
    ].join(' '),
  ];
}

function appEmfileRow(key, f) {
  return [
    'the app\'s open-files limit (RLIMIT_NOFILE) too low for the load: accept() fails with EMFILE',
    '502 for each request whose upstream connection the app could not take; the others 200',
    `\`${f.nginx}\` (${f.nginxResets} lines)`,
    `${f.doctorLevel}: ${f.doctor}; fix: ${f.fix}`,
    'the unit\'s LimitNOFILE (tunekit_app_limit_nofile); the worker keeps serving, and logs open-files-limit at most once per 10 s (libuv closes the connections past the limit unread, so Node never sees the error)',
    [
      `limit ${f.limit} on the worker (8 descriptors of room), ${f.requests} requests at once held 500 ms: ${counts(f.burst)};`,
      `app log lines about it: ${f.appLogLines} (${f.appLogSample || 'none'}); the same worker afterwards, one request at a time: ${counts(f.after)}.`,
      stamp(f),
    ].join(' '),
  ];
}

function keepaliveRaceRow(key, f) {
  const status = (c) => Object.entries(c.status).map(([k, v]) => `${v} x ${k}`).join(', ');
  return [
    `app keepAliveTimeout (${f.appKeepAliveMs} ms) below nginx's upstream keepalive_timeout (${f.nginxKeepAliveS} s), a paced load whose gaps straddle the app's close`,
    '502 Bad Gateway on a POST (nginx does not pass a non-idempotent request to the next server); a GET is retried by nginx and succeeds',
    `\`${f.nginxSample}\` (${Object.entries(f.inverted.nginx).map(([k, v]) => `${v} x "${k}"`).join(', ')})`,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    `the kit derives the app's keepAliveTimeout from nginx's (${f.kitAppKeepAliveMs} ms here) and \`tunekit render\` refuses an app value not above nginx's`,
    [
      `${f.rounds} rounds of ${f.lanes} POSTs and ${f.lanes} GETs at once, each round's gap ending around the app's close time, a ${f.busyMs} ms CPU-bound request over it:`,
      `inverted: POST ${status(f.inverted.post)}; GET ${status(f.inverted.get)}.`,
      `The kit's timeouts, same load: POST ${status(f.kit.post)}; GET ${status(f.kit.get)}; ${f.kit.nginxLines} lines in nginx's error log.`,
      stamp(f),
    ].join(' '),
  ];
}

// The same load under three ways of restarting: the local stack (signals),
// PM2 (pm2 reload) and a booted systemd host (systemctl reload).
const RESTART_MITIGATION = {
  'restart-bodies': 'the runner replaces one worker at a time and drains the old one; clients retry a request reset before any byte of its answer once, on a new connection (a POST with an idempotency key)',
  'restart-bodies-pm2': "PM2's cluster mode keeps the socket in its daemon and replaces one instance at a time; nginx keeps its client connections, so nothing needs a retry",
  'restart-bodies-systemd': "the unit's ExecReload sends SIGHUP to the runner (one worker at a time, the old one drained); for nginx's reload, clients retry a request reset before any byte of its answer once, on a new connection",
};

function restartBodiesRow(key, f) {
  const what = key === 'restart-bodies'
    ? `${f.nginxReloads} nginx reloads (SIGHUP) and ${f.appReloads} rolling restarts of the app (SIGHUP to the runner)`
    : f.restarts;
  return [
    `${what} under GETs and POSTs of 0..64 KB`,
    f.getRetried + f.postRetried > 0
      ? 'a reset, before any byte of an answer, of a request sent on a keep-alive connection nginx\'s old worker just closed (a POST too); never a 5xx, never a wrong body'
      : 'nothing: every request answered 200, every POST body whole; no reset, so no retry',
    `at ${f.errorLogLevel}: nothing about the restarts (${f.errorLogOther} lines)${f.errorLogRetriedGets ? `, but ${f.errorLogRetriedGets} "upstream prematurely closed connection" for a GET nginx sent on a connection a draining worker was closing, then sent again (the client got its answer)` : ''}; ${f.errorLogBuffered} "a client request body is buffered to a temporary file" lines for bodies above client_body_buffer_size`,
    f.doctorFails.length ? `fail: ${f.doctorFails.join(', ')}` : 'no fail: the stack is healthy after',
    RESTART_MITIGATION[key],
    [
      `${f.seconds} s, ${f.connections} connections: ${f.get} GETs, ${f.post} POSTs (${f.postMiB} MiB):`,
      `${f.failed} failed; retried after a reset: ${f.getRetried} GETs, ${f.postRetried} POSTs.`,
      `At the app: ${f.lost} POST bodies lost, ${f.corrupted} corrupted, ${f.duplicates} seen twice.`,
      stamp(f),
    ].join(' '),
  ];
}

// One row per kind of abuse (the cases of one kind share it), with what bounds it.
const ABUSE_KINDS = [
  ['oversized request line or headers (over large_client_header_buffers)', /large_client_header_buffers/,
    (f) => `large_client_header_buffers ${f.largeClientHeaderBuffers} (the kit's variable)`],
  ['request smuggling shapes: Transfer-Encoding with Content-Length, duplicate Content-Length, bad chunk size', /Transfer-Encoding and|duplicate Content-Length|bad chunk/,
    () => 'nginx refuses them itself, and reads a request body whole before it proxies it (proxy_request_buffering, on by default), so no part of one reaches the app'],
  ['body over client_max_body_size (Content-Length, or chunked)', /client_max_body_size/,
    (f) => `client_max_body_size ${f.clientMaxBodySize} (the kit's variable); after a 413 nginx reads and drops what still comes for up to lingering_timeout (5 s, nginx's default), then closes`],
  ['slowloris: headers sent a byte at a time, past client_header_timeout', /slowloris/,
    (f) => `client_header_timeout: the kit renders ${f.kitClientHeaderTimeoutS} s (${f.clientHeaderTimeoutS} s in this test); it bounds the whole header, not the gap between bytes`],
];

function abuseRows(key, f) {
  return ABUSE_KINDS.map(([fault, re, bound]) => {
    const cases = f.cases.filter((c) => re.test(c.name));
    if (!cases.length) throw new Error(`${key}: no case matches "${fault}"; keep test/faults/table.js ABUSE_KINDS in step with abuse.test.js`);
    const sees = [...new Set(cases.map((c) => (c.status ? c.title : 'no answer: nginx closes the connection')))];
    return [
      fault,
      `${sees.join('; ')} (from nginx; the app sees nothing)`,
      cases.map((c) => `\`${c.nginx}\``).join('; '),
      f.doctorFails.length ? `fail: ${f.doctorFails.join(', ')}` : 'no fail: the stack is healthy after',
      bound(f),
      [
        `${cases.map((c) => `${c.name}: ${c.status || 'no answer'}, closed by nginx after ${c.closedMs} ms`).join('; ')}.`,
        `Requests seen by the app: ${f.seenByApp}; a normal request afterwards: ${f.normalAfter}. nginx's error log at ${f.errorLogLevel} for this test (the kit's level is warn).`,
        stamp(f),
      ].join(' '),
    ];
  });
}

// doctor on a local stack of the large profile: its fails are the open-files
// limits nginx and the app inherit from the shell that started the stack.
const heldDoctor = (f) => (f.doctorFails.length ? `fail: ${f.doctorFails.join(', ')}${f.doctorFails.includes('nofile')
  ? ' (the local stack\'s app inherits the shell\'s open-files limit, below the large profile\'s; systemd\'s LimitNOFILE sets it on a host)' : ''}` : 'no fail');

function heldIdleRow(key, f) {
  const stock = key === 'held-idle stock';
  return [
    stock
      ? `the same ${f.clients} idle clients through the stock front (Debian's nginx.conf: worker_connections ${f.workerConnections} x ${f.nginxWorkers} workers; the app on TCP, no upstream keep-alive)`
      : `${f.clients} client keep-alive connections at once, then idle (the large profile: worker_connections ${f.workerConnections})`,
    `${f.ok} of ${f.clients} answered 200, ${f.failed} failed; ${f.closed} closed while idle`,
    f.nginxLines ? `${f.nginxLines} lines at ${f.errorLogLevel}: ${f.nginxSample}` : `nothing at ${f.errorLogLevel}${stock ? ' (stock\'s level: nginx\'s "worker_connections are not enough, reusing connections" is a warn, not written)' : ''}`,
    heldDoctor(f),
    stock
      ? 'none: past worker_connections nginx closes idle keep-alive clients to accept new ones, so their next request pays a new connection (or meets a reset); the tuned row above holds them all'
      : 'worker_connections and worker_rlimit_nofile sized for the clients (ansible/profiles/large.yml); upstream keep-alive keeps the app behind its pool whatever the number of clients',
    [
      stock
        ? `Opened ${f.chunk} at a time in ${f.openS} s. The app accepted ${f.upstream} upstream connections (one per request); ${f.upstreamOpen} stayed open once every client was idle.`
        : `Opened ${f.chunk} at a time in ${f.openS} s. The app accepted ${f.upstream} upstream connections while the requests were in flight; ${f.upstreamOpen} stayed open once every client was idle (pool ${f.pool} x ${f.nginxWorkers} nginx workers).`,
      `nginx workers' Pss ${f.pssBeforeKiB} KiB before, ${f.pssHeldKiB} KiB with every client idle: ${f.bytesPerConnection} bytes per idle connection${stock ? ' (of the 10,000, most were closed)' : ''} (kernel socket memory not included).`,
      stamp(f),
    ].join(' '),
  ];
}

function heldSlowRow(key, f) {
  const statuses = (x) => Object.entries(x.statuses).map(([k, v]) => `${v} x ${k}`).join(', ');
  return [
    `clients that do not read their response: ${f.small.clients} x ${f.small.mib} MiB, then ${f.big.clients} x ${f.big.mib} MiB`,
    `the slow clients hold their responses; normal clients beside them: ${statuses(f.small)} and ${statuses(f.big)}`,
    `${f.small.mib} MiB: ${f.small.spilled} x "an upstream response is buffered to a temporary file"; ${f.big.mib} MiB: ${f.big.spilled} x (warn)`,
    heldDoctor(f),
    `proxy buffering (nginx's default, kept): nginx reads the whole response off the app into proxy_buffers (${f.proxyBuffers}) and its temp files, so a slow client holds nginx, not a Node worker`,
    [
      `The app finished every response while no client read (${f.finished} in all): ${f.small.mib} MiB fits in the kernel's socket buffers, ${f.big.mib} MiB spills to nginx's temp files.`,
      `Normal clients (400 GETs over 8 keep-alive connections) p50/p99: ${f.quiet.p50}/${f.quiet.p99} µs quiet, ${f.small.p50}/${f.small.p99} µs beside the ${f.small.mib} MiB readers,`,
      `${f.big.p50}/${f.big.p99} µs beside the ${f.big.mib} MiB ones.`,
      stamp(f),
    ].join(' '),
  ];
}

function workerConnectionsRow(key, f) {
  const seen = Object.entries(f.seen).map(([k, v]) => `${v} x ${k}`).join(', ');
  return [
    'nginx\'s worker_connections too low for the load (one worker, 32 connections)',
    `some requests answered; the others closed without an answer or left waiting (${seen})`,
    `\`${f.nginx}\` (${f.alerts} line)`,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'tunekit_nginx_worker_connections sized per profile (4096; 16384 in the large profile), worker_rlimit_nofile derived (2x); doctor reads the alert from nginx\'s error log',
    `${f.requests} requests at once, each held 500 ms by the app, clients giving up after 3 s: ${seen}. ${stamp(f)}`,
  ];
}

function backlogBurstRow(key, f) {
  const st = (x) => Object.entries(x).map(([k, v]) => `${v} x ${k}`).join(', ');
  return [
    `a burst of ${f.clients} clients beyond the listen backlog (${f.backlog}) while nothing accepts (nginx's and the app's workers stopped)`,
    `TCP to nginx: ${f.tcp.connected} connect (backlog + 1 per accept queue, ${f.queues} with reuseport), ${f.tcp.pending} wait with no error (their SYN dropped, retried); a client on the app's Unix socket: ${f.uds.connected} connect, ${f.uds.errors.EAGAIN || 0} refused at once with EAGAIN`,
    f.eagain ? `once accepting, the TCP clients' burst overflows the app's queue too: \`connect() to unix:… failed (11: Resource temporarily unavailable)\` (${f.eagain} lines)` : 'nothing',
    'while it lasts: accept-queue (the app socket\'s queue full, with the stopped pids)',
    'tunekit_listen_backlog (4096) for nginx and the app, with net.core.somaxconn raised to match: a burst waits in the queue instead of a SYN retry (TCP, a second or more) or an immediate 502 (Unix socket)',
    `After SIGCONT every TCP client was answered within ${f.tcpAnsweredMs} ms (${st(f.tcpStatuses)}). ${stamp(f)}`,
  ];
}

function crashStormRow(key, f) {
  const st = (x) => Object.entries(x).map(([k, v]) => `${v} x ${k}`).join(', ');
  const nginx = Object.entries(f.nginxErrors).map(([k, v]) => `${v} x "${k}"`).join(', ');
  return [
    `a route that kills the worker taking it (an exception thrown outside the request, the shape of a missing await): ${f.crashesPerSecond} requests a second for ${f.crashRequests / f.crashesPerSecond} s beside a steady load`,
    'the killing requests: 500 from the dying worker (it answers every request it has open, so nginx does not retry them on the other workers), 502 when it died before it read one; the others 200, but for a few 502 of requests on connections the dying worker had accepted',
    nginx ? `${nginx}; nginx retries a GET whose pooled connection fails, most of them succeed` : 'nothing',
    f.doctorFails.length ? `fail: ${f.doctorFails.join(', ')}` : 'no fail: the runner serves with its workers replaced',
    `once a worker has stayed up tunekit_app_min_uptime_ms (${f.minUptimeMs} ms) after it listened, the runner replaces every dead worker (the warm spare at once) and never stops; the respawn delay grows only with workers that die on their own; the error is logged once in full (worker-crash) and then counted (crash-summary); fix the route, limit_req it in nginx meanwhile`,
    [
      `${f.connections} keep-alive loops of good requests ${f.gapMs} ms apart: ${f.good.ok} of ${f.good.requests} answered 200 (${pct(f.good.ok, f.good.requests)}), ${st(f.good.status)}${Object.keys(f.good.errors).length ? `, ${st(f.good.errors)}` : ''}.`,
      `Killing requests: ${st(f.crashOutcomes)}. ${f.deaths} workers died (${st(f.stages)}): ${f.sparePromotions} replaced by the spare at once, ${f.respawns} forked again (longest delay ${f.longestRespawnMs} ms).`,
      `The runner ran on, then exited ${f.exitCode} on SIGTERM; its log: one worker-crash line, ${f.summaries} crash-summary line${f.summaries === 1 ? '' : 's'} counting the other ${f.deaths - 1}.`,
      stamp(f),
    ].join(' '),
  ];
}

// A row function returns one row, or (abuse) several.
const ROWS = {
  reload: reloadRow,
  'socket-deleted': socketDeletedRow,
  'socket-rebind': socketRebindRow,
  'listen-taken': listenTakenRow,
  'app-stopped': appStoppedRow,
  'socket-eacces': socketEaccesRow,
  'accept-queue': acceptQueueRow,
  'app-emfile': appEmfileRow,
  'keepalive-race': keepaliveRaceRow,
  'restart-bodies': restartBodiesRow,
  'restart-bodies-pm2': restartBodiesRow,
  'restart-bodies-systemd': restartBodiesRow,
  abuse: abuseRows,
  'nginx-worker-connections': workerConnectionsRow,
  'backlog-burst': backlogBurstRow,
  'held-idle': heldIdleRow,
  'held-slow': heldSlowRow,
  'crash-storm': crashStormRow,
};

function table(figures) {
  const head = ['fault', 'what the client sees', 'what nginx logs', 'what `tunekit doctor` says', "the kit's mitigation", 'measured (command)'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const key of Object.keys(figures).sort()) {
    const row = ROWS[key.split(' ')[0]];
    if (!row) throw new Error(`${key}: no row for this case in test/faults/table.js; add one to ROWS`);
    const made = row(key, figures[key], figures);
    for (const r of Array.isArray(made[0]) ? made : [made]) lines.push(`| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** The doc's table as it stands (between the markers). */
function docTable(doc = fs.readFileSync(DOC, 'utf8')) {
  const a = doc.indexOf(BEGIN);
  const b = doc.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${DOC}: markers not found; put "${BEGIN}" and "${END}" around the table`);
  return { a, b, text: doc.slice(a + BEGIN.length, b).trim() };
}

function main(argv) {
  const [file, flag] = argv;
  if (!file) throw new Error('usage: node test/faults/table.js <figures.json> [--write]');
  const text = table(JSON.parse(fs.readFileSync(file, 'utf8')));
  if (flag !== '--write') {
    process.stdout.write(`${text}\n`);
    return;
  }
  const doc = fs.readFileSync(DOC, 'utf8');
  const { a, b } = docTable(doc);
  fs.writeFileSync(DOC, `${doc.slice(0, a + BEGIN.length)}\n${text}\n${doc.slice(b)}`);
  fs.copyFileSync(file, FIGURES);
}

if (require.main === module) main(process.argv.slice(2));

module.exports = { table, docTable, FIGURES };
