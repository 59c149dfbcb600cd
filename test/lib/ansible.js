'use strict';
// Driving site.yml onto booted test hosts (test/lib/nspawn.js), shared by the
// e2e suites: an inventory for the hosts, ansible-playbook runs whose output is
// kept in a log file per run, the play recap parsed, and small helpers to ask a
// host over SSH or through its nginx: HTTP/1.1 (HTTPS when given a CA), HTTP/2,
// and HTTP/3 by the host's own curl (the controller's curl has no HTTP/3).
//
//   const ans = createRunner(hosts, { groupVars: { tunekit_nginx_disable_sites: ['default'] },
//                                     hostVars: { [hosts[0].name]: { tunekit_node_bin: '/opt/node/bin/node' } } });
//   const r = await ans.playbook(['-e', 'x=1'], { limit: hosts[0].name });
//   const t = await ans.playbook(['-vvv'], { env: { ANSIBLE_LOG_PATH: file } });   // more of Ansible's settings
//   // r = { code, out, recap: { host: { ok, changed, unreachable, failed } }, log }
//   ans.cleanup(passed)   // removes the temp dir; keeps the logs unless passed
//
// extraArgs go before each run's own arguments (a later -e wins): suites that
// test the deploy rather than the rollout give ['-e', 'tunekit_serial=100%'] to
// deploy their hosts at once.
//
// With `collection` (test/lib/collection.js installCollection's result) the runs
// use the installed collection instead of the checkout, as an operator outside
// the repository does: a playbook of their own in the runner's directory that
// imports tunekit.stack.site, their own ansible.cfg (the checkout's settings,
// with collections_path and no roles_path), nothing of the checkout on any path.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const http2 = require('node:http2');
const { runCommand } = require('./util');
const { defaultFiles } = require('../../lib/config');

const ROOT = path.resolve(__dirname, '../..');
const ANSIBLE_DIR = path.join(ROOT, 'ansible');
const PLAYBOOK = path.join(ROOT, '.venv/bin/ansible-playbook');

/** The runner's playbook and ansible.cfg: the checkout's, or (collection) an operator's own beside the inventory. */
function playSetup(tmp, collection) {
  if (!collection) return { cwd: ANSIBLE_DIR, playbook: 'site.yml', config: path.join(ANSIBLE_DIR, 'ansible.cfg'), env: {} };
  const cfg = fs.readFileSync(path.join(ANSIBLE_DIR, 'ansible.cfg'), 'utf8')
    .replace(/^roles_path = .*$/m, `collections_path = ${collection.collectionsPath}`)
    // The collection's roles find its module in the collection, not in the checkout.
    .replace(/^library = .*\n/m, '');
  assert.match(cfg, /^collections_path = /m, "ansible/ansible.cfg has no roles_path line to replace");
  assert.doesNotMatch(cfg, /^library = /m, "ansible/ansible.cfg's library line was not removed");
  fs.writeFileSync(path.join(tmp, 'ansible.cfg'), cfg);
  fs.writeFileSync(path.join(tmp, 'site.yml'), [
    '---',
    "- name: The kit's play, from the installed collection",
    '  ansible.builtin.import_playbook: tunekit.stack.site',
    '',
  ].join('\n'));
  return { cwd: tmp, playbook: 'site.yml', config: path.join(tmp, 'ansible.cfg'), env: { ANSIBLE_COLLECTIONS_SCAN_SYS_PATH: 'False' } };
}

