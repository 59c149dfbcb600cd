'use strict';
// tunekit render --out DIR [--vars FILE.yml]... [--set key=value]... [--prefix]
//                [--check] [--layer NAME]... [--nginx-version X.Y.Z]
//
// Resolves the one definition (lib/config: defaults < --vars files < --set),
// refuses an inconsistent set (naming both values), renders every template of the
// manifest into memory, and only then writes the tree under DIR.

const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const { parseCommandLine } = require('../../lib/args');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const kubernetes = require('../../lib/kubernetes');
const { nginxVersion } = require('../../lib/nginx');
const { makeDirs } = require('../../lib/files');

const HELP = `usage: tunekit render --out DIR [options]

Write the files a host needs (nginx, the app's settings, systemd units, sysctl)
under DIR at their host paths (DIR/etc/nginx/nginx.conf, ...).

options:
  --out DIR         where to write the tree (required)
  --vars FILE.yml   variables file, like ansible-playbook -e @FILE (repeatable;
                    e.g. ansible/profiles/stock.yml, small.yml, large.yml)
  --set key=value   one variable, like -e key=value (repeatable; wins over --vars)
  --prefix          make the tree self-contained and runnable as you: paths point
                    into DIR, so nginx -t -c DIR/etc/nginx/nginx.conf needs no /etc
  --check           render a prefixed copy to a temp dir and run nginx -t on it
                    before anything is written; refuse the render if nginx does
  --layer NAME      only this layer (nginx, app, systemd, sysctl, pm2; repeatable)
  --nginx-version X.Y.Z
                    the nginx version on the target host (\`nginx -v\` there);
                    default: ask the local nginx. Directives the version lacks
                    are left out with a comment (docs/versions.md); below 1.18.0
                    the render is refused
  --target NAME     host (default): the files above; kubernetes: a Deployment
                    (nginx + the runner in one pod), a Service and ConfigMaps,
                    written as DIR/deployment.yaml, service.yaml, configmap.yaml
                    (docs/kubernetes.md)
  -h, --help        this text

Variables and their defaults: ansible/roles/tunekit/defaults/main/.`;

const TARGETS = ['host', 'kubernetes'];

function parse(argv) {
  let parsed;
  parsed = parseCommandLine({
    args: argv,
    options: {
      out: { type: 'string' },
      vars: { type: 'string', multiple: true, default: [] },
      set: { type: 'string', multiple: true, default: [] },
      prefix: { type: 'boolean', default: false },
      check: { type: 'boolean', default: false },
      layer: { type: 'string', multiple: true, default: [] },
      'nginx-version': { type: 'string' },
      target: { type: 'string', default: 'host' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  }, 'tunekit render --help');
  return parsed.values;
}

function renderKubernetes(opts) {
  if (opts.prefix || opts.check || opts.layer.length) {
    throw new UsageError('--prefix, --check and --layer apply to --target host only');
  }
  const overrides = {};
  if (opts['nginx-version'] !== undefined) overrides.tunekit_nginx_version = opts['nginx-version'];
  const outDir = path.resolve(opts.out);
  const { files } = kubernetes.writeKubernetes(outDir, { varsFiles: opts.vars, set: opts.set, overrides });
  console.log(`wrote ${files.length} Kubernetes manifests under ${outDir}:`);
  for (const f of files) console.log(`  ${path.relative(outDir, f)}`);
  console.log(`apply them: kubectl apply -f ${outDir}`);
  return 0;
}

async function main(argv) {
  const opts = parse(argv);
  if (opts.help) {
    console.log(HELP);
    return 0;
  }
  if (!opts.out) throw new UsageError('--out DIR is required; see tunekit render --help');
  if (!TARGETS.includes(opts.target)) {
    throw new UsageError(`unknown target "${opts.target}"; the targets are ${TARGETS.join(', ')}`);
  }
  if (opts.target === 'kubernetes') return renderKubernetes(opts);
  const known = [...new Set(renderer.loadManifest().map((e) => e.layer))];
  for (const l of opts.layer) {
    if (!known.includes(l)) throw new UsageError(`unknown layer "${l}"; the layers are ${known.join(', ')}`);
  }
  const layers = opts.layer.length ? opts.layer : null;

  const flags = [];
  const version = opts['nginx-version'];
  if (version !== undefined) flags.push({ key: 'tunekit_nginx_version', value: version, where: `--nginx-version ${version}` });
  const vars = config.resolve({ varsFiles: opts.vars, set: opts.set, flags });
  if (opts.check) {
    const local = nginxVersion();
    if (local && local !== vars.tunekit_nginx_version) {
      throw new UsageError(`--check runs the local nginx ${local}, but the files are rendered for nginx ${vars.tunekit_nginx_version}; ` +
        'drop --nginx-version to check for this host, or check on the target host');
    }
    renderer.validate(vars, { layers });
    console.log('nginx -t: the rendered configuration is valid');
  }
  const outDir = path.resolve(opts.out);
  // A layer asked for by name whose files all depend on another setting:
  // say which, rather than write nothing in silence.
  for (const l of layers || []) {
    const entries = renderer.loadManifest().filter((e) => e.layer === l);
    if (entries.some((e) => !e.when_var || renderer.applies(e, vars))) continue;
    const when = [...new Set(entries.map((e) => (e.when_equals != null ? `${e.when_var}=${e.when_equals}` : `${e.when_var} set`)))];
    throw new UsageError(`layer ${l} has no file with these settings: its files need ${when.join(' or ')} (e.g. --set ${when[0]})`);
  }
  makeDirs(outDir, { what: `--out ${opts.out}` });
  const { files } = renderer.render(vars, outDir, { prefix: opts.prefix, layers });
  console.log(`wrote ${files.length} files under ${outDir}:`);
  for (const f of files) console.log(`  ${path.relative(outDir, f)}`);
  if (opts.prefix) {
    console.log(`test it: nginx -t -c ${path.join(outDir, 'etc/nginx/nginx.conf')}`);
  }
  return 0;
}

module.exports = { main, HELP };
