'use strict';
// Several apps on one host (tunekit_apps): each entry becomes the set of values
// its app is rendered with — the host-wide set, with the entry's own values on
// top and every derived value evaluated again, so the socket, the settings path
// and the install directory follow each app's name. The Ansible role expands the
// list the same way (roles/tunekit/templates/apps.j2) and evaluates each app's
// set with Ansible's own lazy templating (template_vars).
//
// What the apps share is divided, and what does not fit is refused:
//   - workers left at 0 share the CPUs the apps with a fixed count leave;
//   - the cross-app rules (roles/tunekit/templates/apps-checks.j2, rendered by
//     both): workers against the CPUs, the upstream pools against nginx's
//     worker_connections, one socket, port or route claimed twice.

const os = require('node:os');
const { readDefinition } = require('./definition');
const { createEnv, isTemplated, nativeType } = require('../template');
const { ConfigError } = require('../errors');

// An entry's short keys and the variables they stand for.
const SHORT = {
  name: 'tunekit_app_name',
  source: 'tunekit_app_source',
  server_name: 'tunekit_nginx_server_name',
  location: 'tunekit_nginx_location',
  workers: 'tunekit_app_workers',
  module: 'tunekit_app_module',
};

const APPS_CHECKS_TEMPLATE = 'roles/tunekit/templates/apps-checks.j2';

let perAppRead = null;
/** The variables an entry may set: those the definition marks `# Per app: yes`. */
function perAppKeys() {
  if (!perAppRead) perAppRead = new Set(readDefinition().filter((d) => d.perApp).map((d) => d.key));
  return perAppRead;
}

/** The CPUs the apps divide: tunekit_host_cpus, or (0) this machine's. */
function hostCpus(vars) {
  const n = Number(vars.tunekit_host_cpus);
  return n > 0 ? n : os.availableParallelism();
}

/**
 * The refusals of the entries themselves (shape, names, keys), before any is
 * evaluated. `known`: every variable of the definition.
 * @returns {string[]}
 */
function entryProblems(list, known) {
  const problems = [];
  const perApp = perAppKeys();
  const seen = new Map();
  list.forEach((entry, i) => {
    const at = `tunekit_apps[${i}]`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      problems.push(`${at} must be a mapping with at least a name, e.g. {name: api, server_name: api.example.com}; it is ${JSON.stringify(entry)}`);
      return;
    }
    if (entry.name == null || String(entry.name).trim() === '') {
      problems.push(`${at} has no name; give each app a name (its unit, socket and settings are named after it)`);
      return;
    }
    const label = `${at} (${entry.name})`;
    if (seen.has(String(entry.name))) {
      problems.push(`tunekit_apps: entries ${seen.get(String(entry.name))} and ${i} are both named ${entry.name}; give each app its own name`);
    }
    seen.set(String(entry.name), i);
    for (const key of Object.keys(entry)) {
      if (key in SHORT) {
        if (SHORT[key] in entry) problems.push(`${label} sets both ${key} and ${SHORT[key]}; keep one`);
        continue;
      }
      if (perApp.has(key)) continue;
      if (known.has(key)) {
        problems.push(`${label}: ${key} is host-wide (one nginx, one kernel and one process manager serve every app); set it outside tunekit_apps`);
      } else {
        problems.push(`${label}: unknown key ${key}; an app takes ${Object.keys(SHORT).join(', ')} and the variables marked "per app" in docs/variables.md`);
      }
    }
  });
  return problems;
}

/** An entry's keys as the variables they stand for (the short ones renamed), values as written. */
function ownValues(entry) {
  return Object.fromEntries(Object.entries(entry).map(([key, value]) => [SHORT[key] || key, value]));
}

/** The app named `name` of a set, or a ConfigError naming the apps there are. */
function requireApp(vars, name) {
  const list = appSets(vars);
  const app = list.find((a) => a.tunekit_app_name === name);
  if (!app) throw new ConfigError(`no app is named ${name}; the apps are ${list.map((a) => a.tunekit_app_name).join(', ')} (tunekit_apps)`);
  return app;
}

/**
 * Each entry's own values as variables: the short keys under their names, an
 * upstream block named after the app, and (after the first app) the runner's
 * metrics on the next port when the entry names none.
 * @param {object[]} list  tunekit_apps, checked by entryProblems
 * @param {object} host    the host-wide set, evaluated
 * @returns {object[]} one mapping of tunekit_* values per app
 */