function createRunner(hosts, { groupVars = {}, hostVars = {}, name = 'tunekit-e2e', extraArgs = [], collection = null } = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const play = playSetup(tmp, collection);
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-logs-`));
  fs.mkdirSync(path.join(tmp, 'cp'));
  const inventory = path.join(tmp, 'inventory.ini');
  // Each host with its own key and SSH options (hosts booted by separate
  // bootHosts calls have different keys).
  const sshArgs = (h) => h.sshArgs.filter((a) => a !== '-i' && a !== h.keyFile).join(' ');
  fs.writeFileSync(inventory, [
    '[tunekit]',
    ...hosts.map((h) => `${h.name} ansible_host=${h.ip} ansible_ssh_private_key_file=${h.keyFile} ansible_ssh_common_args='${sshArgs(h)}'`),
    '',
    '[tunekit:vars]',
    'ansible_user=root',
    '',
  ].join('\n'));
  // group_vars/ next to the inventory, as an operator keeps them (JSON is YAML).
  fs.mkdirSync(path.join(tmp, 'group_vars'));
  fs.writeFileSync(path.join(tmp, 'group_vars/tunekit.yml'), `${JSON.stringify(groupVars, null, 2)}\n`);
  fs.mkdirSync(path.join(tmp, 'host_vars'));
  // A host's own variables (replaced as a whole), read by every later run.
  function setHostVars(host, v) {
    fs.writeFileSync(path.join(tmp, 'host_vars', `${host}.yml`), `${JSON.stringify(v, null, 2)}\n`);
  }
  for (const [host, v] of Object.entries(hostVars)) setHostVars(host, v);
  let plays = 0;

  async function playbook(args = [], { limit, env = {} } = {}) {
    const r = await runCommand(PLAYBOOK, ['-i', inventory, play.playbook, ...(limit ? ['--limit', limit] : []), ...extraArgs, ...args], {
      cwd: play.cwd,
      env: {
        ...play.env,
        ANSIBLE_CONFIG: play.config,
        ANSIBLE_FORCE_COLOR: '0',
        ANSIBLE_NOCOLOR: '1',
        ANSIBLE_SSH_CONTROL_PATH_DIR: path.join(tmp, 'cp'),
        ANSIBLE_LOCAL_TEMP: path.join(tmp, 'ansible-local'),
        ...env,
      },
      timeoutMs: 900000,
    });
    const recap = {};
    for (const m of r.out.matchAll(/^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)/gm)) {
      recap[m[1]] = { ok: +m[2], changed: +m[3], unreachable: +m[4], failed: +m[5] };
    }
    const log = path.join(logDir, `play-${++plays}.log`);
    fs.writeFileSync(log, r.out);
    return { code: r.code, out: r.out, recap, log };
  }

  function cleanup(passed) {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (passed) fs.rmSync(logDir, { recursive: true, force: true });
    else process.stderr.write(`${name}: playbook logs kept in ${logDir}\n`);
  }

  return { tmp, inventory, logDir, playbook, setHostVars, cleanup };
}

// The last n lines of a run's output, after the lines that say why a task
// failed (at -vvv the failure sits thousands of lines above the end).
function tailOf(text, n = 60) {
  const lines = text.split('\n');
  const why = lines.filter((l) => /^(\[ERROR\]: |fatal: \[|failed: \[|Origin: )/.test(l)).map((l) => l.slice(0, 500));
  const end = lines.slice(-n).join('\n');
  return why.length ? `${why.join('\n')}\n…\n${end}` : end;
}

/**
 * GET through a host's nginx; resolves {status, headers, body}. With `ca` (PEM)
 * over HTTPS, `host` then being the name the certificate covers (SNI and Host).
 */
function get(ip, port, urlPath, { host, ca } = {}) {
  return new Promise((done, fail) => {
    const headers = host ? { host } : {};
    const tls = ca ? { ca, servername: host } : {};
    const req = (ca ? https : http).get({ host: ip, port, path: urlPath, headers, timeout: 10000, agent: false, ...tls }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => done({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${ca ? 'https' : 'http'}://${ip}:${port}${urlPath} timed out`)));
    req.on('error', fail);
  });
}

/** GET over HTTP/2 (TLS, ALPN h2) through a host's nginx for `name`, trusting `ca`; resolves {status, headers, body}. */
function getHttp2(ip, port, urlPath, { name, ca }) {
  return new Promise((done, fail) => {
    const session = http2.connect(`https://${ip}:${port}`, { ca, servername: name });
    session.setTimeout(10000, () => session.destroy(new Error(`HTTP/2 GET https://${ip}:${port}${urlPath} timed out`)));
    session.on('error', fail);
    const req = session.request({ ':path': urlPath, ':authority': name });
    let headers;
    let body = '';
    req.setEncoding('utf8');
    req.on('response', (h) => { headers = h; });
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      session.close();
      done({ status: headers[':status'], headers, body });
    });
    req.on('error', fail);
  });
}

