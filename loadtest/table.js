'use strict';
// Plain-text tables for the terminal (and the Markdown writer reuses the rows).

const { int, fixed, spreadText, kindsText } = require('./format');
const { judge, intervalText, intervalCell, unresolvedText, boundText, autoText } = require('./interval');

function errText(r) {
  const q = r.requests;
  return `${q.errors}/${q.timeouts}/${q.non2xx}`;
}

// "n/a" when no response carried a pid (another server, or wrk): nothing to count.
function workersText(w, { wide = false } = {}) {
  if (!w) return '–';
  if (!w.sampled) return 'n/a';
  const served = `${w.served}${w.expected != null ? `/${w.expected}` : ''}`;
  const shares = Object.values(w.share).map((x) => Math.round(x * 100));
  if (wide) return `${served} [${shares.map((x) => `${x}%`).join(' ')}]`;
  const lo = Math.min(...shares);
  const hi = Math.max(...shares);
  return `${served} ${lo === hi ? `${lo}` : `${lo}–${hi}`}%`;
}

function otherText(r) {
  if (!r.machine || r.machine.otherCores == null) return 'not measured';
  return `${r.machine.otherCores.toFixed(1)} cores`;
}

function errlogText(r) {
  if (!r.errorLog) return '–';
  return r.errorLog.lines == null ? 'unread' : String(r.errorLog.lines);
}

function modeText(r) {
  return r.mode === 'saturation' ? 'saturation' : r.mode === 'paced' ? `paced ${r.targetRate}/s` : `-R ${r.targetRate}/s`;
}

// Each column: [heading, cell(result), shown by default]. The default view
// fits 100 columns; --wide adds the rest.
const RESULT_COLUMNS = [
  ['scenario', (r) => r.scenario, true],
  ['driver', (r) => r.driver, false],
  ['mode', modeText, true],
  ['req/s', (r) => int(r.reqPerSec), true],
  ['p50 µs', (r) => int(r.latencyUs.p50), true],
  ['p90 µs', (r) => int(r.latencyUs.p90), false],
  ['p99 µs', (r) => int(r.latencyUs.p99), true],
  ['p99.9 µs', (r) => int(r.latencyUs.p999), false],
  ['max µs', (r) => int(r.latencyUs.max), false],
  ['errors', (r) => int(r.requests.errors + r.requests.non2xx), true],
  ['err/tmo/non2xx', errText, false],
  ['errlog', errlogText, true],
  ['srv µs/req', (r) => (r.server ? fixed(r.server.cpuUsPerReq) : '–'), true],
  ['gen CPU', (r) => `${Math.round(r.generator.machineShare * 100)}%`, false],
  ['others', otherText, true],
  ['workers', (r) => workersText(r.workers), true],
];

function resultColumns(wide) {
  return RESULT_COLUMNS.filter((c) => wide || c[2]);
}

const RESULT_HEAD = RESULT_COLUMNS.map((c) => c[0]);

function resultRow(r, { wide = true } = {}) {
  return resultColumns(wide).map(([head, cell]) => (head === 'workers' ? workersText(r.workers, { wide }) : cell(r)));
}

const SUMMARY_HEAD = ['scenario', 'driver', 'req/s', 'p50 µs', 'p99 µs', 'p99.9 µs', 'srv µs/req', 'µs/req at rate', 'p99 at rate', 'err', 'errlog', 'others'];

function summaryRow(s) {
  return [
    s.scenario, s.driver || '–', spreadText(s.reqPerSec), spreadText(s.latencyUs.p50), spreadText(s.latencyUs.p99),
    spreadText(s.latencyUs.p999), spreadText(s.cpuUsPerReq, (n) => fixed(n)),
    s.atRate ? spreadText(s.atRate.cpuUsPerReq, (n) => fixed(n)) : '–',
    s.atRate ? spreadText(s.atRate.latencyUs.p99) : '–',
    String(s.errors + s.non2xx), s.errorLogLines == null ? 'unread' : String(s.errorLogLines),
    s.otherCores && s.otherCores.median != null ? spreadText(s.otherCores, (n) => fixed(n)) : '–',
  ];
}

const RATIO_HEAD = ['ratio', 'req/s', 'srv µs/req', 'µs/req at rate', 'p50', 'p99', 'p99 at rate'];