function entryValues(list, host) {
  const env = createEnv();
  return list.map((entry, i) => {
    // A Jinja expression in an entry is evaluated with the host-wide values, as
    // Ansible evaluates a variable's value when the role reads the list.
    const out = Object.fromEntries(Object.entries(ownValues(entry))
      .map(([key, value]) => [key, isTemplated(value) ? nativeType(env.renderString(value, host)) : value]));
    if (!('tunekit_nginx_upstream_name' in out)) out.tunekit_nginx_upstream_name = String(entry.name).replace(/[^A-Za-z0-9_]/g, '_');
    const metrics = /^tcp:(.*):(\d+)$/.exec(String(host.tunekit_metrics_listen));
    if (!('tunekit_metrics_listen' in out) && i > 0 && metrics) {
      out.tunekit_metrics_listen = `tcp:${metrics[1]}:${Number(metrics[2]) + i}`;
    }
    return out;
  });
}

/**
 * Workers left at 0 share what the apps with a fixed count leave of the CPUs,
 * at least one each; sets tunekit_app_workers on those entries' values.
 */
function divideCpus(values, host, cpus) {
  const fixed = values.map((v) => Number('tunekit_app_workers' in v ? v.tunekit_app_workers : host.tunekit_app_workers));
  const auto = fixed.filter((w) => w === 0).length;
  if (!auto) return values;
  const left = cpus - fixed.reduce((a, b) => a + b, 0);
  const share = Math.max(1, Math.floor(left / auto));
  return values.map((v, i) => (fixed[i] === 0 ? { ...v, tunekit_app_workers: share } : v));
}

/** Each app's set of values: tunekit_apps_resolved, or the host's own one app. */
function appSets(vars) {
  return vars.tunekit_apps_resolved || [vars];
}

/**
 * The sites nginx serves: one per server_name, in the apps' order, each with a
 * location per app (tunekit_site_apps); the first holds the listen options and
 * is the default server when the host's is. One app: its own set, unchanged.
 */
function siteSets(vars) {
  if (!vars.tunekit_apps_resolved) return [vars];
  const list = vars.tunekit_apps_resolved;
  const names = [...new Set(list.map((a) => a.tunekit_nginx_server_name))];
  return names.map((name, i) => {
    const members = list.filter((a) => a.tunekit_nginx_server_name === name);
    return {
      ...members[0],
      tunekit_site_first: i === 0,
      tunekit_nginx_default_server: i === 0 && Boolean(vars.tunekit_nginx_default_server),
      tunekit_site_apps: members.map((a) => ({ name: a.tunekit_app_name, location: a.tunekit_nginx_location, proxy_pass: a.tunekit_nginx_proxy_pass, shed_dir: a.tunekit_nginx_shed_dir })),
    };
  });
}

// Generated for the Ansible roles (npm run generate), from the `# Per app: yes` lines.
const APP_VARS_TEMPLATE = 'roles/tunekit/templates/app-vars.j2';
const EACH_APP_TASKS = 'roles/tunekit/tasks/each-app.yml';

/** A template printing one app's per-app values as JSON (rendered with that app's template_vars). */
function appVarsTemplate() {
  const keys = [...perAppKeys()];
  return [
    '{#- generated by `npm run generate` from the `# Per app: yes` lines of',
    '    roles/tunekit/defaults/main/; do not edit by hand. One app\'s values,',
    '    rendered with its entry of tunekit_apps as template_vars (tasks/apps.yml). -#}',
    '{',
    ...keys.map((k, i) => `  "${k}": {{ ${k} | to_json }}${i < keys.length - 1 ? ',' : ''}`),
    '}',
    '',
  ].join('\n');
}

/**
 * The tasks that run a task file once per app with that app's values as the
 * task variables, so the file's tasks and templates read the plain names.
 */
function eachAppTasks() {
  const keys = [...perAppKeys()];
  return [
    '---',
    '# generated by `npm run generate` from the `# Per app: yes` lines of',
    '# roles/tunekit/defaults/main/; do not edit by hand.',
    '#',
    '# Runs tunekit_each_app_tasks (a task file\'s path) once per app of',
    '# tunekit_apps_resolved (tasks/apps.yml), that app\'s values standing in for',
    '# the per-app variables, so the file reads tunekit_app_name, tunekit_socket_path,',
    '# ... as with one app.',
    '- name: Once per app',
    '  ansible.builtin.include_tasks: "{{ tunekit_each_app_tasks }}"',
    '  loop: "{{ tunekit_apps_resolved }}"',
    '  loop_control:',
    '    loop_var: tunekit_app',
    '    label: "{{ tunekit_app.tunekit_app_name }}"',
    '  vars:',
    ...keys.map((k) => `    ${k}: "{{ tunekit_app.${k} }}"`),
    '',
  ].join('\n');
}

module.exports = { APP_VARS_TEMPLATE, EACH_APP_TASKS, appVarsTemplate, eachAppTasks, ownValues, requireApp, appSets, siteSets, SHORT, APPS_CHECKS_TEMPLATE, perAppKeys, hostCpus, entryProblems, entryValues, divideCpus };
