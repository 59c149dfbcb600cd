'use strict';
// The one definition of every tunable, read the way Ansible reads it.
//
// Sources, lowest precedence first:
//   1. roles/tunekit/defaults/main/*.yml  (the definition)
//   2. --vars FILE.yml files, in order                       (like -e @FILE)
//   3. --set key=value pairs, in order                       (like -e key=value)
// Values are strings that may hold Jinja expressions ("{{ a * 2 }}"); they are
// evaluated lazily against the merged set, as Ansible does, so a derived value
// follows whatever its inputs were overridden to. Every value is checked against
// its `# Type:` line (types.js): the values as given first, so a wrong input is
// blamed rather than the value derived from it, then the derived ones. Then
// the cross-layer rules (vars/rules.yml, shared with the Ansible role and
// doctor; rules.js) are evaluated; each refusal names both values.

const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');
const { createEnv, ROOT, isTemplated, nativeType } = require('../template');
const types = require('./types');
const rules = require('./rules');
const apps = require('./apps');
const { ConfigError } = require('../errors');
const { reason, readYaml } = require('../files');

const { DEFAULTS_DIR, defaultFiles } = require('./definition');
const APP_SETTINGS_TEMPLATE = 'app/settings.json.j2';

function readYamlFile(file) {
  let doc;
  try {
    ({ doc } = readYaml(file));
  } catch (err) {
    if (err instanceof YAML.YAMLError) throw new ConfigError(`${file} is not valid YAML: ${err.message.split('\n')[0]}`);
    throw new ConfigError(`cannot read variables file ${file}: ${reason(err)}; give the path of a YAML file of tunekit_* values`);
  }
  if (doc == null) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError(`${file} must be a YAML mapping of tunekit_* variables`);
  }
  return doc;
}

/** The definition: every tunable with its raw (possibly templated) default. */
function loadDefaults() {
  const out = {};
  for (const file of defaultFiles()) {
    for (const [key, value] of Object.entries(readYamlFile(file))) {
      if (key in out) throw new ConfigError(`${key} is defined twice in ${DEFAULTS_DIR}; define it once`);
      out[key] = value;
    }
  }
  return out;
}

/** Parse "key=value" as Ansible's -e does for YAML scalars. */
function parseSet(pair) {
  const eq = pair.indexOf('=');
  if (eq <= 0) throw new ConfigError(`--set expects key=value, got "${pair}"`);
  const key = pair.slice(0, eq).trim();
  const raw = pair.slice(eq + 1);
  let value;
  try {
    // A template stays text, as Ansible's -e key=value keeps it ("{{ x }}" is no YAML mapping).
    value = isTemplated(raw) ? raw : YAML.parse(raw);
  } catch {
    value = raw;
  }
  if (value === null && raw.trim() === '') value = '';
  return [key, value];
}

// A value typed on the command line. A string-valued tunable keeps the text as
// typed where its type takes it ("1.0" stays "1.0", "0660" stays "0660"); else
// the YAML scalar (numbers, booleans) where the type takes that, as
// `-e '{"k": 2}'` would give ("auto" or a number: 2 is the number).
function fromText(type, defaultValue, text) {
  const [, v] = parseSet(`x=${text}`);
  if (typeof v === 'string' || !type) return v;
  const textual = typeof defaultValue === 'string' && !isTemplated(defaultValue);
  if (textual && types.mismatch(text, type) === null) return text;
  if (types.mismatch(v, type) === null) return v;
  return textual ? text : v;
}

// Paths typed on the command line that name the user's own files: relative to the
// directory the command ran in, as any CLI argument is. Stored absolute, because
// what reads them runs elsewhere (the stack of demo/loadtest runs in the kit's
// folder, the unit in its WorkingDirectory). A template is left to its inputs.
const CWD_RELATIVE = new Set(['tunekit_app_module']);

function fromCommandLine(key, value) {
  if (!CWD_RELATIVE.has(key) || typeof value !== 'string' || value === '' || isTemplated(value)) return value;
  return path.resolve(value);
}

/**
 * Check values typed on the command line ([{key, value: text, where}]) against
 * their variables' types alone; returns the values read, or throws ConfigError.
 * For a command that takes a rendered file rather than the definition.
 */
function checkFlagTypes(flags) {
  const defaults = loadDefaults();
  const typeOf = types.readTypes(defaultFiles());
  const values = Object.fromEntries(flags.map((f) => [f.key, fromText(typeOf[f.key], defaults[f.key], f.value)]));
  refuseWrongTypes(flags.map((f) => f.key), values, typeOf, Object.fromEntries(flags.map((f) => [f.key, f.where])));
  return values;
}

