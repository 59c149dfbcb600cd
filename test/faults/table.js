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

function reloadRow(key, f) {
  const measured = [
    `${f.reloads} reloads in ${f.seconds} s, ${f.connectionsPerClient} connections per client, 3 clients at once:`,
    `no retry: ${f.raw.failed} of ${f.raw.requests} failed (${pct(f.raw.failed, f.raw.requests)}), all resets;`,
    `retry on a reused connection: ${f.retryReused.failed} of ${f.retryReused.requests} failed (resets of fresh connections: ${f.retryReused.resetsOfFresh});`,
    `retry on any reset: ${f.retryAny.failed} of ${f.retryAny.requests} failed (${f.retryAny.retried} retried).`,
    `nginx error log at ${f.errorLogLevel}: ${f.errorLogLines} lines.`,
    stamp(f),
  ].join(' ');
  return [
    key === 'reload' ? 'nginx reload (SIGHUP) under load, tuned' : `nginx reload under load, tuned with ${key.slice('reload '.length)}`,
    'ECONNRESET (or "socket hang up") on a request sent on a keep-alive connection an old worker just closed; never a 5xx',
    'nothing at warn (client resets are logged at info)',
    'nothing: the stack is healthy before and after',
    'none on the server side found yet; clients retry an idempotent request once on a reset, on a new connection',
    measured,
  ];
}

const stamp = (f) => `${f.machine}, ${f.measured.slice(0, 16)}Z. \`${f.command}\``;

function socketDeletedRow(key, f) {
  return [
    'app socket file deleted under a running stack',
    'requests on nginx\'s pooled upstream connections still get 200; those needing a new upstream connection get 502',
    `\`${f.nginx}\``,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'none yet: the runner does not re-bind a deleted path; restart the app',
    `16 requests at once after the delete: ${Object.entries(f.burst).map(([k, v]) => `${v} x ${k}`).join(', ')}. ${stamp(f)}`,
  ];
}

function appStoppedRow(key, f) {
  return [
    'app stopped (killed), its socket file left behind',
    `${f.status} Bad Gateway`,
    `\`${f.nginx}\``,
    `fail: ${f.doctor}; fix: ${f.fix}`,
    'the runner replaces a socket file nobody listens on when it starts',
    stamp(f),
  ];
}

const ROWS = { reload: reloadRow, 'socket-deleted': socketDeletedRow, 'app-stopped': appStoppedRow };

function table(figures) {
  const head = ['fault', 'what the client sees', 'what nginx logs', 'what `tunekit doctor` says', "the kit's mitigation", 'measured (command)'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const key of Object.keys(figures).sort()) {
    const row = ROWS[key.split(' ')[0]];
    if (!row) throw new Error(`${key}: no row for this case in test/faults/table.js; add one to ROWS`);
    lines.push(`| ${row(key, figures[key]).map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`);
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
