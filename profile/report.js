'use strict';
// `tunekit profile`'s output: one set of sections (verdict, tracer cost,
// syscalls, top symbols, accept queues, doctor, notes) drawn three ways — the
// terminal, the Markdown report (the terminal's text), and the HTML report (the
// kit's report page, loadtest/html.js, with the flame graph SVG embedded). The
// JSON report is the result itself (loadtest/report.js's document()).

const { page, esc, htmlTable } = require('../loadtest/html');

const SHOWN_SYMBOLS = 10;

function pct(x) {
  return x == null ? 'n/a' : `${(x * 100).toFixed(1)}%`;
}

// The verdict's lines: the verdict, its evidence, its advice.
function verdictLines(v) {
  return [`verdict: ${v.verdict}`, ...v.evidence.map((e) => `  - ${e}`), `  advice: ${v.advice}`];
}

const SYSCALL_HEAD = ['group', 'syscall', 'calls', 'per', 'failed per', 'time', 'µs/call'];

function syscallRows(r) {
  const rows = [];
  for (const g of ['nginx', 'app']) {
    const t = r.syscalls[r.tracer][g];
    rows.push([g, '(all)', String(t.totalCalls), t.perUnit.toFixed(2), '', '', '']);
    for (const row of t.rows) rows.push([g, row.name, String(row.calls), row.perUnit.toFixed(2), (row.errorsPerUnit || 0).toFixed(2), pct(row.timeShare), row.usPerCall.toFixed(1)]);
  }
  return rows;
}

function symbolsTitle(r, g) {
  const s = r.shares[g];
  return `top symbols, ${g} workers (${r.folded[g]} samples; JavaScript ${pct(s.js)}, GC ${pct(s.gc)}, syscalls ${pct(s.syscall)}, other native ${pct(s.native)})`;
}

function tracerNote(r) {
  return `the syscall table is from ${r.tracer} (the smaller slowdown)`;
}

function tcpLine(r) {
  return `TCP ListenOverflows +${r.tcpDelta.ListenOverflows}, ListenDrops +${r.tcpDelta.ListenDrops} during the perf record phase`;
}

function lines(r) {
  const out = verdictLines(r.verdict);
  if (r.slowdown) {
    out.push('', 'tracer cost (req/s under the tool / req/s without it; the load is the same in each phase):');
    for (const [tool, ratio] of Object.entries(r.slowdown)) out.push(`  ${tool.padEnd(12)} ${ratio == null ? 'n/a' : ratio.toFixed(2)}`);
    out.push(`  ${tracerNote(r)}`);
  }
  out.push('', `syscalls (${r.tracer}; per ${r.syscalls[r.tracer].app.per}):`);
  const widths = [6, 12, 8, 8, 7, 9];
  const row = (cells) => `  ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' ')}`.trimEnd();
  out.push(row(SYSCALL_HEAD), ...syscallRows(r).map(row));
  for (const g of ['app', 'nginx']) {
    out.push('', `${symbolsTitle(r, g)}:`);
    for (const sym of r.top[g].slice(0, SHOWN_SYMBOLS)) out.push(`  ${pct(sym.share).padStart(6)}  ${sym.name}`);
  }
  out.push('', 'accept queues (largest Recv-Q seen / Send-Q = backlog):');
  if (!r.queues.length) out.push('  (no listener of the stack was seen by ss)');
  for (const q of r.queues) out.push(`  ${q.local}  ${q.maxRecvQ} / ${q.sendQ}`);
  out.push(`  ${tcpLine(r)}`);
  if (r.doctor && r.doctor.length) {
    out.push('', 'tunekit doctor:');
    for (const d of r.doctor) out.push(`  ${d}`);
  }
  for (const w of r.warnings) out.push(`note: ${w}`);
  return out;
}

function toMarkdown(doc) {
  return `# tunekit profile\n\n\`${doc.command}\` (${doc.createdAt})\n\n\`\`\`\n${lines(doc.results).join('\n')}\n\`\`\`\n\n` +
    (doc.results.flameGraph ? `Flame graph: ${doc.results.flameGraph}\n` : '');
}

function toHtml(doc, svg) {
  const r = doc.results;
  const h = doc.host;
  const v = r.verdict;
  const body = [
    '<h1>tunekit profile</h1>',
    `<p class="meta"><code>${esc(doc.command)}</code> — ${esc(doc.createdAt)}<br>${esc(`${h.cores} cores (${h.cpuModel || '?'}), Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}`)}</p>`,
    `<p class="verdict">verdict: <strong>${esc(v.verdict)}</strong></p>`,
    `<ul>${v.evidence.map((e) => `<li>${esc(e)}</li>`).join('')}</ul>`,
    `<p><strong>advice:</strong> ${esc(v.advice)}</p>`,
  ];
  if (svg) body.push('<h2>Flame graph</h2>', '<p>nginx and app workers together; width is the share of samples, hover a box for its frame.</p>', svg);
  if (r.slowdown) {
    body.push('<h2>Tracer cost</h2>', '<p>req/s under the tool / req/s without it; the load is the same in each phase.</p>',
      htmlTable(['tool', 'ratio'], Object.entries(r.slowdown).map(([tool, ratio]) => [tool, ratio == null ? 'n/a' : ratio.toFixed(2)])),
      `<p>${esc(tracerNote(r))}</p>`);
  }
  body.push(`<h2>Syscalls (${esc(r.tracer)}; per ${esc(r.syscalls[r.tracer].app.per)})</h2>`, htmlTable(SYSCALL_HEAD, syscallRows(r)));
  for (const g of ['app', 'nginx']) {
    body.push(`<h2>${esc(symbolsTitle(r, g))}</h2>`, htmlTable(['share', 'symbol'], r.top[g].slice(0, SHOWN_SYMBOLS).map((s) => [pct(s.share), s.name])));
  }
  body.push('<h2>Accept queues</h2>', '<p>Largest Recv-Q seen during the load / Send-Q (the backlog).</p>',
    r.queues.length ? htmlTable(['listener', 'largest Recv-Q', 'backlog'], r.queues.map((q) => [q.local, String(q.maxRecvQ), String(q.sendQ)])) : '<p>(no listener of the stack was seen by ss)</p>',
    `<p>${esc(tcpLine(r))}</p>`);
  if (r.doctor && r.doctor.length) body.push('<h2>tunekit doctor</h2>', `<ul>${r.doctor.map((d) => `<li>${esc(d)}</li>`).join('')}</ul>`);
  if (r.warnings.length) body.push('<h2>Notes</h2>', `<ul>${r.warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul>`);
  return page('tunekit profile report', body);
}

module.exports = { lines, toMarkdown, toHtml };
