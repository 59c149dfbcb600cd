'use strict';
// Every variable's `# Type:` line is enforced: each variable, fed a wrong value
// of its kind, is refused with one line naming it, the value, its type and where
// the value came from, and `tunekit render` writes nothing.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const config = require('../../lib/config');
const types = require('../../lib/config/types');
const render = require('../../bin/commands/render');
const { runCommand } = require('../lib/util');
const { ROOT } = require('../../lib/template');

const typeOf = types.readTypes(config.defaultFiles());
// Wrong for every kind: a word fails numbers, modes, enums, bools, versions,
// lists and mappings; a negative number fails names; a mapping fails paths,
// strings and URLs.
const WRONG = ['abc', -3, { a: 1 }];

test('every variable of the definition has a Type line of the grammar', () => {
  assert.deepEqual(Object.keys(typeOf), Object.keys(config.loadDefaults()));
  const kinds = new Set(Object.values(typeOf).flatMap((t) => t.alternatives.map((a) => a.kind)));
  // Each kind of the grammar is used, so the loop below tests each.
  assert.deepEqual([...kinds].sort(), [...types.KINDS].sort());
});

test('the defaults fit their types', () => {
  assert.doesNotThrow(() => config.resolve({}));
});

// Each variable gets a wrong value of its kind from a vars file (YAML gives it
// its shape: a string tunable set with --set keeps any text as a string).
for (const [key, type] of Object.entries(typeOf)) {
  test(`${key} (${type.spec}) refuses a wrong value and render writes nothing`, async (t) => {
    const value = WRONG.find((w) => types.mismatch(w, type) !== null);
    assert.ok(value !== undefined, `one of ${JSON.stringify(WRONG)} is wrong for ${type.spec}`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-types-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'vars.yml');
    fs.writeFileSync(file, `${key}: ${JSON.stringify(value)}\n`);
    const out = path.join(dir, 'out');
    await assert.rejects(render.main(['--out', out, '--vars', file]), {
      name: 'ConfigError',
      message: `${key}=${typeof value === 'string' ? value : JSON.stringify(value)} (from ${file}) is not ${type.spec}: expected ${types.expected(type)}`,
    });
    assert.deepEqual(fs.readdirSync(dir), ['vars.yml'], 'nothing written');
  });
}

test('render into an existing directory: a wrong value leaves it as it was', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'keep'), 'before');
  await assert.rejects(render.main(['--out', dir, '--set', 'tunekit_listen_backlog=abc']), { name: 'ConfigError' });
  assert.deepEqual(fs.readdirSync(dir), ['keep']);
  assert.equal(fs.readFileSync(path.join(dir, 'keep'), 'utf8'), 'before');
});

// The wording of each kind, pinned once.
const MESSAGES = [
  ['tunekit_app_workers=abc', 'tunekit_app_workers=abc (from --set tunekit_app_workers=abc) is not int 0..: expected a whole number, at least 0'],
  ['tunekit_sysctl_net_ipv4_tcp_tw_reuse=3', 'tunekit_sysctl_net_ipv4_tcp_tw_reuse=3 (from --set tunekit_sysctl_net_ipv4_tcp_tw_reuse=3) is not int 0..2: expected a whole number 0..2'],
  ['tunekit_nginx_listen_port=99999', 'tunekit_nginx_listen_port=99999 (from --set tunekit_nginx_listen_port=99999) is not port: expected a port number 1..65535'],
  ['tunekit_nginx_client_max_body_size=1x', 'tunekit_nginx_client_max_body_size=1x (from --set tunekit_nginx_client_max_body_size=1x) is not size: expected an nginx size such as 8k, 1m or 4096'],
  ['tunekit_nginx_upstream_keepalive_time=soon', 'tunekit_nginx_upstream_keepalive_time=soon (from --set tunekit_nginx_upstream_keepalive_time=soon) is not duration: expected an nginx time such as 500ms, 60s, 1m or 1h'],
  ['tunekit_socket_mode=rw', 'tunekit_socket_mode=rw (from --set tunekit_socket_mode=rw) is not mode: expected an octal mode of four digits, e.g. "0660"'],
  ['tunekit_app_strategy=bogus', 'tunekit_app_strategy=bogus (from --set tunekit_app_strategy=bogus) is not enum shared | round-robin | per-worker: expected one of shared, round-robin, per-worker'],
  ['tunekit_nginx_worker_processes=0', 'tunekit_nginx_worker_processes=0 (from --set tunekit_nginx_worker_processes=0) is not int 1.. or enum auto: expected a whole number, at least 1, or one of auto'],
  ['tunekit_nginx_reuseport=maybe', 'tunekit_nginx_reuseport=maybe (from --set tunekit_nginx_reuseport=maybe) is not bool: expected true or false'],
  ['tunekit_app_user=-root', 'tunekit_app_user=-root (from --set tunekit_app_user=-root) is not name: expected a name of letters, digits, _ . @ -'],
  ['tunekit_nginx_version=1.22', 'tunekit_nginx_version=1.22 (from --set tunekit_nginx_version=1.22) is not version or enum "": expected a version X.Y.Z, or one of ""'],
  ['tunekit_nginx_disable_sites=default', 'tunekit_nginx_disable_sites=default (from --set tunekit_nginx_disable_sites=default) is not list: expected a YAML list, e.g. [a, b]'],
  ['tunekit_nginx_proxy_pass=upstream', 'tunekit_nginx_proxy_pass=upstream (from --set tunekit_nginx_proxy_pass=upstream) is not url: expected a URL such as http://host/path'],
];
for (const [pair, message] of MESSAGES) {
  test(`message: --set ${pair}`, () => {
    assert.throws(() => config.resolve({ set: [pair] }), { name: 'ConfigError', message });
  });
}

