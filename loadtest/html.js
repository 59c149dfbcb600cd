'use strict';
// The self-contained HTML report: inline CSS and SVG drawn here, no scripts,
// no external URLs, so it opens offline and renders the same everywhere.
// Charts: latency percentile curves (log x: 1/(1-p), as HdrHistogram plots
// them; log y: µs), req/s bars with min–max whiskers, server CPU µs/request
// bars (saturation and fixed rate).

const T = require('./table');

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

function fmtUs(us) {
  if (us >= 1e6) return `${+(us / 1e6).toFixed(1)} s`;
  if (us >= 1e3) return `${+(us / 1e3).toFixed(1)} ms`;
  return `${us} µs`;
}

// Latency percentile curves. series: [{ name, curve: [[pct, us], ...] }].
function curveChart(series, { width = 1000, height = 380 } = {}) {
  const m = { l: 70, r: 300, t: 20, b: 50 };
  const w = width - m.l - m.r;
  const h = height - m.t - m.b;
  const MAX_NINES = 5; // 99.999%
  const xOf = (p) => {
    const q = Math.min(p, 99.999) / 100;
    return m.l + (Math.log10(1 / (1 - q)) / MAX_NINES) * w;
  };
  const values = series.flatMap((s) => s.curve.map(([, v]) => v)).filter((v) => v > 0);
  const lo = Math.floor(Math.log10(Math.max(1, Math.min(...values, 1e9))));
  const hi = Math.ceil(Math.log10(Math.max(...values, 10)));
  const span = Math.max(1, hi - lo);
  const yOf = (v) => m.t + h - ((Math.log10(Math.max(v, 1)) - lo) / span) * h;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="latency percentile curves">`];
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${w}" height="${h}" fill="#fafafa" stroke="#ccc"/>`);
  for (let e = lo; e <= hi; e++) {
    const y = yOf(10 ** e);
    parts.push(`<line x1="${m.l}" x2="${m.l + w}" y1="${y}" y2="${y}" stroke="#e3e3e3"/>`,
      `<text x="${m.l - 6}" y="${y + 4}" text-anchor="end" font-size="11">${esc(fmtUs(10 ** e))}</text>`);
  }
  const ticks = [[0, '0%'], [90, '90%'], [99, '99%'], [99.9, '99.9%'], [99.99, '99.99%'], [99.999, '99.999%']];
  for (const [p, label] of ticks) {
    const x = xOf(p);
    parts.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + h}" stroke="#e3e3e3"/>`,
      `<text x="${x}" y="${m.t + h + 16}" text-anchor="middle" font-size="11">${label}</text>`);
  }
  parts.push(`<text x="${m.l + w / 2}" y="${height - 8}" text-anchor="middle" font-size="12">percentile (log scale of 1/(1−p))</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.curve.filter(([, v]) => v > 0).map(([p, v]) => `${xOf(p).toFixed(1)},${yOf(v).toFixed(1)}`);
    if (pts.length) parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(' ')}"/>`);
    parts.push(`<rect x="${m.l + w + 12}" y="${m.t + i * 18}" width="12" height="12" fill="${color}"/>`,
      `<text x="${m.l + w + 30}" y="${m.t + i * 18 + 10}" font-size="12">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

// Horizontal bars with optional min–max whiskers. bars: [{ name, value, min, max, colorIndex }].
function barChart(bars, { unit = '', width = 1000, digits = 0 } = {}) {
  const rowH = 26;
  const m = { l: 260, r: 140, t: 10, b: 10 };
  const height = m.t + m.b + bars.length * rowH;
  const w = width - m.l - m.r;
  const top = Math.max(...bars.map((b) => Math.max(b.value || 0, b.max || 0)), 1e-9);
  const xOf = (v) => m.l + (v / top) * w;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img">`];
  bars.forEach((b, i) => {
    const y = m.t + i * rowH;
    const color = COLORS[(b.colorIndex != null ? b.colorIndex : i) % COLORS.length];
    parts.push(`<text x="${m.l - 8}" y="${y + 16}" text-anchor="end" font-size="12">${esc(b.name)}</text>`);
    if (b.value == null) {
      parts.push(`<text x="${m.l + 4}" y="${y + 16}" font-size="12" fill="#888">not measured</text>`);
      return;
    }
    parts.push(`<rect x="${m.l}" y="${y + 4}" width="${Math.max(1, xOf(b.value) - m.l).toFixed(1)}" height="${rowH - 8}" fill="${color}"/>`);
    if (b.min != null && b.max != null && b.max > b.min) {
      const cy = y + rowH / 2;
      parts.push(`<line x1="${xOf(b.min).toFixed(1)}" x2="${xOf(b.max).toFixed(1)}" y1="${cy}" y2="${cy}" stroke="#222" stroke-width="1.5"/>`,
        `<line x1="${xOf(b.min).toFixed(1)}" x2="${xOf(b.min).toFixed(1)}" y1="${cy - 5}" y2="${cy + 5}" stroke="#222"/>`,
        `<line x1="${xOf(b.max).toFixed(1)}" x2="${xOf(b.max).toFixed(1)}" y1="${cy - 5}" y2="${cy + 5}" stroke="#222"/>`);
    }
    const label = `${b.value.toLocaleString('en-US', { maximumFractionDigits: digits })}${unit}`;
    parts.push(`<text x="${xOf(Math.max(b.value, b.max || 0)) + 6}" y="${y + 16}" font-size="12">${esc(label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function htmlTable(head, rows) {
  return `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${
    rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
}

function label(r) {
  const mode = r.mode === 'saturation' ? '' : r.mode === 'paced' ? ` paced ${r.targetRate}/s` : ` -R ${r.targetRate}/s`;
  return `${r.scenario} (${r.driver}${mode})`;
}

function charts(doc) {
  if (doc.kind === 'bench-tls') {
    // The last round's curve of each server × client; bars from the medians.
    const last = Math.max(...doc.results.map((r) => r.round));
    const curves = doc.results.filter((r) => r.round === last).map((r) => ({ name: `${r.scenario} (${r.driver})`, curve: r.latencyUs.curve || [] }));
    const rps = doc.summary.map((s, i) => ({ name: `${s.front} ${s.client}`, value: s.reqPerSec.median, min: s.reqPerSec.min, max: s.reqPerSec.max, colorIndex: i }));
    const cpuBars = doc.summary.map((s, i) => ({ name: `${s.front} ${s.client}`, value: s.cpuUsPerReq.median, min: s.cpuUsPerReq.min, max: s.cpuUsPerReq.max, colorIndex: i }));
    return { curves, rps, cpuBars };
  }
  if (doc.kind === 'bench') {
    const curves = doc.summary.map((s) => ({ name: `${s.scenario} (${s.driver})`, curve: s.curve }));
    const rps = doc.summary.map((s, i) => ({ name: `${s.scenario} (${s.driver})`, value: s.reqPerSec.median, min: s.reqPerSec.min, max: s.reqPerSec.max, colorIndex: i }));
    const cpuBars = [];
    doc.summary.forEach((s, i) => {
      cpuBars.push({ name: `${s.scenario} saturation`, value: s.cpuUsPerReq.median, min: s.cpuUsPerReq.min, max: s.cpuUsPerReq.max, colorIndex: i });
      if (s.atRate) cpuBars.push({ name: `${s.scenario} at ${s.atRate.rate}/s`, value: s.atRate.cpuUsPerReq.median, min: s.atRate.cpuUsPerReq.min, max: s.atRate.cpuUsPerReq.max, colorIndex: i });
    });
    const pacedCurves = doc.summary.filter((s) => s.atRate && s.atRate.curve)
      .map((s) => ({ name: `${s.scenario} at ${s.atRate.rate}/s (pacer)`, curve: s.atRate.curve }));
    return { curves, pacedCurves, rps, cpuBars };
  }
  const curves = doc.results.map((r) => ({ name: label(r), curve: r.latencyUs.curve || [] }));
  const rps = doc.results.map((r, i) => ({ name: label(r), value: r.reqPerSec, colorIndex: i }));
  const cpuBars = doc.results.map((r, i) => ({ name: label(r), value: r.server ? r.server.cpuUsPerReq : null, colorIndex: i }));
  return { curves, rps, cpuBars };
}

// The overload bench: goodput and served p99 against the offered load, per stack, and its table.
function overloadBody(doc) {
  const X = require('./overload-table');
  const b = X.bars(doc);
  return [
    '<h2>Headline</h2>',
    `<p>${X.frame(doc).map(esc).join('<br>')}</p>`,
    `<ul class="headline">${X.headlines(doc).map((l) => `<li>${esc(l)}</li>`).join('')}</ul>`,
    '<h2>Goodput against offered load</h2>',
    '<p>2xx answers per second during each step (the step\'s first quarter left out); offered load in multiples of the capacity.</p>',
    barChart(b.goodput, { unit: ' req/s' }),
    '<h2>Served p99 against offered load</h2>',
    '<p>p99 of the 2xx answers, from the intended send time (ms).</p>',
    barChart(b.p99, { unit: ' ms', digits: 1 }),
    '<h2>Steps</h2>',
    htmlTable(X.STEP_HEAD, doc.overload.stacks.flatMap(X.stepRows)),
  ];
}

function toHtml(doc) {
  const h = doc.host;
  if (doc.kind === 'bench-overload') {
    return page('tunekit bench-overload report', [
      '<h1>tunekit bench --overload</h1>',
      `<p class="meta"><code>${esc(doc.command)}</code> — ${esc(doc.createdAt)}<br>${esc(`${h.cores} cores (${h.cpuModel || '?'}), Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}`)}</p>`,
      ...overloadBody(doc),
    ]);
  }
  const c = charts(doc);
  const warnings = [...doc.warnings];
  for (const r of doc.results) for (const w of r.warnings) warnings.push(`${r.scenario}${r.round ? ` round ${r.round}` : ''} (${r.mode}): ${w}`);
  const body = [
    `<h1>tunekit ${esc(doc.kind)}</h1>`,
    `<p class="meta"><code>${esc(doc.command)}</code> — ${esc(doc.createdAt)}<br>${esc(`${h.cores} cores (${h.cpuModel || '?'}), Linux ${h.kernel}, nginx ${h.nginx || '?'}, Node ${h.node}, autocannon ${h.autocannon || '?'}, wrk ${h.wrk || 'not installed'}`)}</p>`,
    '<h2>Headline</h2>',
    `<ul class="headline">${T.headlines(doc).map((l) => `<li>${esc(l)}</li>`).join('')}</ul>`,
    '<h2>Latency by percentile</h2>',
    '<p>From the kit\'s own per-response histogram (µs). Paced runs count from the intended send time.</p>',
    curveChart(c.curves),
    ...(c.pacedCurves && c.pacedCurves.length ? [
      `<h2>Latency by percentile at a fixed rate</h2>`,
      '<p>Evenly paced arrivals; latency from the intended send time (coordinated omission corrected).</p>',
      curveChart(c.pacedCurves),
    ] : []),
    '<h2>Requests per second</h2>',
    doc.kind === 'bench' ? '<p>Median over rounds; whiskers span min–max.</p>' : '',
    barChart(c.rps, { unit: ' req/s' }),
    '<h2>Server CPU per request</h2>',
    '<p>nginx + app processes, scheduler runtime from /proc, divided by requests (µs).</p>',
    barChart(c.cpuBars, { unit: ' µs', digits: 1 }),
  ];
  if (doc.kind === 'bench-tls') {
    const X = require('./tls-table');
    body.push('<h2>Servers × clients</h2>', htmlTable(X.SUMMARY_HEAD, doc.summary.map(X.summaryRow)),
      '<h2>Ratios</h2>', `<p>${esc(T.RATIO_NOTE)}.</p>`, htmlTable(X.RATIO_HEAD, doc.ratios.map(X.ratioRow)));
    if (doc.gzip) body.push('<h2>gzip</h2>', htmlTable(X.GZIP_HEAD, X.gzipRows(doc.gzip)));
    body.push('<h2>Every run</h2>');
  } else if (doc.kind === 'bench') {
    body.push('<h2>Scenarios</h2>', htmlTable(T.SUMMARY_HEAD, doc.summary.map(T.summaryRow)),
      '<h2>Ratios</h2>', `<p>${esc(T.RATIO_NOTE)}.</p>`, htmlTable(T.RATIO_HEAD, doc.ratios.map(T.ratioRow)), '<h2>Every run</h2>');
  } else {
    body.push('<h2>Results</h2>');
  }
  body.push(htmlTable(['round', ...T.RESULT_HEAD], doc.results.map((r) => [r.round || '–', ...T.resultRow(r)])));
  if (warnings.length) body.push('<h2>Warnings</h2>', `<ul>${warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul>`);
  return page(`tunekit ${doc.kind} report`, body);
}

// A whole report page: the one style of every HTML report of the kit
// (loadtest, bench, profile), inline, no scripts, no external URLs.
function page(title, body) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}.meta{color:#555}
table{border-collapse:collapse;font-size:12px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}svg{display:block;margin:8px 0}
.verdict{font-size:16px;padding:8px 12px;background:#f6f8fa;border-left:4px solid #1f77b4}
</style></head><body>
${body.join('\n')}
</body></html>
`;
}

module.exports = { toHtml, page, esc, htmlTable, curveChart, barChart };
