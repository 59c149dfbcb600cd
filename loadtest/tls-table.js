'use strict';
// The tables and verdicts of `tunekit bench --https` (loadtest/tls-bench.js),
// shared by the terminal, the Markdown and the HTML report.

const { int, fixed, spreadText } = require('./format');
const { intervalText, intervalCell, boundText } = require('./interval');

// The targets the TLS bench is held to, and how each is read from a report.
const TARGETS = [
  { name: 'new-client connections per second, tls-tuned / tls-stock', at: 'new', key: 'reqPerSec', min: 3 },
  { name: 'nginx CPU per full handshake, tls-tuned / tls-stock', at: 'new', key: 'handshakeCpuUs', max: 0.33 },
];
const RESUMED_TARGET = 0.9;

const pct = (x) => (x == null ? '–' : `${(x * 100).toFixed(1)}%`);
const f2 = (n) => fixed(n, 2);

const SUMMARY_HEAD = ['front', 'client', 'driver', 'req/s (= conn/s for new, returning)', 'p50 µs', 'p99 µs',
  'nginx µs/req', 'srv µs/req', 'handshake µs', 'full', 'resumed', 'resumed %', 'errors', 'gen CPU'];

function summaryRow(s) {
  return [
    s.front, s.client, s.driver, spreadText(s.reqPerSec), spreadText(s.latencyUs.p50), spreadText(s.latencyUs.p99),
    spreadText(s.nginxCpuUsPerReq), spreadText(s.cpuUsPerReq), s.handshakeCpuUs ? spreadText(s.handshakeCpuUs) : '–',
    s.handshakes ? int(s.handshakes.full) : '–', s.handshakes ? int(s.handshakes.resumed) : '–',
    s.handshakes ? pct(s.handshakes.resumedShare) : '–', int(s.errors),
    spreadText(s.generatorMachineShare, (n) => `${Math.round(n * 100)}%`),
  ];
}

const RATIO_HEAD = ['ratio', 'req/s', 'srv µs/req', 'nginx µs/handshake'];

// Each cell: the geometric mean of the per-round ratios and its 95% interval (interval.js).
function ratioRow(x) {
  return [x.name, intervalCell(x.reqPerSec.ci), intervalCell(x.cpuUsPerReq.ci), x.handshakeCpuUs ? intervalCell(x.handshakeCpuUs.ci) : '–'];
}

const GZIP_HEAD = ['gzip', 'bytes/response', 'nginx µs/req', 'req/s'];

function gzipRows(g) {
  return [
    ['off', spreadText(g.bytesPerResponse.identity), spreadText(g.nginxCpuUsPerReq.identity, fixed), spreadText(g.reqPerSec.identity)],
    [`level ${g.level}`, spreadText(g.bytesPerResponse.gzip), spreadText(g.nginxCpuUsPerReq.gzip, fixed), spreadText(g.reqPerSec.gzip)],
  ];
}

function gzipLine(g) {
  if (!g) return null;
  return `gzip level ${g.level} on ${g.url}: ${pct(g.savedShare)} of the bytes saved ` +
    `(${int(g.bytesPerResponse.identity.median)} → ${int(g.bytesPerResponse.gzip.median)} per response) for ` +
    `${spreadText(g.extraCpuUsPerReq, fixed)} µs more nginx CPU per response, ${fixed(g.cpuUsPerKb, 2)} µs per KB compressed`;
}