test('a derived value is blamed on the input that was set, not on what derives from it', () => {
  assert.throws(() => config.resolve({ set: ['tunekit_nginx_worker_connections=abc'] }), {
    message: /^tunekit_nginx_worker_connections=abc \(from --set tunekit_nginx_worker_connections=abc\)/,
  });
});

test('a derived value of the wrong type names the template\'s inputs', () => {
  assert.throws(() => config.resolve({ set: ['tunekit_app_keepalive_timeout_ms={{ tunekit_app_name }}'] }), {
    message: 'tunekit_app_keepalive_timeout_ms=tunekit-app (from --set tunekit_app_keepalive_timeout_ms={{ tunekit_app_name }}, derived from tunekit_app_name) is not int 1..: expected a whole number, at least 1',
  });
});

test('a vars file is named as the source; every problem is listed at once', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'bad.yml');
  fs.writeFileSync(file, 'tunekit_app_workers: -3\ntunekit_listen_backlog: abc\n');
  assert.throws(() => config.resolve({ varsFiles: [file] }), {
    message: 'values of the wrong type:\n' +
      `  - tunekit_app_workers=-3 (from ${file}) is not int 0..: expected a whole number, at least 0\n` +
      `  - tunekit_listen_backlog=abc (from ${file}) is not int 1..: expected a whole number, at least 1`,
  });
});

// The commands print one line and exit 2; no stack trace on bad input.
const CLI = [
  ['run', '--set', 'tunekit_app_workers=abc'],
  ['run', '--workers', '-3'],
  ['render', '--out', '/nonexistent-tk/out', '--set', 'tunekit_listen_backlog=abc'],
  ['loadtest', '--set', 'tunekit_listen_backlog=abc'],
  ['bench', '--set', 'tunekit_nginx_worker_connections=abc'],
  ['render', '--out', '/nonexistent-tk/out', '--nginx-version', '1.22'],
];
for (const argv of CLI) {
  test(`tunekit ${argv.join(' ')}: one line naming the variable, exit 2`, async () => {
    const r = await runCommand(process.execPath, [path.join(ROOT, 'bin/tunekit.js'), ...argv], { timeoutMs: 60000 });
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], /^tunekit: tunekit_\w+=\S+ \(from (--set|--workers|--nginx-version) [^)]+\) is not /);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
}

// The Ansible role's copy of the rules is generated from the same Type lines
// (npm run generate; generate.test.js fails when the committed one is stale).

test(`${types.TYPES_TEMPLATE} (as nunjucks renders it) passes the defaults and names every wrong scalar`, () => {
  const { createEnv } = require('../../lib/template');
  const env = createEnv();
  const vars = config.resolve({ set: ['tunekit_nginx_version=1.22.1'] });
  assert.equal(env.render(types.TYPES_TEMPLATE, vars).trim(), '');
  // Wrong values given directly are all named; the derived values are checked
  // only once those fit (a wrong input breaks the expressions), so each half
  // is tried on its own.
  for (const derived of [false, true]) {
    const wrong = { ...vars };
    const expectLines = [];
    for (const [key, type] of Object.entries(typeOf)) {
      if (type.derived !== derived) continue;
      // list and map have no test both Jinja dialects share; YAML gives them their shape.
      if (type.alternatives.some((a) => a.kind === 'list' || a.kind === 'map')) continue;
      // Text, as -e key=value gives it: a word or a negative number.
      const value = ['abc', '-3'].find((w) => types.mismatch(w, type) !== null);
      if (value === undefined) continue; // string and path take any line of text
      wrong[key] = value;
      expectLines.push(`${key}=${value} is not ${type.spec}: expected ${types.expected(type)}`);
    }
    assert.ok(expectLines.length > (derived ? 10 : 60), `${expectLines.length} variables checked`);
    assert.deepEqual(env.render(types.TYPES_TEMPLATE, wrong).trim().split('\n'), expectLines);
  }
});

// ansible-playbook -e key=value passes text (documented Ansible behaviour), and a
// quoted number in YAML is text too: "30" + 5 would be "305". Both sides refuse
// it with the way to pass a number.
test('text where a number or a bool belongs: refused with how to give it', (t) => {
  const hint = (key, value, json) => `${key}="${value}" is text where ${typeOf[key].spec} wants ${json === 'true' || json === 'false' ? 'true or false' : 'a number'}: ` +
    `write it without quotes in YAML; ansible-playbook -e key=value always passes text, so give it as JSON: -e '{"${key}": ${json}}'`;
  const { createEnv } = require('../../lib/template');
  const vars = config.resolve({ set: ['tunekit_nginx_version=1.22.1'] });
  const cases = [['tunekit_nginx_upstream_keepalive_timeout_s', '30', '30'], ['tunekit_nginx_tls', 'False', 'false']];
  const lines = createEnv().render(types.TYPES_TEMPLATE, { ...vars, ...Object.fromEntries(cases.map(([k, v]) => [k, v])) }).trim().split('\n');
  assert.deepEqual(lines, cases.map(([k, v, j]) => hint(k, v, j)).sort((a, b) => lines.indexOf(a) - lines.indexOf(b)));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'vars.yml');
  fs.writeFileSync(file, 'tunekit_nginx_upstream_keepalive_timeout_s: "30"\n');
  assert.throws(() => config.resolve({ varsFiles: [file] }), {
    message: hint('tunekit_nginx_upstream_keepalive_timeout_s', '30', '30').replace(' is text', ` (from ${file}) is text`),
  });
});
