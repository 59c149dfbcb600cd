'use strict';
// The roles' argument specs (roles/<role>/meta/argument_specs.yml), generated
// from the one definition's comment blocks by `npm run generate` (lib/generate.js):
// `ansible-doc -t role tunekit.stack.<role>` prints them, and Ansible validates
// a role's variables against its spec when the role starts.
// https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_reuse_roles.html#role-argument-validation
//
// Which role documents what (ROLES): each role its layer's files of the
// definition. Ansible validates a role's spec when the role starts, after the
// role's dependencies, and templates every variable the spec names first. The
// checks role `tunekit` runs first (a dependency of every other role): its spec
// names only the deployment switches it reads (40-deploy.yml, plain values) and
// types them raw, so nothing is validated or templated ahead of its refusals —
// the kit's types and cross-layer rules, worded as `tunekit render` words them
// (a number given as text, for one, would otherwise fail inside a derived
// value's template). The layer roles start after those refusals and are typed,
// laxer than the kit's types (Ansible turns "4" into 4), so they never pre-empt
// one; they hold for a variable given to a role as a parameter, too.
// tunekit_rollout documents its variables on its `main` entry point only: its
// drain.yml runs before the checks (site.yml's pre_tasks) and stays unvalidated.
//
//   node lib/config/argspecs.js ROLE      print one role's spec

const path = require('node:path');
const YAML = require('yaml');
const { defaultFiles, readDefinition } = require('./definition');
const { parseType } = require('./types');

// role -> the definition files whose variables its spec documents, whether they
// are typed (else raw), and what the role does in one line.
const ROLES = {
  tunekit: {
    files: ['40-deploy.yml'],
    typed: false,
    short: 'The checks every other role of the kit depends on: packages, versions, the refusals, before anything changes',
  },
  tunekit_sysctl: {
    files: ['20-kernel.yml'],
    typed: true,
    short: 'Kernel settings (sysctl.d, applied without lowering a live value) and login limits',
  },
  tunekit_app: {
    files: ['00-app.yml', '30-systemd.yml', '40-deploy.yml'],
    typed: true,
    short: "The kit's cluster runner and your app on a Unix domain socket, under systemd or PM2",
  },
  tunekit_nginx: {
    files: ['05-versions.yml', '10-nginx.yml', '15-tls.yml'],
    typed: true,
    short: "nginx with the kit's configuration, validated before every reload",
  },
  tunekit_metrics: {
    files: ['60-metrics.yml'],
    typed: true,
    short: "Debian's exporters and mtail around the stack, the accept-queue sampler, the rules file for Prometheus",
  },
  tunekit_rollout: {
    files: ['45-rollout.yml'],
    typed: true,
    short: 'Take a host out of the load balancer, gate it on its health and release, put it back (tasks_from drain, gate, enable)',
  },
};

// The kit's kinds as Ansible's types, where every value the kit accepts is one
// Ansible accepts too; anything else (unions, enums, sizes, text) is raw.
const ANSIBLE_TYPE = { int: 'int', port: 'int', bool: 'bool', list: 'list', map: 'dict', path: 'str', mode: 'str', version: 'str', url: 'str' };

function specPath(role) {
  return `roles/${role}/meta/argument_specs.yml`;
}

function ansibleType(spec) {
  const { alternatives } = parseType(spec);
  return (alternatives.length === 1 && ANSIBLE_TYPE[alternatives[0].kind]) || 'raw';
}

/** One variable's option: its description paragraphs, type and default. */
function option(d, values, typed) {
  const description = [d.what];
  const facts = [d.unit && `Unit: ${d.unit}.`, d.upstream && `Upstream default: ${d.upstream}.`].filter(Boolean).join(' ');
  if (facts) description.push(facts);
  if (d.why) description.push(`Why: ${d.why}.`);
  description.push(`Kit type (checked by the role tunekit, before anything changes): ${d.type}.`);
  if (d.see) description.push(`See ${d.see}`);
  return { description, type: typed ? ansibleType(d.type) : 'raw', required: false, default: values[d.key] };
}

/** The argument_specs.yml of one role (ROLES), as text. */
function argumentSpec(role, files = defaultFiles()) {
  const { files: own, typed, short } = ROLES[role];
  const { loadDefaults } = require('./index');
  const values = loadDefaults();
  const options = {};
  for (const d of readDefinition(files.filter((f) => own.includes(path.basename(f))))) options[d.key] = option(d, values, typed);
  const description = [
    `${short}.`,
    `Its variables: ${own.join(', ')} of the definition (the role tunekit's defaults/main/); give them in group_vars, host_vars, vars or -e.`,
    role === 'tunekit'
      ? "Every other role of the kit depends on this one: its tasks check every variable's kit type and the cross-layer rules (vars/rules.yml) and refuse, naming the variable and the fix. Its spec types its own variables raw, so Ansible's validation never comes before those refusals."
      : 'Its dependency, the role tunekit, runs first and refuses a value that does not fit its kit type or a set that breaks a cross-layer rule; this spec is checked after it.',
  ];
  const doc = { argument_specs: { main: { short_description: short, description, options } } };
  const head = [
    '---',
    `# generated by \`npm run generate\` from roles/tunekit/defaults/main/ (lib/config/argspecs.js);`,
    '# do not edit by hand (README: Changing the kit).',
  ].join('\n');
  return `${head}\n${YAML.stringify(doc, { version: '1.1', lineWidth: 160, minContentWidth: 40 })}`;
}

function main() {
  const role = process.argv[2];
  if (!ROLES[role]) {
    console.error(`argspecs: name a role: ${Object.keys(ROLES).join(', ')}`);
    process.exitCode = 2;
    return;
  }
  process.stdout.write(argumentSpec(role));
}

if (require.main === module) main();

module.exports = { ROLES, specPath, argumentSpec, ansibleType };
