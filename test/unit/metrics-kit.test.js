'use strict';
// The part of the kit the tunekit_metrics role ships to a host for the sampler
// (roles/tunekit_metrics/vars/main.yml tunekit_metrics_kit_paths), packed as the
// role packs it (roles/tunekit_app/files/app-archive.py --only) and unpacked
// alone: the sampler runs from it (doctor's evaluation needs nothing else of the
// checkout), and two packs of the same kit are the same bytes (unarchive then
// finds no change on the host).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const YAML = require('yaml');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { nginxBinary } = require('../../lib/nginx');

const ARCHIVER = path.join(ROOT, 'roles/tunekit_app/files/app-archive.py');
const PATHS = YAML.parse(fs.readFileSync(path.join(ROOT, 'roles/tunekit_metrics/vars/main.yml'), 'utf8')).tunekit_metrics_kit_paths;

function pack(dest) {
  const r = spawnSync('python3', [ARCHIVER, ROOT, dest, ...PATHS.map((p) => `--only=${p}`)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return fs.readFileSync(dest);
}

test('the sampler runs from the kit archive alone and writes doctor\'s verdicts; the archive is the same bytes each time', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-metrics-kit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const a = pack(path.join(dir, 'a.tar.gz'));
  assert.ok(a.equals(pack(path.join(dir, 'b.tar.gz'))), 'two packs of the same kit differ');
  const kit = path.join(dir, 'kit');
  fs.mkdirSync(kit);
  const x = spawnSync('tar', ['-xzf', path.join(dir, 'a.tar.gz'), '-C', kit], { encoding: 'utf8' });
  assert.equal(x.status, 0, x.stderr);
  assert.ok(!fs.existsSync(path.join(kit, 'node_modules/autocannon')), 'only the modules doctor loads are shipped');

  const { vars } = renderer.render(config.resolve(), path.join(dir, 'host'), { prefix: true, layers: ['nginx', 'app'] });
  const textfiles = path.join(dir, 'textfile');
  fs.mkdirSync(textfiles);
  const r = spawnSync(process.execPath, [path.join(kit, 'metrics/queue-sampler.js'), '--textfile-dir', textfiles, '--once',
    '--nginx-conf', path.join(vars.tunekit_nginx_conf_dir, 'nginx.conf'), '--nginx-bin', nginxBinary(), '--app-config', vars.tunekit_app_config_path],
  { encoding: 'utf8', cwd: dir, env: { ...process.env, NODE_PATH: '' } });
  assert.equal(r.status, 0, r.stderr);
  const text = fs.readFileSync(path.join(textfiles, 'tunekit-queues.prom'), 'utf8');
  assert.match(text, /^tunekit_rule_broken\{rule="keepalive-race",level="fail",says=""\} 0$/m);
  assert.match(text, /^tunekit_rule_broken\{rule="nofile",level="fail",says=""\} 0$/m);

  // A kit checkout without its npm modules is named, with the fix.
  const bare = spawnSync('python3', [ARCHIVER, path.join(dir, 'host'), path.join(dir, 'c.tar.gz'), '--only=node_modules/yaml'], { encoding: 'utf8' });
  assert.equal(bare.status, 2);
  assert.match(bare.stderr, /no node_modules\/yaml to pack \(--only\): the kit checkout is incomplete; run npm ci in it/);
});