/**
 * GET over HTTP/3 alone (curl --http3-only), by the host's own curl against
 * the host's own address for `name` (--resolve), trusting the CA file on the
 * host; resolves {version, status, body}: version is the HTTP version the
 * response came in, as curl reports it (%{http_version}).
 */
async function curlHttp3(h, port, urlPath, { name, caFile }) {
  const cmd = `curl -sS --http3-only --max-time 10 --cacert ${caFile} --resolve ${name}:${port}:${h.ip} ` +
    `-w '\\ncurl: %{http_version} %{response_code}\\n' https://${name}:${port}${urlPath}`;
  // Debian 13's curl (OpenSSL's own QUIC stack) can stall for good after one
  // lost datagram (loadtest/handshakes-kit.js); curl's --retry would reuse the
  // stalled connection, so a stalled curl (exit 28) is followed by a new one, twice at most.
  let r;
  for (let attempt = 0; attempt < 3; attempt++) {
    r = await h.ssh(cmd);
    if (r.code !== 28) break;
  }
  assert.equal(r.code, 0, `curl --http3-only on ${h.name} failed (${r.code}): ${r.stderr}`);
  const m = /\ncurl: (\S+) (\d+)\n$/.exec(r.stdout);
  assert.ok(m, `curl on ${h.name} printed no version line: ${r.stdout}`);
  return { version: m[1], status: Number(m[2]), body: r.stdout.slice(0, m.index) };
}

/**
 * The non-empty lines one of the role's templates prints on the controller under
 * real Ansible (a template lookup, as the tunekit role's checks render it), with
 * the definition's defaults and `extra` arguments (a later -e wins). varsFiles
 * are loaded first with include_vars, as the role loads vars/rules.yml.
 */
async function templateLines(t, template, extra, { varsFiles = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-ansible-lookup-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const play = path.join(dir, 'play.yml');
  fs.writeFileSync(play, [
    '- hosts: localhost',
    '  gather_facts: false',
    '  connection: local',
    '  tasks:',
    ...varsFiles.flatMap((f) => ['    - name: Load the variables of a role file', `      ansible.builtin.include_vars: ${path.join(ROOT, f)}`]),
    '    - name: Write the lines the template prints',
    '      ansible.builtin.copy:',
    // A heading line, so that no lines is still content.
    `        content: "lines:\\n{{ lookup('ansible.builtin.template', '${path.join(ROOT, template)}') }}"`,
    `        dest: ${path.join(dir, 'lines.txt')}`,
    '        mode: "0600"',
    '',
  ].join('\n'));
  const vars = defaultFiles().flatMap((f) => ['-e', `@${f}`]);
  const r = await runCommand(PLAYBOOK, ['-i', 'localhost,', play, ...vars, '-e', 'tunekit_nginx_version=1.22.1',
    '-e', `ansible_python_interpreter=${path.join(ROOT, '.venv/bin/python')}`, ...extra], {
    cwd: dir, env: { ANSIBLE_NOCOLOR: '1' }, timeoutMs: 300000,
  });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const [heading, ...lines] = fs.readFileSync(path.join(dir, 'lines.txt'), 'utf8').split('\n');
  assert.equal(heading, 'lines:');
  return lines.map((l) => l.trim()).filter(Boolean);
}

/** A command on a host over SSH that must succeed; its trimmed stdout. */
async function sh(host, cmd) {
  const r = await host.ssh(cmd);
  assert.equal(r.code, 0, `on ${host.name}: \`${cmd}\` failed (${r.code}): ${r.stderr}`);
  return r.stdout.trim();
}

module.exports = { createRunner, templateLines, tailOf, get, getHttp2, curlHttp3, sh, ROOT, ANSIBLE_DIR, PLAYBOOK };
