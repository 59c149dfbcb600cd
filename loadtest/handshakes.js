'use strict';
// What one full TLS handshake costs nginx, by the OpenSSL it runs with, the
// leaf key (the kit's ECDSA P-256 against the RSA 2048 of tls-stock) and the
// key-exchange group (X25519 against the hybrid post-quantum X25519MLKEM768
// where the library has it), side by side in one run:
//
//   node loadtest/handshakes.js [--kit] [--rootfs DIR]... [--rounds 5] [--seconds 3] [--json FILE]
//
// The local nginx is one front; each --rootfs is another Debian root
// filesystem (debootstrap) whose own nginx, OpenSSL and curl run chrooted
// (lib/chroot.js), on this machine's loopback. Every round measures every
// front, key and group once, in an order that rotates between rounds, so a
// machine that speeds up or slows down does so for all of them alike.
// One measurement: a minimal TLS 1.3 server (one worker, `return 204`, no
// session cache, no tickets: every connection is a full handshake) and a curl
// of the same filesystem (the same OpenSSL, so it can offer the group) making a
// new connection per request (`Connection: close`, --no-sessionid) for
// --seconds; nginx's CPU (master and worker, scheduler runtime) divided by the
// requests nginx logged (one per connection: each a full handshake). The group each pair negotiated is read once with openssl s_client.
// With --kit, the fronts measured are the kit's own, as `bench --https` renders
// them, with the app behind (handshakes-kit.js): tls-stock against tls-tuned
// per full handshake, and HTTP/3 against HTTP/2 per new connection where the
// nginx has HTTP/3.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { freePort, childrenOf } = require('../lib/proc');
const { opensslOf, findNginx, nginxBuildText, nginxVersion } = require('../lib/nginx');
const { runInRoot } = require('../lib/chroot');
const { compareVersions } = require('../lib/template');
const { loadDefaults } = require('../lib/config');
const { readSchedstatUs } = require('./cpu');
const { spread, ratio, roundOrder } = require('./stats');
const { roundKit, negotiated, STALL_S } = require('./handshakes-kit');

const ROOT = path.join(__dirname, '..');
const KEYS = {
  ec: ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  rsa: ['-newkey', 'rsa:2048'],
};
const KIT_INSIDE = '/tmp/tunekit-kit';

/** The groups to compare on an OpenSSL: X25519, and the hybrid where it exists. */
function groupsFor(openssl) {
  const { since } = loadDefaults().tunekit_openssl_versions.features.mlkem_hybrid;
  return compareVersions(openssl, since) >= 0 ? ['X25519', 'X25519MLKEM768'] : ['X25519'];
}

function must(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${what}: \`${cmd} ${args.join(' ')}\` failed: ${(r.stderr || r.error || '').toString().trim()}`);
  return r;
}

function serverConf(dir, port, key, group) {
  return [
    'daemon off;', 'worker_processes 1;', `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log warn;`,
    'events { worker_connections 1024; }',
    'http {', `  log_format hs '$status'; access_log ${dir}/${key}-${group}.log hs;`,
    `  server { listen 127.0.0.1:${port} ssl; ssl_certificate ${dir}/${key}.crt; ssl_certificate_key ${dir}/${key}.key;`,
    `    ssl_protocols TLSv1.3; ssl_session_cache off; ssl_session_tickets off; ssl_ecdh_curve ${group};`,
    '    location / { return 204; } }',
    '}', '',
  ].join('\n');
}

/** nginx master + worker scheduler runtime, µs. */
function nginxCpuUs(master) {
  return [master, ...childrenOf(master)].reduce((sum, pid) => sum + (readSchedstatUs(pid) || 0), 0);
}