// Each cell: the geometric mean of the per-round ratios and its 95% interval, "1.17 (1.12–1.22)".
function ratioRow(x) {
  const c = (s) => intervalCell(s && s.ci);
  return [x.name, c(x.reqPerSec), c(x.cpuUsPerReq), c(x.cpuUsPerReqAtRate), c(x.p50), c(x.p99), c(x.p99AtRate)];
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

// One line a reader can trust at a glance: rate, latency, errors.
function headline(r) {
  const q = r.requests;
  const bad = q.errors + q.non2xx;
  return `${r.scenario} ${modeText(r)}: ${int(r.reqPerSec)} req/s, p50 ${int(r.latencyUs.p50)} µs, p99 ${int(r.latencyUs.p99)} µs, ` +
    (bad ? `errors: ${kindsText(q.kinds) || errText(r)}` : 'no errors');
}

// The verdict of an A/B ratio of req/s: it follows the 95% interval over the rounds
// (interval.js). A side is named faster only when the whole interval is above 1,
// slower only when it is below 1. The A/A pair (aa/uds) is the run's noise floor.
function verdict(x) {
  const [a, b] = x.name.split('/');
  const s = x.reqPerSec;
  if (!s || !s.ci || s.ci.estimate == null) return `${x.name}: no req/s ratio (a side had no result)`;
  const text = `${x.name} req/s ${intervalText(s.ci)}`;
  if (a === 'aa') {
    return s.ci.halfWidth == null ? `${text}: A/A, ${unresolvedText(s.ci)}` : `${text}: A/A, the noise floor of this run (±${fixed(s.ci.halfWidth * 100)}%)`;
  }
  if (judge(s.ci, { min: 1 }) === 'met' && s.ci.low > 1) return `${text}: ${a} faster than ${b}`;
  if (judge(s.ci, { max: 1 }) === 'met' && s.ci.high < 1) return `${text}: ${a} slower than ${b}`;
  return `${text}: ${unresolvedText(s.ci, '1.00')}`;
}

// A ratio's targets (Ratio.target: { reqPerSec: { min }, cpuUsPerReq: { max } }),
// judged on the 95% interval: met when the whole interval is on the right side of
// the bound, not met when the whole interval is on the wrong side.
function targetLines(x) {
  const what = { reqPerSec: 'req/s', cpuUsPerReq: 'server µs/req' };
  return Object.entries(x.target || {}).map(([key, t]) => {
    const s = x[key];
    const label = `${x.name} ${what[key]}`;
    if (!s || !s.ci || s.ci.estimate == null) return `${label}: not measured`;
    const goal = t.min != null ? `≥ ${t.min}` : `≤ ${t.max}`;
    return `${label} ${intervalText(s.ci)} (target ${goal}: ${boundText(s.ci, t)})`;
  });
}

// The headline of a report: one line per run (loadtest) or per scenario and
// A/B verdict (bench).
function headlines(doc) {
  if (doc.kind === 'bench-tls') return require('./tls-table').verdicts(doc);
  if (doc.kind !== 'bench') return doc.results.map(headline);
  return [
    ...doc.summary.map((x) => `${x.scenario}: ${spreadText(x.reqPerSec)} req/s, p50 ${spreadText(x.latencyUs.p50)} µs, ` +
      `p99 ${spreadText(x.latencyUs.p99)} µs, ${x.errors + x.non2xx ? `${int(x.errors + x.non2xx)} errors` : 'no errors'}`),
    ...doc.ratios.map(verdict),
    ...doc.ratios.flatMap(targetLines),
    ...(doc.auto ? [autoText(doc.auto)] : []),
  ];
}

function loadtestText(doc, { wide = false } = {}) {
  const h = doc.host;
  return [
    `tunekit loadtest — ${h.cores} cores, Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}`,
    ...headlines(doc),
    '',
    render(resultColumns(wide).map((c) => c[0]), doc.results.map((r) => resultRow(r, { wide }))),
    'latency: µs from the kit\'s own per-response histogram; paced runs count from the intended send time.',
    'srv µs/req: nginx + app CPU (/proc schedstat) per request; workers: how many answered, share min–max',
    'others: cores busy meanwhile with neither server nor generator (other tenants, kernel threads).',
    wide ? '' : 'more columns (driver, p90, p99.9, max, error split, generator CPU, each worker): --wide',
    warningsText(doc.results, doc.warnings),
  ].filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n');
}

// "3 rounds", or with --rounds auto "7 rounds (auto)"; the A/B rounds say whether each
// began on fresh stacks (options.restart, absent from reports older than that choice).
function roundsText(o) {
  const n = o.rounds === 'auto' ? `${o.roundsRun} rounds (auto)` : `${o.rounds} rounds`;
  return o.restart === true ? `${n}, fresh stacks each` : o.restart === false ? `${n} on the same stacks (--keep-stacks)` : n;
}

const RATIO_NOTE = 'ratios: geometric mean of the per-round ratios (95% interval over the rounds)';

// The bench's terminal report; `bench --https` (kind bench-tls) has its own
// tables (tls-table.js) in the same frame.
function benchText(doc) {
  if (doc.kind === 'bench-overload') return [...require('./overload-table').text(doc, render), warningsText(doc.results, doc.warnings)].join('\n');
  const tls = doc.kind === 'bench-tls' ? require('./tls-table') : null;
  const t = tls || { SUMMARY_HEAD, summaryRow, RATIO_HEAD, ratioRow };
  const h = doc.host;
  const o = doc.options;
  return [
    `tunekit bench${tls ? ' --https' : ''} — ${h.cores} cores, Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}; ` +
      `${roundsText(o)} × ${o.duration} s${tls ? '' : `, ${o.connections} connections, driver ${o.driver}`}`,
    ...(o.placement ? [`--own-core: the generator on CPU ${o.placement.generator}, every stack on CPU ${o.placement.stacks} (taskset)`] : []),
    ...headlines(doc),
    '',
    'median (min–max) over rounds',
    render(t.SUMMARY_HEAD, doc.summary.map(t.summaryRow)),
    '',
    RATIO_NOTE,
    render(t.RATIO_HEAD, doc.ratios.map(t.ratioRow)),
    ...(tls ? tls.extraText(doc, render) : []),
    warningsText(doc.results, doc.warnings),
  ].join('\n');
}

module.exports = { RESULT_HEAD, resultRow, headline, headlines, verdict, targetLines, SUMMARY_HEAD, summaryRow, RATIO_HEAD, RATIO_NOTE, ratioRow, render, loadtestText, benchText, workersText };
