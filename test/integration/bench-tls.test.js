'use strict';
// `tunekit bench --https --http2`, short: the three fronts (plain, tls-stock,
// tls-tuned) really differ in what they negotiate, nginx counts a full
// handshake for each new client and a resumed one for nearly every returning
// client, HTTP/2 is what h2load spoke, gzip shrinks the JSON, reports are
// written and nothing is left running. Invariants only: a 1-second run's
// speed figures on a shared machine mean nothing, and no test asserts them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { alive } = require('../../lib/proc');

const ROOT = path.resolve(__dirname, '../..');

test('bench --https: handshakes counted by nginx, resumption on both TLS fronts, h2, gzip, reports, nothing left running', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-bench-tls-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = (ext) => path.join(dir, `bench-tls.${ext}`);
  const r = await runCommand(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'bench', '--https', '--http2',
    '--rounds', '1', '--duration', '1', '--warmup', '1', '--connections', '8', '--no-progress',
    '--json', out('json'), '--md', out('md'), '--html', out('html')], { cwd: ROOT, timeoutMs: 300000 });
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(fs.readFileSync(out('json'), 'utf8'));
  assert.equal(doc.kind, 'bench-tls');

  // What was compared: RSA 2048 against ECDSA P-256, both over TLS 1.3.
  assert.match(doc.fronts['tls-stock'], /^TLSv1\.3 .*, RSA\S* 2048-bit key/);
  assert.match(doc.fronts['tls-tuned'], /^TLSv1\.3 .*, ECDSA 256-bit key/);
  assert.ok(doc.crypto.rsa2048SignUs > doc.crypto.ecdsaP256SignUs, 'an RSA 2048 signature costs more than an ECDSA P-256 one');

  const row = (front, client) => doc.summary.find((s) => s.front === front && s.client === client);
  for (const s of doc.summary) assert.equal(s.errors, 0, `${s.front} ${s.client}: every request answered`);
  for (const front of ['tls-stock', 'tls-tuned']) {
    // One request per connection: every new client is a full handshake.
    const fresh = row(front, 'new');
    assert.ok(fresh.handshakes.full > 0, `${front}: full handshakes counted`);
    assert.equal(fresh.handshakes.resumed, 0, `${front}: a new client never resumes`);
    assert.ok(fresh.handshakeCpuUs.median != null, `${front}: CPU per full handshake computed`);
    // Returning clients: only each client's first connection is full (tuned:
    // the session cache; stock: nginx's default session tickets).
    const back = row(front, 'returning');
    assert.ok(back.handshakes.resumedShare >= 0.9, `${front}: ${back.handshakes.resumed} resumed of ${back.handshakes.full + back.handshakes.resumed}`);
  }
  assert.equal(row('plain', 'new').handshakes, null, 'plain HTTP has no handshake to count');
  assert.equal(row('plain', 'h2'), undefined, 'no HTTP/2 on the plain listener');
  for (const x of doc.results.filter((y) => y.client === 'h2')) assert.equal(x.raw.protocol, 'h2', `${x.scenario}: ALPN chose h2`);
  for (const x of doc.results.filter((y) => y.client === 'new')) assert.equal(x.driver, 'h2load');

  assert.deepEqual(doc.ratios.map((x) => x.name), ['tls-tuned/tls-stock new', 'tls-tuned/tls-stock returning',
    'tls-tuned/tls-stock keepalive', 'tls-tuned/tls-stock h2']);
  assert.ok(doc.ratios[0].reqPerSec.median > 0 && doc.ratios[0].handshakeCpuUs.median > 0);

  // gzip: the same JSON, smaller, for more nginx CPU.
  assert.ok(doc.gzip.bytesPerResponse.gzip.median < doc.gzip.bytesPerResponse.identity.median / 2, 'gzip at least halves the JSON');
  assert.ok(doc.gzip.savedShare > 0.5);

  assert.match(r.stdout, /^new-client connections per second, tls-tuned \/ tls-stock: /m);
  assert.match(r.stdout, /^returning clients resumed on tls-tuned: /m);
  assert.match(fs.readFileSync(out('md'), 'utf8'), /^## Targets$/m);
  assert.match(fs.readFileSync(out('html'), 'utf8'), /<h2>Servers × clients<\/h2>/);

  const pids = new Set(doc.results.flatMap((x) => [...x.server.pids.nginx, ...x.server.pids.app]));
  assert.ok(pids.size >= 9, 'three stacks, each with nginx and the app');
  assert.deepEqual([...pids].filter(alive), [], 'no process left running');
});

test('bench --https refuses the plain bench\'s options, and --http2 alone, before anything starts', async () => {
  const bench = (args) => runCommand(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), 'bench', ...args], { cwd: ROOT, timeoutMs: 30000 });
  const mixed = await bench(['--https', '--driver', 'wrk', '--scenarios', 'uds']);
  assert.equal(mixed.code, 2);
  assert.equal(mixed.stderr, 'tunekit: bench --https runs its own fronts and clients; drop --scenarios, --driver\n');
  const alone = await bench(['--http2']);
  assert.equal(alone.code, 2);
  assert.equal(alone.stderr, 'tunekit: --http2 is part of the TLS bench: add --https\n');
});