/** "FILE line N" of a top-level key of a YAML file, or FILE when it is not found as written. */
function keyLine(file, key) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const i = lines.findIndex((l) => new RegExp(`^["']?${key.replace(/[^\w]/g, '\\$&')}["']?\\s*:`).test(l));
  return i < 0 ? file : `${file} line ${i + 1}`;
}

function closest(name, names) {
  let best = null;
  let bestScore = Infinity;
  for (const n of names) {
    const d = editDistance(name, n);
    if (d < bestScore) {
      best = n;
      bestScore = d;
    }
  }
  return bestScore <= Math.max(3, name.length / 4) ? best : null;
}

function editDistance(a, b) {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0];
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j];
      prev[j] = Math.min(prev[j] + 1, prev[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length];
}

// Evaluate templated values in dependency order (a value is rendered once every
// tunekit_* name it mentions is final), as Ansible's lazy templating would.
// checkValue(key, value) runs on each derived value as soon as it is known, so a
// wrong one is named before anything derived from it fails in turn.
function evaluate(raw, checkValue = () => {}) {
  const env = createEnv();
  const vars = {};
  const pending = new Map();
  for (const [key, value] of Object.entries(raw)) {
    if (isTemplated(value)) pending.set(key, [...new Set(value.match(/\btunekit_\w+/g) || [])]);
    else vars[key] = value;
  }
  while (pending.size) {
    let progressed = false;
    for (const [key, deps] of pending) {
      const missing = deps.filter((d) => !(d in vars));
      const unknown = missing.filter((d) => !(d in raw));
      if (unknown.length) throw new ConfigError(`${key} = "${raw[key]}" uses undefined ${unknown.join(', ')}`);
      if (missing.length) continue;
      try {
        vars[key] = nativeType(env.renderString(raw[key], vars));
      } catch (err) {
        throw new ConfigError(`cannot evaluate ${key} = "${raw[key]}": ${err.message.replace(/\s+/g, ' ')}`);
      }
      checkValue(key, vars[key]);
      pending.delete(key);
      progressed = true;
    }
    if (!progressed) {
      throw new ConfigError(`these values refer to each other in a loop: ${[...pending.keys()].join(', ')}`);
    }
  }
  // Keep the definition's order.
  return Object.fromEntries(Object.keys(raw).map((k) => [k, vars[k]]));
}

/**
 * Merge the definition with overrides and evaluate every derived value.
 * @param {object} opts
 * @param {string[]} [opts.varsFiles]  YAML files, applied in order
 * @param {string[]} [opts.set]        "key=value" pairs, applied in order
 * @param {object}   [opts.overrides]  already-parsed overrides, applied last
 * @param {{key: string, value: *, where: string}[]} [opts.flags]
 *                                     a command's flags mapped to variables
 *                                     (where: "--workers 4"), applied last
 * @param {boolean}  [opts.check=true] refuse sets that break a cross-layer rule
 *                                     (the types are checked always)
 * @param {boolean}  [opts.host=false] the set is for a host's files (`tunekit render`
 *                                     without --prefix): the rules of scope host (the
 *                                     app unit's sandbox) are checked too
 * @returns {object} every tunekit_* variable with its final value
 */
