'use strict';
// tunekit render --out DIR [--vars FILE.yml]... [--set key=value]... [--prefix]
//                [--check] [--layer NAME]... [--nginx-version X.Y.Z]
//
// Resolves the one definition (lib/config: defaults < --vars files < --set),
// refuses an inconsistent set (naming both values), renders every template of the
// manifest into memory, and only then writes the tree under DIR, all or nothing
// (lib/files.js writeTree): a failure leaves DIR as it was and says which path and why.

const path = require('node:path');
const { UsageError } = require('../../lib/errors');
const command = require('../../lib/command');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const kubernetes = require('../../lib/kubernetes');
const { nginxVersion } = require('../../lib/nginx');
const { appSets, requireApp } = require('../../lib/config/apps');

const TARGETS = ['host', 'kubernetes'];

const COMMAND = {
  name: 'render',
  usage: ['--out DIR [options]'],
  about: 'Write the files a host needs (nginx, the app\'s settings, systemd units, sysctl) under DIR ' +
    'at their host paths (DIR/etc/nginx/nginx.conf, ...), then the numbered steps that install them. ' +
    'Every value comes from the one definition (roles/tunekit/defaults/main/), overridden by ' +
    '--vars files and --set pairs; an inconsistent or unusable set is refused before anything is written. ' +
    'Files already under DIR that the kit does not write are kept, and the kit\'s are written all or nothing: ' +
    'when one cannot be written (a path you may not write, a file where a directory goes), DIR is left as it was, ' +
    'the files it replaced put back, and the error names the path and why.',
  options: {
    out: { type: 'string', value: 'DIR', help: 'where to write the tree (required)' },
    vars: { type: 'string', value: 'FILE.yml', multiple: true, help: 'variables file, like ansible-playbook -e @FILE, e.g. ansible/profiles/small.yml' },
    set: { type: 'string', value: 'KEY=VALUE', multiple: true, help: 'one variable, like -e key=value; wins over --vars' },
    prefix: { type: 'boolean', help: 'make the tree self-contained and runnable as you: paths point into DIR, so nginx -t -c DIR/etc/nginx/nginx.conf needs no /etc' },
    check: { type: 'boolean', help: 'render a prefixed copy to a temp dir and run nginx -t on it before anything is written; refuse the render if nginx does; print only problems' },
    layer: { type: 'string', value: 'NAME', multiple: true, choices: [...new Set(renderer.loadManifest().map((e) => e.layer))], help: 'only this layer; without it, every layer' },
    'nginx-version': { type: 'string', value: 'X.Y.Z', help: 'the nginx version on the target host (`nginx -v` there; default: ask the local nginx). Directives the version lacks are left out with a comment (docs/versions.md); below 1.18.0 the render is refused' },
    app: { type: 'string', value: 'NAME', help: 'with several apps (tunekit_apps): of the per-app files (settings, units), only this app\'s; nginx\'s files still hold every app' },
    target: { type: 'string', value: 'NAME', choices: TARGETS, default: 'host', help: 'host: the files above; kubernetes: a Deployment (nginx + the runner in one pod), a Service and ConfigMaps as DIR/deployment.yaml, service.yaml, configmap.yaml; see docs/kubernetes.md' },
  },
  examples: [
    'tunekit render --out /tmp/tunekit-host --set tunekit_app_workers=4',
    'tunekit render --out /tmp/tunekit-small --vars ansible/profiles/small.yml --layer nginx --check',
    'tunekit render --out /tmp/tunekit-api --vars test/fixtures/apps/three-apps.yml --app api',
  ],
  notes: 'Variables and their defaults: docs/variables.md.',
};

const parse = (argv) => command.parse(COMMAND, argv).values;

function renderKubernetes(opts, written) {
  if (opts.prefix || opts.check || opts.layer.length) {
    throw new UsageError('--prefix, --check and --layer apply to --target host only');
  }
  const overrides = {};
  if (opts['nginx-version'] !== undefined) overrides.tunekit_nginx_version = opts['nginx-version'];
  const outDir = path.resolve(opts.out);
  const { files } = kubernetes.writeKubernetes(outDir, { varsFiles: opts.vars, set: opts.set, overrides, ...written });
  console.log(`wrote ${files.length} Kubernetes manifests under ${outDir}:`);
  for (const f of files) console.log(`  ${path.relative(outDir, f)}`);
  console.log(`apply them: kubectl apply -f ${outDir}`);
  return 0;
}

async function main(argv) {
  const opts = parse(argv);
  if (command.printedHelp(COMMAND, opts)) return 0;
  if (!opts.out) throw new UsageError('--out DIR is required; see tunekit render --help');
  // How a failed write names DIR, and the command as root for a DIR only root may write.
  const written = { what: `--out ${opts.out}`, asRoot: command.asRoot(COMMAND.name, argv) };
  if (opts.target === 'kubernetes') return renderKubernetes(opts, written);
  const layers = opts.layer.length ? opts.layer : null;

  const flags = [];
  const version = opts['nginx-version'];
  if (version !== undefined) flags.push({ key: 'tunekit_nginx_version', value: version, where: `--nginx-version ${version}` });
  // A host's files (not a --prefix tree, which runs as you): the app unit's sandbox is checked too.
  const vars = config.resolve({ varsFiles: opts.vars, set: opts.set, flags, host: !opts.prefix });
  // Before anything is written, with or without --prefix/--check.
  for (const set of appSets(vars)) renderer.requireAbsolutePaths(set);
  if (opts.app !== undefined) requireApp(vars, opts.app); // before anything is written
  if (opts.check) {
    const local = nginxVersion();
    if (local && local !== vars.tunekit_nginx_version) {
      throw new UsageError(`--check runs the local nginx ${local}, but the files are rendered for nginx ${vars.tunekit_nginx_version}; ` +
        'drop --nginx-version to check for this host, or check on the target host');
    }
    renderer.validate(vars, { layers });
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
  const only = opts.app === undefined ? null : opts.app;
  const { files, rendered } = renderer.render(vars, outDir, { prefix: opts.prefix, layers, only, ...written });
  // --check: silent but for problems (its nginx -t ran before the write).
  if (opts.check) return 0;
  console.log(`wrote ${files.length} files under ${outDir}:`);
  for (const f of files) console.log(`  ${path.relative(outDir, f)}`);
  if (opts.prefix) {
    console.log(`test it: nginx -t -c ${path.join(outDir, 'etc/nginx/nginx.conf')}`);
    return 0;
  }
  const steps = renderer.installSteps(vars, rendered, { outDir, kit: command.invocation() });
  console.log('\nNext, as root on the host:');
  steps.forEach((step, i) => console.log(`${String(i + 1).padStart(2)}. ${step}`));
  return 0;
}

module.exports = { main, parse, COMMAND };
