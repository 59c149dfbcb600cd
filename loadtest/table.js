'use strict';
// Plain-text tables for the terminal (and the Markdown writer reuses the rows).

const { int, fixed, spreadText } = require('./format');

function errText(r) {
  const q = r.requests;
  return `${q.errors}/${q.timeouts}/${q.non2xx}`;
}

function workersText(w) {
  if (!w) return '–';
  const shares = Object.values(w.share).map((s) => `${Math.round(s * 100)}%`).join(' ');
  return `${w.served}${w.expected != null ? `/${w.expected}` : ''} [${shares}]`;
}

const RESULT_HEAD = ['scenario', 'driver', 'mode', 'req/s', 'p50 µs', 'p90 µs', 'p99 µs', 'p99.9 µs', 'max µs',
  'err/tmo/non2xx', 'errlog', 'srv µs/req', 'gen CPU', 'others', 'workers'];

function resultRow(r) {
  const l = r.latencyUs;
  const mode = r.mode === 'saturation' ? 'saturation' : r.mode === 'paced' ? `paced ${r.targetRate}/s` : `-R ${r.targetRate}/s`;
  return [
    r.scenario, r.driver, mode, int(r.reqPerSec), int(l.p50), int(l.p90), int(l.p99), int(l.p999), int(l.max),
    errText(r), r.errorLog ? String(r.errorLog.lines) : '–',
    r.server ? fixed(r.server.cpuUsPerReq) : '–',
    `${Math.round(r.generator.machineShare * 100)}%`,
    r.machine && r.machine.otherCores != null ? `${r.machine.otherCores.toFixed(1)} cores` : '–',
    workersText(r.workers),
  ];
}

const SUMMARY_HEAD = ['scenario', 'driver', 'req/s', 'p50 µs', 'p99 µs', 'p99.9 µs', 'srv µs/req', 'µs/req at rate', 'p99 at rate', 'err', 'errlog', 'others'];

function summaryRow(s) {
  return [
    s.scenario, s.driver || '–', spreadText(s.reqPerSec), spreadText(s.latencyUs.p50), spreadText(s.latencyUs.p99),
    spreadText(s.latencyUs.p999), spreadText(s.cpuUsPerReq, (n) => fixed(n)),
    s.atRate ? spreadText(s.atRate.cpuUsPerReq, (n) => fixed(n)) : '–',
    s.atRate ? spreadText(s.atRate.latencyUs.p99) : '–',
    String(s.errors + s.non2xx), String(s.errorLogLines),
    s.otherCores && s.otherCores.median != null ? spreadText(s.otherCores, (n) => fixed(n)) : '–',
  ];
}

const RATIO_HEAD = ['ratio', 'req/s', 'srv µs/req', 'µs/req at rate', 'p50', 'p99', 'p99 at rate'];

function ratioRow(x) {
  const f = (n) => fixed(n, 2);
  return [x.name, spreadText(x.reqPerSec, f), spreadText(x.cpuUsPerReq, f), spreadText(x.cpuUsPerReqAtRate, f),
    spreadText(x.p50, f), spreadText(x.p99, f), spreadText(x.p99AtRate, f)];
}

function render(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

function warningsText(results, extra = []) {
  const lines = [...extra];
  for (const r of results) for (const w of r.warnings) lines.push(`${r.scenario}${r.round ? ` r${r.round}` : ''} ${r.mode}: ${w}`);
  return lines.length ? `\nwarnings:\n${lines.map((l) => `  - ${l}`).join('\n')}` : '';
}

function loadtestText(doc) {
  const h = doc.host;
  return [
    `tunekit loadtest — ${h.cores} cores, Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}`,
    render(RESULT_HEAD, doc.results.map(resultRow)),
    'latency in µs from the kit\'s own per-response histogram; paced latency counts from the intended send time;',
    'srv µs/req = nginx + app CPU (/proc schedstat) / requests; gen CPU = generator share of all cores;',
    'others = cores kept busy meanwhile by neither server nor generator (other tenants, kernel threads).',
    warningsText(doc.results, doc.warnings),
  ].join('\n');
}

function benchText(doc) {
  const h = doc.host;
  return [
    `tunekit bench — ${h.cores} cores, Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}; ` +
      `${doc.options.rounds} rounds × ${doc.options.duration} s, ${doc.options.connections} connections, driver ${doc.options.driver}`,
    'median (min–max) over rounds',
    render(SUMMARY_HEAD, doc.summary.map(summaryRow)),
    '',
    'ratios per round, median (min–max)',
    render(RATIO_HEAD, doc.ratios.map(ratioRow)),
    warningsText(doc.results, doc.warnings),
  ].join('\n');
}

module.exports = { RESULT_HEAD, resultRow, SUMMARY_HEAD, summaryRow, RATIO_HEAD, ratioRow, render, loadtestText, benchText, workersText };
