'use strict';
// The Markdown report: the same tables as the terminal, as GitHub tables.

const T = require('./table');

function table(head, rows) {
  const esc = (c) => String(c).replace(/\|/g, '\\|');
  return [`| ${head.map(esc).join(' | ')} |`, `|${head.map((_, i) => (i ? '---:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}

function hostLine(h) {
  return `${h.cores} cores (${h.cpuModel || 'unknown CPU'}), Linux ${h.kernel}, nginx ${h.nginx || '?'}, ` +
    `Node ${h.node}, autocannon ${h.autocannon || '?'}, wrk ${h.wrk || 'not installed'}`;
}

function warnings(doc) {
  const lines = [...doc.warnings];
  for (const r of doc.results) for (const w of r.warnings) lines.push(`${r.scenario}${r.round ? ` round ${r.round}` : ''} (${r.mode}): ${w}`);
  return lines.length ? `\n## Warnings\n\n${lines.map((l) => `- ${l}`).join('\n')}\n` : '';
}

function toMarkdown(doc) {
  const out = [`# tunekit ${doc.kind}`, '', `\`${doc.command}\` — ${doc.createdAt}`, '', `Host: ${hostLine(doc.host)}.`, ''];
  if (doc.kind === 'bench') {
    out.push('## Scenarios (median, min–max over rounds)', '', table(T.SUMMARY_HEAD, doc.summary.map(T.summaryRow)), '');
    out.push('## Ratios', '', `${T.RATIO_NOTE}.`, '', table(T.RATIO_HEAD, doc.ratios.map(T.ratioRow)), '');
    out.push('## Verdicts', '', ...doc.ratios.map(T.verdict).map((l) => `- ${l}`), '');
    const targets = doc.ratios.flatMap(T.targetLines);
    if (targets.length) out.push('## Targets', '', ...targets.map((l) => `- ${l}`), '');
    if (doc.auto) out.push(`${require('./interval').autoText(doc.auto)}.`, '');
    out.push('## Every run', '');
  }
  if (doc.kind === 'bench-overload') {
    const X = require('./overload-table');
    out.push(...X.frame(doc).map((l) => `${l}.`), '', '## Stacks', '', ...X.headlines(doc).map((l) => `- ${l}`), '');
    out.push('## Steps', '', table(X.STEP_HEAD, doc.overload.stacks.flatMap(X.stepRows)), '');
    out.push('Latency from the intended send time (open loop, coordinated omission corrected), served (2xx) requests only; ' +
      'goodput: 2xx answers per second during the step; refused: non-2xx answers by status, and how fast they came. ' +
      'Queue columns are peaks of once-a-second samples: connections the generator held open and those waiting at its cap, ' +
      'nginx\'s active connections (stub_status) and listen queue, the app socket\'s accept queue (`ss -l`), the connections ' +
      'the app holds, its mean event-loop delay.', '', '## Every run', '');
  }
  if (doc.kind === 'bench-tls') {
    const X = require('./tls-table');
    out.push('## Targets', '', ...X.verdicts(doc).map((l) => `- ${l}`), '');
    out.push('## Servers × clients (median, min–max over rounds)', '', table(X.SUMMARY_HEAD, doc.summary.map(X.summaryRow)), '');
    out.push('## Ratios', '', `${T.RATIO_NOTE}.`, '', table(X.RATIO_HEAD, doc.ratios.map(X.ratioRow)), '');
    if (doc.gzip) out.push(`## gzip (${doc.gzip.url}, tls-tuned, keep-alive)`, '', table(X.GZIP_HEAD, X.gzipRows(doc.gzip)), '');
    out.push('## Every run', '');
  }
  out.push(table(['round', ...T.RESULT_HEAD], doc.results.map((r) => [r.round || '–', ...T.resultRow(r)])), '');
  out.push('Latency in µs from the kit\'s own histogram (per response, µs resolution); paced runs count latency from the',
    'intended send time (coordinated omission corrected). srv µs/req: CPU of nginx and app processes (scheduler',
    'runtime from /proc) divided by requests. gen CPU: the load generator\'s share of all cores. others: cores kept',
    'busy meanwhile by processes that are neither server nor generator.');
  out.push(warnings(doc));
  return `${out.join('\n')}\n`;
}

module.exports = { toMarkdown };
