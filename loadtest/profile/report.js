'use strict';
// `tunekit profile`'s output: the same lines for the terminal and the Markdown
// report; the HTML report is the Markdown's content with the flame graph SVG
// embedded. The JSON report is the result itself (loadtest/report.js's document()).

const SHOWN_SYMBOLS = 10;

function pct(x) {
  return x == null ? 'n/a' : `${(x * 100).toFixed(1)}%`;
}

function lines(r) {
  const out = [];
  out.push(`verdict: ${r.verdict.verdict}`);
  for (const e of r.verdict.evidence) out.push(`  - ${e}`);
  if (r.slowdown) {
    out.push('', 'tracer cost (req/s under the tool / req/s without it; the load is the same in each phase):');
    for (const [tool, ratio] of Object.entries(r.slowdown)) out.push(`  ${tool.padEnd(12)} ${ratio == null ? 'n/a' : ratio.toFixed(2)}`);
    out.push(`  the syscall table below is from ${r.tracer} (the smaller slowdown)`);
  }
  out.push('', `syscalls (${r.tracer}; per ${r.syscalls[r.tracer].app.per}):`);
  out.push(`  ${'group'.padEnd(6)} ${'syscall'.padEnd(12)} ${'calls'.padStart(8)} ${'per'.padStart(8)} ${'time'.padStart(7)} ${'µs/call'.padStart(9)}`);
  for (const g of ['nginx', 'app']) {
    const t = r.syscalls[r.tracer][g];
    out.push(`  ${g.padEnd(6)} ${'(all)'.padEnd(12)} ${String(t.totalCalls).padStart(8)} ${t.perUnit.toFixed(2).padStart(8)}`);
    for (const row of t.rows) {
      out.push(`  ${g.padEnd(6)} ${row.name.padEnd(12)} ${String(row.calls).padStart(8)} ${row.perUnit.toFixed(2).padStart(8)} ${pct(row.timeShare).padStart(7)} ${row.usPerCall.toFixed(1).padStart(9)}`);
    }
  }
  for (const g of ['app', 'nginx']) {
    const s = r.shares[g];
    out.push('', `top symbols, ${g} workers (${r.folded[g]} samples; JavaScript ${pct(s.js)}, GC ${pct(s.gc)}, syscalls ${pct(s.syscall)}, other native ${pct(s.native)}):`);
    for (const sym of r.top[g].slice(0, SHOWN_SYMBOLS)) out.push(`  ${pct(sym.share).padStart(6)}  ${sym.name}`);
  }
  out.push('', 'accept queues (largest Recv-Q seen / Send-Q = backlog):');
  if (!r.queues.length) out.push('  (no listener of the stack was seen by ss)');
  for (const q of r.queues) out.push(`  ${q.local}  ${q.maxRecvQ} / ${q.sendQ}`);
  out.push(`  TCP ListenOverflows +${r.tcpDelta.ListenOverflows}, ListenDrops +${r.tcpDelta.ListenDrops} during the perf record phase`);
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

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function toHtml(doc, svg) {
  return `<!doctype html>\n<html><head><meta charset="utf-8"><title>tunekit profile</title></head><body>\n` +
    `<h1>tunekit profile</h1>\n<p><code>${esc(doc.command)}</code> (${esc(doc.createdAt)})</p>\n` +
    `<pre>${esc(lines(doc.results).join('\n'))}</pre>\n${svg ? `<h2>Flame graph</h2>\n${svg}` : ''}</body></html>\n`;
}

module.exports = { lines, toMarkdown, toHtml };