function resolve({ varsFiles = [], set = [], overrides = {}, flags = [], check = true, host = false } = {}) {
  const raw = loadDefaults();
  const defaults = { ...raw };
  const known = Object.keys(raw);
  const typeOf = types.readTypes(defaultFiles());
  const where = Object.fromEntries(known.map((k) => [k, `the definition, ${path.relative(ROOT, typeOf[k].file)}`]));
  // `at`: where a misspelt name is, when that says more than `from` (a file's line).
  const apply = (key, value, from, at = () => from) => {
    if (!(key in raw)) {
      const hint = closest(key, known);
      throw new ConfigError(
        `unknown variable ${key} (from ${at()})` +
          (hint ? `; did you mean ${hint}?` : '; the known ones are listed in docs/variables.md'),
      );
    }
    raw[key] = value;
    where[key] = from;
  };
  for (const file of varsFiles) {
    for (const [k, v] of Object.entries(readYamlFile(file))) apply(k, v, file, () => keyLine(file, k));
  }
  for (const pair of set) {
    const [k] = parseSet(pair);
    apply(k, fromCommandLine(k, fromText(typeOf[k], defaults[k], pair.slice(pair.indexOf('=') + 1))), `--set ${pair}`);
  }
  for (const [k, v] of Object.entries(overrides)) apply(k, v, 'overrides');
  for (const f of flags) apply(f.key, fromCommandLine(f.key, fromText(typeOf[f.key], defaults[f.key], f.value)), f.where);
  const forLocalNginx = isEmpty(raw.tunekit_nginx_version);
  raw.tunekit_nginx_version = targetNginxVersion(raw.tunekit_nginx_version);
  raw.tunekit_nginx_openssl_version = targetOpensslVersion(raw.tunekit_nginx_openssl_version, forLocalNginx);
  raw.tunekit_nginx_http3_module = targetHttp3Module(raw.tunekit_nginx_http3_module, forLocalNginx);

  // The values as given, then (once they are right) the ones derived from them.
  const given = known.filter((k) => !isTemplated(raw[k]));
  refuseWrongTypes(given, raw, typeOf, where);
  const vars = evaluate(raw, (k, v) => refuseWrongTypes([k], { [k]: v }, typeOf, { [k]: derivedFrom(raw[k], where[k]) }));
  const env = createEnv();
  let problems;
  if (Array.isArray(vars.tunekit_apps) && vars.tunekit_apps.length) {
    const { resolved, refusals } = resolveApps(raw, vars, { typeOf, where, known: new Set(known), env, host });
    vars.tunekit_apps_resolved = resolved;
    vars.tunekit_host_cpus = apps.hostCpus(vars);
    // Each app's set holds the host-wide values too, so the apps' refusals are all of them.
    problems = check ? refusals : [];
  } else {
    problems = check ? checkVars(vars, env, { host }) : [];
  }
  if (problems.length === 1) throw new ConfigError(`inconsistent settings: ${problems[0]}`);
  if (problems.length) throw new ConfigError(`inconsistent settings:\n  - ${problems.join('\n  - ')}`);
  return vars;
}

/**
 * Each app of tunekit_apps evaluated: the host-wide raw values with the entry's
 * on top (lib/config/apps.js), types checked, the cross-layer rules run on each
 * app's set (refusals prefixed "app NAME: ") and the cross-app checks on all.
 * @returns {{resolved: object[], refusals: string[]}}
 */
function resolveApps(raw, hostWide, { typeOf, where, known, env, host }) {
  const list = hostWide.tunekit_apps;
  const entryProblems = apps.entryProblems(list, known);
  if (entryProblems.length === 1) throw new ConfigError(entryProblems[0]);
  if (entryProblems.length) throw new ConfigError(`tunekit_apps:\n  - ${entryProblems.join('\n  - ')}`);
  const cpus = apps.hostCpus(hostWide);
  const values = apps.divideCpus(apps.entryValues(list, hostWide), hostWide, cpus);
  const resolved = values.map((own, i) => {
    const from = `tunekit_apps[${i}] (${list[i].name})`;
    const appWhere = { ...where, ...Object.fromEntries(Object.keys(own).map((k) => [k, from])) };
    const appRaw = { ...raw, ...own };
    refuseWrongTypes(Object.keys(own), appRaw, typeOf, appWhere); // entryValues rendered any template in them
    return evaluate(appRaw, (k, v) => refuseWrongTypes([k], { [k]: v }, typeOf, { [k]: derivedFrom(appRaw[k], appWhere[k]) }));
  });
  // A refusal every app's set gives alike (a host-wide value) is said once, unprefixed.
  const each = resolved.map((app) => checkVars(app, env, { host }));
  const common = [...new Set(each.flat())].filter((p) => each.every((list) => list.includes(p)));
  const own = each.flatMap((list, i) => list.filter((p) => !common.includes(p)).map((p) => `app ${resolved[i].tunekit_app_name}: ${p}`));
  const across = env.render(apps.APPS_CHECKS_TEMPLATE, { ...hostWide, tunekit_host_cpus: cpus, tunekit_apps_resolved: resolved })
    .split('\n').map((l) => l.trim()).filter(Boolean);
  return { resolved, refusals: [...common, ...own, ...across] };
}

function refuseWrongTypes(keys, values, typeOf, where) {
  const problems = keys.map((k) => types.problem(k, values[k], typeOf[k], where[k])).filter(Boolean);
  if (problems.length === 1) throw new ConfigError(problems[0]);
  if (problems.length) throw new ConfigError(`values of the wrong type:\n  - ${problems.join('\n  - ')}`);
}