// What bounds the two handshake ratios on this machine, from the same run:
// - connections per second: the generator's own handshake and the request
//   path cost the same for both fronts and share the cores with nginx, so the
//   ratio cannot exceed stock's total CPU per connection over tuned's;
// - CPU per full handshake: the key type changes only the signature (openssl
//   speed: RSA 2048 vs ECDSA P-256); the rest of tuned's handshake (key
//   exchange, the TLS library's own work) stays.
function limits(doc) {
  const out = [];
  const at = (front) => doc.summary.find((r) => r.front === front && r.client === 'new');
  const stock = at('tls-stock');
  const tuned = at('tls-tuned');
  if (!stock || !tuned) return out;
  const total = (r) => (r.cpuUsPerReq.median != null && r.generatorCpuUsPerReq.median != null ? r.cpuUsPerReq.median + r.generatorCpuUsPerReq.median : null);
  const ts = total(stock);
  const tt = total(tuned);
  if (ts && tt) {
    out.push(`why: a new connection costs server + generator CPU ${int(ts)} µs on tls-stock, ${int(tt)} µs on tls-tuned ` +
      `(the generator alone ${int(stock.generatorCpuUsPerReq.median)} and ${int(tuned.generatorCpuUsPerReq.median)} µs): ` +
      `with both on this machine's ${doc.host.cores} cores, connections per second can differ by at most ${f2(ts / tt)}×`);
  }
  const hs = tuned.handshakeCpuUs && tuned.handshakeCpuUs.median;
  if (doc.crypto && hs) {
    const rest = hs - doc.crypto.ecdsaP256SignUs;
    out.push(`why: of tls-tuned's ${int(hs)} µs per full handshake, the ECDSA signature is ${fixed(doc.crypto.ecdsaP256SignUs)} µs; ` +
      `the other ${int(rest)} µs do not depend on the key, so RSA 2048 (${int(doc.crypto.rsa2048SignUs)} µs per signature) ` +
      `puts the best ratio here at ${f2(hs / (rest + doc.crypto.rsa2048SignUs))}×`);
  }
  return out;
}

// One line per target: the measured ratio with its 95% interval over the rounds, and
// the target judged on the interval (met / not met / not resolved by this run).
function verdicts(doc) {
  const lines = [];
  for (const t of TARGETS) {
    const x = doc.ratios.find((r) => r.client === t.at);
    const s = x && x[t.key];
    if (!s || !s.ci || s.ci.estimate == null) {
      lines.push(`${t.name}: not measured`);
      continue;
    }
    const goal = t.min != null ? `≥ ${t.min}×` : `≤ ${t.max}×`;
    lines.push(`${t.name}: ${intervalText(s.ci)} (target ${goal}: ${boundText(s.ci, t)})`);
  }
  for (const server of ['tls-tuned', 'tls-stock']) {
    const s = doc.summary.find((r) => r.front === server && r.client === 'returning');
    if (!s || !s.handshakes) continue;
    const share = s.handshakes.resumedShare;
    const goal = server === 'tls-tuned' ? ` (target ≥ ${RESUMED_TARGET * 100}%: ${share >= RESUMED_TARGET ? 'met' : 'not met'})` : '';
    lines.push(`returning clients resumed on ${server}: ${pct(share)} of ${int(s.handshakes.full + s.handshakes.resumed)} handshakes${goal}`);
  }
  const n = doc.summary.find((r) => r.front === 'tls-tuned' && r.client === 'new');
  if (n && n.handshakes) lines.push(`new clients on tls-tuned: ${int(n.handshakes.full)} full handshakes, ${int(n.handshakes.resumed)} resumed (each should be full)`);
  lines.push(...limits(doc));
  for (const [name, what] of Object.entries(doc.fronts || {})) lines.push(`${name} negotiated ${what}`);
  if (doc.crypto) {
    lines.push(`signatures on this machine (openssl speed): RSA 2048 ${fixed(doc.crypto.rsa2048SignUs)} µs, ECDSA P-256 ${fixed(doc.crypto.ecdsaP256SignUs)} µs per sign`);
  }
  const g = gzipLine(doc.gzip);
  if (g) lines.push(g);
  return lines;
}

// What the terminal report adds after the two tables: gzip and a legend.
function extraText(doc, render) {
  return [
    ...(doc.gzip ? ['', `gzip on the tls-tuned front (${doc.gzip.url}, keep-alive, wrk)`, render(GZIP_HEAD, gzipRows(doc.gzip))] : []),
    'handshake µs: nginx CPU per connection over TLS minus plain\'s, same client kind and round. full/resumed: counted',
    'from nginx\'s access log ($ssl_session_reused). gen CPU: the load generator\'s share of all cores.',
  ];
}

module.exports = { TARGETS, RESUMED_TARGET, SUMMARY_HEAD, summaryRow, RATIO_HEAD, ratioRow, GZIP_HEAD, gzipRows, verdicts, extraText };