/** Full handshakes for `seconds` against one key and group; resolves the figures. */
async function measureOne(dir, key, group, seconds) {
  const port = await freePort();
  const conf = path.join(dir, `${key}-${group}.conf`);
  fs.writeFileSync(conf, serverConf(dir, port, key, group));
  const nginx = spawn(findNginx() || 'nginx', ['-c', conf], { stdio: 'ignore' });
  const exited = new Promise((resolve) => nginx.on('exit', resolve));
  try {
    await waitListening(port, () => fs.readFileSync(path.join(dir, 'error.log'), 'utf8'));
    const group0 = negotiated(port, group);
    const before = nginxCpuUs(nginx.pid);
    await curlFor(port, group, seconds);
    const cpuUs = nginxCpuUs(nginx.pid) - before;
    // One request per connection, so nginx's 204 lines are the full handshakes.
    const handshakes = (fs.readFileSync(path.join(dir, `${key}-${group}.log`), 'utf8').match(/^204$/gm) || []).length;
    if (!handshakes) throw new Error(`no request reached nginx on 127.0.0.1:${port} with the group ${group}`);
    return { key, group, negotiated: group0, handshakes, cpuUs, usPerHandshake: handshakes ? cpuUs / handshakes : null };
  } finally {
    nginx.kill('SIGTERM');
    await exited;
  }
}

/** Resolves once something accepts on 127.0.0.1:port (nginx is up), or throws with its error log. */
async function waitListening(port, errorLog) {
  const net = require('node:net');
  const end = Date.now() + 10000;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); }).on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`nginx did not listen on 127.0.0.1:${port} within 10 s: ${errorLog()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** curl, a new connection and a full handshake per request, stopped after `seconds`. */
function curlFor(port, group, seconds) {
  return new Promise((resolve, reject) => {
    const curl = spawn('curl', ['-sSk', '--no-sessionid', '--tlsv1.3', '--curves', group, '-H', 'Connection: close',
      '-o', '/dev/null', `https://127.0.0.1:${port}/[1-1000000]`], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    curl.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => curl.kill('SIGTERM'), seconds * 1000);
    curl.on('error', (e) => { clearTimeout(timer); reject(new Error(`curl: ${e.message} (apt-get install -y curl)`)); });
    curl.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGTERM') resolve();
      else reject(new Error(`curl ended before its ${seconds} s (exit ${code}): ${err.trim()}`));
    });
  });
}

