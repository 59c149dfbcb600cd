'use strict';
// The cross-layer rules (roles/tunekit/vars/rules.yml), evaluated with
// nunjucks the way the Ansible role evaluates them: each rule's `when` and `says`
// are templates over the tunekit_* variables, and templates/checks.j2 prints the
// refusal of every broken rule that applies to the profile. `tunekit render`
// (through config/index.js) and `tunekit doctor` (over the live values it maps
// onto the same names) read this one table.

const path = require('node:path');
const { createEnv, ROOT } = require('../template');
const { readDefinition } = require('./definition');
const { readYaml } = require('../files');

const RULES_FILE = 'roles/tunekit/vars/rules.yml';
const CHECKS_TEMPLATE = 'roles/tunekit/templates/checks.j2';
const LEVELS = ['fail', 'warn'];
// A rule's scope, where it applies beyond "wherever a set is resolved": host, the
// files as a host runs them (the app unit's sandbox), which a resolve for the
// local stack, the runner or the pod leaves out (rules.yml's header).
const SCOPES = ['host'];

/** The table, each rule checked for the fields the evaluators need. */
function load(file = path.join(ROOT, RULES_FILE)) {
  const rules = readYaml(file).doc.tunekit_rules;
  const seen = new Set();
  for (const r of rules) {
    const where = `${path.relative(ROOT, file)}: rule ${r.id || JSON.stringify(r)}`;
    if (!r.id || seen.has(r.id)) throw new Error(`${where}: every rule needs an id of its own`);
    seen.add(r.id);
    if (!LEVELS.includes(r.level)) throw new Error(`${where}: level must be ${LEVELS.join(' or ')}, not ${r.level}`);
    if ('scope' in r && !SCOPES.includes(r.scope)) throw new Error(`${where}: scope must be ${SCOPES.join(' or ')} when given, not ${r.scope}`);
    if (!/^\{\{.*\}\}$/s.test(String(r.when).trim())) throw new Error(`${where}: when must be one "{{ expression }}"`);
    if (typeof r.says !== 'string') throw new Error(`${where}: says must be the refusal text`);
  }
  return rules;
}

// `when` is "{{ expr }}"; its truth is Jinja's truth of expr (as Ansible's native
// types give it), so it is tested with {% if %} rather than read from the text.
function broken(rule, vars, env = createEnv()) {
  const expr = rule.when.trim().slice(2, -2);
  return env.renderString(`{% if ${expr} %}1{% endif %}`, vars) === '1';
}

/** The variables a rule's `when` reads (a table's root name: tunekit_nginx_versions for tunekit_nginx_versions.floor). */
function reads(rule) {
  return [...new Set(String(rule.when).match(/\btunekit_\w+/g) || [])];
}

function says(rule, vars, env = createEnv()) {
  return env.renderString(rule.says, vars).trim();
}

/**
 * The refusals checks.j2 prints for a resolved set: the same template the role
 * renders, over the table with `when` evaluated and `says` rendered on access
 * (lazily, as Ansible renders a variable), so a rule that holds is never rendered.
 * `scopes`: the scoped rules to include besides the unscoped ones (['host'] for
 * a host's files; the role includes them all).
 */
function refusals(vars, env = createEnv(), rules = load(), { scopes = [] } = {}) {
  const tunekit_rules = rules.map((r) => ({
    ...r,
    when: broken(r, vars, env),
    get says() {
      return says(r, vars, env);
    },
  }));
  return env.render(CHECKS_TEMPLATE, { ...vars, tunekit_rules, tunekit_rule_scopes: scopes })
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

// The definition's entries, read once per process: every unset directive of a
// doctor run asks.
let definitionRead = null;

/**
 * What nginx, Node or the kernel uses when nothing sets `key`: the first word of
 * its "Upstream default:" in the definition's comment, a number where it is one
 * ("512 (Debian's nginx.conf: 768)" -> 512, "1.0 (1.1 since 1.29.7)" -> "1.0").
 */
function upstreamDefault(key, definition = definitionRead) {
  if (!definition) definition = definitionRead = readDefinition();
  const entry = definition.find((d) => d.key === key);
  const word = entry && /^[^\s(]+/.exec(entry.upstream);
  if (!word || /^(n\/a|none|inherited)$/i.test(word[0])) {
    throw new Error(`${key}: the definition states no upstream default ("# Unit: ... | Upstream default: VALUE | ...")`);
  }
  return /^\d+$/.test(word[0]) ? Number(word[0]) : word[0];
}

module.exports = { RULES_FILE, CHECKS_TEMPLATE, SCOPES, load, broken, reads, says, refusals, upstreamDefault };