function derivedFrom(template, from) {
  const inputs = [...new Set(template.match(/\btunekit_\w+/g) || [])];
  return inputs.length ? `${from}, derived from ${inputs.join(', ')}` : from;
}

// The nginx version the files are for: as set, or (empty) the local nginx's.
// Ansible sets it from the host's `nginx -v` before it renders. Without a local
// nginx it stays empty: what needs no nginx (the runner's settings) still
// resolves, and rendering nginx's files refuses (requireNginxVersion).
function targetNginxVersion(value) {
  let version = value == null ? '' : String(value).trim();
  if (version === '') version = require('../nginx').nginxVersion() || '';
  return version; // its Type (version or "") is checked with the others
}

const isEmpty = (value) => value == null || String(value).trim() === '';

// The OpenSSL the target nginx runs with: as set, or (empty) the local nginx's
// when the files are for the local nginx. Rendering for another host's version
// cannot know its OpenSSL: it stays empty, and the groups every supported
// OpenSSL has are offered (tunekit_nginx_tls_ecdh_curve).
function targetOpensslVersion(value, forLocalNginx) {
  if (!isEmpty(value)) return String(value).trim();
  return (forLocalNginx && require('../nginx').nginxOpenssl()) || '';
}

// Whether the target nginx has ngx_http_v3_module: as set, or (empty) the
// local nginx's answer when the files are for the local nginx; else unknown ("").
function targetHttp3Module(value, forLocalNginx) {
  if (!isEmpty(value)) return value;
  const local = forLocalNginx ? require('../nginx').nginxHttp3() : null;
  return local == null ? '' : local;
}

/** Refuse to render nginx's files for an unknown nginx version. */
function requireNginxVersion(vars) {
  if (vars.tunekit_nginx_version) return;
  throw new ConfigError('tunekit_nginx_version is empty and there is no local nginx to ask which version the files are for; ' +
    'name the target\'s version: `tunekit render --nginx-version 1.22.1` (or --set tunekit_nginx_version=1.22.1), ' +
    'or install nginx here: apt-get install -y nginx');
}

/**
 * The cross-layer rules broken by a resolved set: one refusal per rule (rules.js);
 * with host, the rules of scope host too (the set is for a host's files).
 */
function checkVars(vars, env = createEnv(), { host = false } = {}) {
  return rules.refusals(vars, env, undefined, { scopes: host ? ['host'] : [] });
}

/**
 * The settings the cluster runner reads, rendered from app/settings.json.j2 (the
 * same template Ansible installs as tunekit_app_config_path).
 */
function appSettings(vars, env = createEnv()) {
  const text = env.render(APP_SETTINGS_TEMPLATE, vars);
  try {
    return JSON.parse(text);
  } catch (err) {
    // The types are checked before this; a template that still renders bad JSON is the kit's bug.
    throw new Error(`${APP_SETTINGS_TEMPLATE} rendered invalid JSON (${err.message}); this is a bug in the template`);
  }
}

/**
 * The values an enum tunable accepts, read from its `# Type: enum a | b | c` line
 * in the definition (the one place they are listed).
 * @returns {string[]}
 */
function choices(key) {
  const type = types.readTypes(defaultFiles())[key];
  const alt = type && type.alternatives.find((a) => a.kind === 'enum');
  if (!alt) throw new ConfigError(`${key} has no "# Type: enum a | b" line in ${DEFAULTS_DIR}`);
  return alt.values;
}

/**
 * The app workers and upstream kind of a stack: the caller's (--workers, --upstream, a
 * bench scenario's), else the vars files' (a `tune` result sets both, and `bench --vars
 * tune.yml` must measure what it says), else 2 workers on a Unix socket (TCP for stock).
 */
function stackShape({ upstream = null, workers = null, profile = 'tuned', varsFiles = [] }) {
  const fromFiles = Object.assign({}, ...varsFiles.map((f) => readYamlFile(f)));
  return {
    kind: upstream || fromFiles.tunekit_upstream_kind || (profile === 'stock' ? 'tcp' : 'uds'),
    workers: workers ?? fromFiles.tunekit_app_workers ?? 2,
  };
}

module.exports = {
  ConfigError,
  choices,
  DEFAULTS_DIR,
  APP_SETTINGS_TEMPLATE,
  defaultFiles,
  loadDefaults,
  readYamlFile,
  stackShape,
  parseSet,
  resolve,
  checkFlagTypes,
  requireNginxVersion,
  checkVars,
  appSettings,
};