/** One round in this filesystem: every key × group once, in the round's order. */
async function roundHere({ seconds, round }) {
  const build = nginxBuildText();
  if (!build) throw new Error('no nginx to run here (apt-get install -y nginx)');
  const openssl = opensslOf(build);
  const version = nginxVersion();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-handshakes-'));
  try {
    for (const [key, args] of Object.entries(KEYS)) {
      must('openssl', ['req', '-x509', ...args, '-nodes', '-keyout', path.join(dir, `${key}.key`), '-out', path.join(dir, `${key}.crt`),
        '-days', '2', '-subj', '/CN=localhost'], `a throwaway ${key} certificate`);
    }
    const pairs = Object.keys(KEYS).flatMap((key) => groupsFor(openssl).map((group) => `${key}/${group}`));
    const results = [];
    for (const pair of roundOrder(pairs, round)) {
      const [key, group] = pair.split('/');
      results.push(await measureOne(dir, key, group, seconds));
    }
    return { nginx: version, openssl, results };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One round in a root filesystem: this file, run by that tree's own Node. */
async function roundIn(rootfs, { seconds, round, kit }) {
  const script = `node ${KIT_INSIDE}/loadtest/handshakes.js --round ${round} --seconds ${seconds}${kit ? ' --kit' : ''}`;
  const r = await runInRoot(rootfs, script, { binds: { [ROOT]: KIT_INSIDE }, timeoutMs: (seconds * 8 + 120) * 1000 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.code !== 0 || !line) throw new Error(`a round in ${rootfs} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return JSON.parse(line);
}

/** Every front, `rounds` times; the per-round figures and their summary. */
async function run({ rootfs = [], rounds = 5, seconds = 3, kit = false, log = (m) => process.stderr.write(`${m}\n`) } = {}) {
  const fronts = ['local', ...rootfs];
  const here = kit ? roundKit : roundHere;
  const raw = [];
  for (let round = 0; round < rounds; round++) {
    for (const front of roundOrder(fronts, round)) {
      const r = front === 'local' ? await here({ seconds, round }) : await roundIn(front, { seconds, round, kit });
      const figures = kit ? r.results.map((x) => `${x.front}/${x.client} ${x.usPerConnection.toFixed(0)} µs per connection${x.stalled ? ` (${x.stalled} stalled)` : ''}`)
        : r.results.map((x) => `${x.key}/${x.group} ${x.usPerHandshake ? x.usPerHandshake.toFixed(0) : '-'} µs`);
      log(`round ${round + 1}/${rounds} ${front === 'local' ? 'local' : path.basename(front)}: nginx ${r.nginx}, OpenSSL ${r.openssl}: ${figures.join(', ')}`);
      raw.push({ round, front: front === 'local' ? 'local' : path.basename(front), ...r });
    }
  }
  return { kit, rounds, seconds, fronts, raw, summary: kit ? summarizeKit(raw) : summarize(raw) };
}

/**
 * --kit: per filesystem, nginx CPU per full handshake of tls-stock and
 * tls-tuned (per connection minus plain's, each round) and their ratio; per new
 * connection over HTTP/2 and HTTP/3 and theirs; medians and spread over rounds.
 */
function summarizeKit(raw) {
  const out = [];
  for (const front of [...new Set(raw.map((r) => r.front))]) {
    const rounds = raw.filter((r) => r.front === front);
    const per = rounds.map((r) => Object.fromEntries(r.results.map((x) => [`${x.front}/${x.client}`, x.usPerConnection])));
    const hs = (f) => per.map((m) => m[`${f}/h1`] - m['plain/h1']);
    const stock = hs('tls-stock');
    const tuned = hs('tls-tuned');
    const { nginx, openssl, http3, groups } = rounds[0];
    const counts = (f, c) => rounds.flatMap((r) => r.results.filter((x) => x.front === f && x.client === c));
    const sum = (xs, k) => xs.reduce((a, x) => a + (x[k] || 0), 0);
    const h3 = http3 ? {
      h2: spread(per.map((m) => m['tls-tuned-h3/h2'])),
      h3: spread(per.map((m) => m['tls-tuned-h3/h3'])),
      h3OverH2: spread(per.map((m) => ratio(m['tls-tuned-h3/h3'], m['tls-tuned-h3/h2']))),
      // curls that had no answer in handshakes-kit's STALL_S and were followed by new ones
      stalled: Object.fromEntries(['h2', 'h3'].map((c) => [c, sum(counts('tls-tuned-h3', c), 'stalled')])),
    } : null;
    const handshakes = Object.fromEntries(['tls-stock', 'tls-tuned'].map((f) => [f, { full: sum(counts(f, 'h1'), 'full'), resumed: sum(counts(f, 'h1'), 'resumed') }]));
    out.push({
      front, nginx, openssl, groups, handshakes,
      plain: spread(per.map((m) => m['plain/h1'])),
      stock: spread(stock),
      tuned: spread(tuned),
      tunedOverStock: spread(tuned.map((t, i) => ratio(t, stock[i]))),
      h3,
    });
  }
  return out;
}

/** Medians and spread per front × key × group, and the two ratios per round. */
function summarize(raw) {
  const rows = {};
  for (const r of raw) {
    for (const x of r.results) {
      const id = `${r.front}|${x.key}|${x.group}`;
      rows[id] = rows[id] || { front: r.front, nginx: r.nginx, openssl: r.openssl, key: x.key, group: x.group, negotiated: new Set(), us: [] };
      rows[id].us.push(x.usPerHandshake);
      rows[id].negotiated.add(x.negotiated);
    }
  }
  const perRound = (front, pick) => raw.filter((r) => r.front === front).map((r) => pick(Object.fromEntries(r.results.map((x) => [`${x.key}/${x.group}`, x.usPerHandshake]))));
  const fronts = [...new Set(raw.map((r) => r.front))];
  return {
    rows: Object.values(rows).map((row) => ({ ...row, negotiated: [...row.negotiated], us: spread(row.us) })),
    // The hybrid's price on the kit's key, and the kit's key against stock's RSA, per round.
    hybridOverX25519: Object.fromEntries(fronts.map((f) => [f, spread(perRound(f, (m) => ratio(m['ec/X25519MLKEM768'], m['ec/X25519'])))])),
    ecOverRsa: Object.fromEntries(fronts.map((f) => [f, spread(perRound(f, (m) => ratio(m['ec/X25519'], m['rsa/X25519'])))])),
  };
}

function fmt(s, digits = 0) {
  return s && s.median != null ? `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})` : 'n/a';
}

/** The Markdown tables of a --kit run. */
function markdownKit(doc) {
  const s = doc.summary;
  return [
    `nginx CPU, µs: median (min–max) of ${doc.rounds} rounds of ${doc.seconds} s per front and client`,
    '',
    '| filesystem | nginx | OpenSSL | group negotiated (stock, tuned) | plain, per connection | tls-stock, per full handshake | tls-tuned, per full handshake | tuned / stock, per round |',
    '|---|---|---|---|---|---|---|---|',
    ...s.map((r) => `| ${r.front} | ${r.nginx} | ${r.openssl} | ${r.groups['tls-stock']}, ${r.groups['tls-tuned']} | ${fmt(r.plain)} | ${fmt(r.stock)} | ${fmt(r.tuned)} | ${fmt(r.tunedOverStock, 2)} |`),
    '',
    'full / resumed handshakes nginx logged: ' + s.map((r) => `${r.front} stock ${r.handshakes['tls-stock'].full}/${r.handshakes['tls-stock'].resumed}, tuned ${r.handshakes['tls-tuned'].full}/${r.handshakes['tls-tuned'].resumed}`).join('; '),
    '',
    '| filesystem | nginx | OpenSSL | HTTP/2, per new connection | HTTP/3, per new connection | HTTP/3 / HTTP/2, per round |',
    '|---|---|---|---|---|---|',
    ...s.filter((r) => r.h3).map((r) => `| ${r.front} | ${r.nginx} | ${r.openssl} | ${fmt(r.h3.h2)} | ${fmt(r.h3.h3)} | ${fmt(r.h3.h3OverH2, 2)} |`),
    '',
    ...stalledNote(s),
  ].join('\n');
}

/** A line naming the HTTP/2 and HTTP/3 curls that stalled (each counted as a connection, and followed by a new one), if any did. */
function stalledNote(summary) {
  const stalls = summary.filter((r) => r.h3 && r.h3.stalled.h2 + r.h3.stalled.h3 > 0);
  if (!stalls.length) return [];
  return [`curls that stalled (no answer in ${STALL_S} s; each counted as a connection and followed by a new one): ` +
    stalls.map((r) => `${r.front} HTTP/2 ${r.h3.stalled.h2}, HTTP/3 ${r.h3.stalled.h3}`).join('; '), ''];
}

/** The Markdown table of a run. */
function markdown(doc) {
  const lines = [
    `nginx CPU per full TLS 1.3 handshake, µs: median (min–max) of ${doc.rounds} rounds of ${doc.seconds} s each`,
    '',
    '| front | nginx | OpenSSL | leaf key | group | negotiated | µs per handshake |',
    '|---|---|---|---|---|---|---|',
    ...doc.summary.rows.map((r) => `| ${r.front} | ${r.nginx} | ${r.openssl} | ${r.key === 'ec' ? 'ECDSA P-256' : 'RSA 2048'} | ${r.group} | ${r.negotiated.join(', ')} | ${fmt(r.us)} |`),
    '',
    '| front | ECDSA / RSA (X25519), per round | X25519MLKEM768 / X25519 (ECDSA), per round |',
    '|---|---|---|',
    ...Object.keys(doc.summary.ecOverRsa).map((f) => `| ${f} | ${fmt(doc.summary.ecOverRsa[f], 2)} | ${fmt(doc.summary.hybridOverX25519[f], 2)} |`),
    '',
  ];
  return lines.join('\n');
}

const USAGE = 'usage: node loadtest/handshakes.js [--kit] [--rootfs DIR]... [--rounds N] [--seconds S] [--json FILE]';
const HELP = `${USAGE}

nginx CPU per full TLS 1.3 handshake, side by side: the local nginx and, for each
--rootfs, that Debian root filesystem's own nginx, OpenSSL and curl (chrooted, on
this machine's loopback); leaf keys ECDSA P-256 and RSA 2048; groups X25519 and,
where the OpenSSL is 3.5 or later, X25519MLKEM768. Needs root.

With --kit, the fronts are the kit's own as \`bench --https\` renders them, the
app behind each (loadtest/handshakes-kit.js): nginx CPU per full handshake on
tls-stock (RSA 2048, nginx defaults) and tls-tuned (the kit's front), each
minus the plain front's per connection, with each filesystem's curl over
HTTP/1.1; and, where the nginx has HTTP/3, per new connection over HTTP/2
against HTTP/3 alone on tls-tuned with tunekit_nginx_http3 on.

  --rootfs DIR   a debootstrap tree with nginx, curl, openssl and nodejs (repeatable),
                 e.g. debootstrap --variant=minbase --include=nginx,curl,openssl,nodejs trixie DIR
  --kit          measure the kit's fronts (above) instead of the minimal server
  --rounds N     interleaved rounds (default 5)
  --seconds S    seconds of handshakes per front, key and group in a round (default 3)
  --json FILE    write every round's figures and the summary as JSON`;

function parseArgs(argv) {
  const o = { rootfs: [], rounds: 5, seconds: 3, json: null, round: null, kit: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--rootfs') o.rootfs.push(path.resolve(next()));
    else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--seconds') o.seconds = Number(next());
    else if (a === '--json') o.json = next();
    else if (a === '--round') o.round = Number(next());
    else if (a === '--kit') o.kit = true;
    else if (a === '--help' || a === '-h') o.help = true;
    else throw new Error(`unknown option ${a}; ${USAGE}`);
  }
  for (const k of ['rounds', 'seconds']) {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new Error(`--${k} must be a whole number of at least 1, not ${o[k]}`);
  }
  return o;
}

async function main(argv) {
  let o;
  try {
    o = parseArgs(argv);
  } catch (err) {
    process.stderr.write(`handshakes: ${err.message}\n`);
    return 2;
  }
  if (o.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  if (o.round != null) { // one round inside a root filesystem, for run()
    const here = o.kit ? roundKit : roundHere;
    process.stdout.write(`${JSON.stringify(await here({ seconds: o.seconds, round: o.round }))}\n`);
    return 0;
  }
  if (process.getuid() !== 0) {
    process.stderr.write('handshakes: needs root (it reads nginx\'s CPU and chroots into --rootfs trees); run it with sudo\n');
    return 2;
  }
  const doc = await run(o);
  process.stdout.write(doc.kit ? markdownKit(doc) : markdown(doc));
  if (o.json) fs.writeFileSync(o.json, `${JSON.stringify(doc, null, 2)}\n`);
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (err) => {
    process.stderr.write(`handshakes: ${err.message}\n`);
    process.exitCode = 1;
  });
}

module.exports = { run, summarize, summarizeKit, markdown, markdownKit, groupsFor, serverConf, parseArgs };
