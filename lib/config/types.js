'use strict';
// The types of the one definition: every variable's `# Type:` line, parsed and
// checked here (lib/config/index.js runs the check on every resolved value).
// The Ansible role runs the same rules through templates/types.j2, generated
// from the same lines by `npm run generate` (lib/generate.js; a test keeps it
// current). `node lib/config/types.js` prints it.
//
// Grammar of a Type line (one kind, or a union of kinds joined by " or "):
//   int | int MIN..MAX | int MIN..   a whole number, within the bounds
//   port                              a whole number 1..65535
//   size                              an nginx size: 512, 16k, 1m, 1g
//   duration                          an nginx time: 500ms, 60s, 1m, 1h 30m
//   mode                              an octal mode of four digits, as a string: "0660"
//   enum a | b | c                    one of the words ("" for empty)
//   path                              a file-system path (no NUL, no newline)
//   bool                              true or false
//   string                            one line of text
//   name                              a user, group, file or block name
//   version                           X.Y.Z
//   list                              a YAML list
//   map                               a YAML mapping
//   url                               scheme://... or git@host:path

const { readYaml } = require('../files');

const KINDS = ['int', 'port', 'size', 'duration', 'mode', 'enum', 'path', 'bool', 'string', 'name', 'version', 'list', 'map', 'url'];

const ONE_LINE = /^[^\n\0]*$/;

// The patterns both checks use (here in JavaScript, in types.j2 as Ansible's
// `match` test): no backslashes, which the two Jinja dialects unescape differently.
const PATTERNS = {
  int: '^-?[0-9]+$',
  size: '^[0-9]+[kKmMgG]?$',
  duration: '^([0-9]+(ms|[smhdwMy])?)( [0-9]+(ms|[smhdwMy]))*$',
  mode: '^0[0-7]{3}$',
  name: '^[A-Za-z0-9_][A-Za-z0-9_.@-]*$',
  version: '^[0-9]+[.][0-9]+[.][0-9]+$',
  url: '^([a-z][a-z0-9+.-]*://[^ ]+|git@[^ :]+:[^ ]+)$',
};
const fits = (kind, v) => new RegExp(PATTERNS[kind]).test(String(v));

// kind -> [test(value, alternative), what a right value looks like]
const RULES = {
  int: [(v, a) => isInt(v) && Number(v) >= a.min && Number(v) <= a.max, (a) => intText(a)],
  port: [(v) => isInt(v) && Number(v) >= 1 && Number(v) <= 65535, () => 'a port number 1..65535'],
  size: [(v) => scalar(v) && fits('size', v), () => 'an nginx size such as 8k, 1m or 4096'],
  duration: [(v) => scalar(v) && fits('duration', v), () => 'an nginx time such as 500ms, 60s, 1m or 1h'],
  mode: [(v) => typeof v === 'string' && fits('mode', v), () => 'an octal mode of four digits, e.g. "0660"'],
  enum: [(v, a) => scalar(v) && a.values.includes(String(v)), (a) => `one of ${a.values.map((x) => (x === '' ? '""' : x)).join(', ')}`],
  path: [(v) => typeof v === 'string' && v !== '' && ONE_LINE.test(v), () => 'a path'],
  bool: [(v) => typeof v === 'boolean', () => 'true or false'],
  string: [(v) => scalar(v) && ONE_LINE.test(String(v)), () => 'one line of text'],
  name: [(v) => scalar(v) && fits('name', v), () => 'a name of letters, digits, _ . @ -'],
  version: [(v) => typeof v === 'string' && fits('version', v), () => 'a version X.Y.Z'],
  list: [(v) => Array.isArray(v), () => 'a YAML list, e.g. [a, b]'],
  map: [(v) => v !== null && typeof v === 'object' && !Array.isArray(v), () => 'a YAML mapping'],
  url: [(v) => typeof v === 'string' && fits('url', v), () => 'a URL such as http://host/path'],
};

function scalar(v) {
  return typeof v === 'string' || typeof v === 'number';
}

function isInt(v) {
  return typeof v === 'number' && Number.isInteger(v);
}

// Kinds whose values are numbers or booleans, never text: "4" in quotes, or
// ansible-playbook's -e key=value (always text, as Ansible documents), would
// be added as text ("30" + 5 is "305") or be true when it says "false".
const NATIVE = { int: 'a number', port: 'a number', bool: 'true or false' };

/** The value as YAML would read it unquoted: "4" -> 4, "false" -> false. */
function unquoted(v) {
  if (typeof v !== 'string') return undefined;
  if (fits('int', v)) return Number(v);
  if (/^(true|false)$/i.test(v)) return v.toLowerCase() === 'true';
  return undefined;
}

/** For text that would fit a number or bool kind of the type: what that kind wants; else null. */
function textForNative(value, type) {
  const v = unquoted(value);
  if (v === undefined) return null;
  const a = type.alternatives.find((alt) => NATIVE[alt.kind] && RULES[alt.kind][0](v, alt));
  return a ? NATIVE[a.kind] : null;
}

/**
 * The refusal of text where a number or bool belongs. `from`: " (from WHERE)"
 * or ""; `json`: the value as JSON would carry it (the template passes a
 * Jinja expression).
 */
function textHint({ key, value, type, want, from = '', json }) {
  return `${key}="${value}"${from} is text where ${type.spec} wants ${want}: write it without quotes in YAML; ` +
    `ansible-playbook -e key=value always passes text, so give it as JSON: -e '{"${key}": ${json}}'`;
}

function intText(a) {
  if (a.max === Infinity) return a.min === -Infinity ? 'a whole number' : `a whole number, at least ${a.min}`;
  return `a whole number ${a.min}..${a.max}`;
}

/** Parse a Type line's text into alternatives; throws on a spec outside the grammar. */
function parseType(spec) {
  const parts = spec.split(new RegExp(` or (?=(?:${KINDS.join('|')})\\b)`));
  const alternatives = parts.map((part) => {
    const [kind, ...rest] = part.trim().split(/\s+/);
    const arg = rest.join(' ');
    if (!KINDS.includes(kind)) throw new Error(`unknown type "${kind}" in "${spec}"; the kinds are ${KINDS.join(', ')}`);
    if (kind === 'int') {
      const m = /^(?:(-?\d+)\.\.(-?\d+)?)?$/.exec(arg);
      if (!m) throw new Error(`"${part}": write int, int MIN..MAX or int MIN..`);
      return { kind, min: m[1] === undefined ? -Infinity : Number(m[1]), max: m[2] === undefined ? Infinity : Number(m[2]) };
    }
    if (kind === 'enum') {
      const values = arg.split('|').map((x) => x.trim()).map((x) => (x === '""' ? '' : x));
      if (!arg.trim()) throw new Error(`"${part}": an enum lists its values, enum a | b`);
      return { kind, values };
    }
    if (arg) throw new Error(`"${part}": ${kind} takes no argument`);
    return { kind };
  });
  return { spec, alternatives };
}

/** What a right value of the type looks like, in words. */
function expected(type) {
  return type.alternatives.map((a) => RULES[a.kind][1](a)).join(', or ');
}

/** null when value fits the type; otherwise what a right value looks like. */
function mismatch(value, type) {
  if (type.alternatives.some((a) => RULES[a.kind][0](value, a))) return null;
  return expected(type);
}

/**
 * The Type of every variable in the given definition files:
 * { key: {spec, alternatives, file, derived} }.
 * A variable whose comment block has no Type line is an error of the definition.
 */
function readTypes(files) {
  const out = {};
  for (const file of files) {
    let spec = null;
    const { text, doc } = readYaml(file);
    const values = doc || {};
    for (const line of text.split('\n')) {
      const t = /^#\s*Type:\s*(.*)$/.exec(line);
      const entry = /^(tunekit_\w+):/.exec(line);
      if (t) spec = t[1].trim();
      else if (entry) {
        if (!spec) throw new Error(`${file}: ${entry[1]} has no "# Type:" line in its comment block`);
        try {
          const value = values[entry[1]];
          // Derived: its default is an expression over other variables.
          out[entry[1]] = { ...parseType(spec), file, derived: typeof value === 'string' && value.includes('{{') };
        } catch (err) {
          throw new Error(`${file}: ${entry[1]}: ${err.message}`);
        }
        spec = null;
      } else if (!line.startsWith('#')) spec = null;
    }
  }
  return out;
}

function show(value) {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** One line naming the variable, the value, where it came from and what is expected. */
function problem(key, value, type, where) {
  const want = mismatch(value, type);
  if (want === null) return null;
  const text = textForNative(value, type);
  if (text) return textHint({ key, value, type, want: text, from: ` (from ${where})`, json: String(unquoted(value)) });
  return `${key}=${show(value) === '' ? '""' : show(value)} (from ${where}) is not ${type.spec}: expected ${want}`;
}

/**
 * A Jinja template that prints one line per variable whose value does not fit its
 * Type: the same rules for the Ansible role (included by checks.j2).
 */
function jinjaChecks(types) {
  const lines = [
    '{#- generated by `npm run generate` from the # Type: lines of',
    '    roles/tunekit/defaults/main/; do not edit by hand. Each line it',
    '    prints is a value that does not fit its type. The values set directly',
    '    come first; the derived ones are checked only when those fit, since a',
    '    wrong input (text where a number belongs) breaks the expression. -#}',
    '{% set tunekit_input_refusals %}',
  ];
  const entries = Object.entries(types);
  for (const [key, type] of entries.filter(([, t]) => !t.derived)) lines.push(...jinjaCheck(key, type));
  lines.push('{% endset %}', '{{ tunekit_input_refusals }}', '{% if not (tunekit_input_refusals | trim) %}');
  for (const [key, type] of entries.filter(([, t]) => t.derived)) lines.push(...jinjaCheck(key, type));
  lines.push('{% endif %}');
  return `${lines.join('\n')}\n`;
}

function jinjaCheck(key, type) {
  const tests = type.alternatives.map((a) => jinjaTest(key, a));
  if (tests.includes(null) || tests.includes('true')) return []; // nothing to check, or no shared test
  const lines = [`{% if not (${tests.join(' or ')}) %}`];
  const native = type.alternatives.filter((a) => NATIVE[a.kind]);
  if (native.length) {
    // Text that would be right unquoted: say so, and how to pass it.
    lines.push(`{% if (${key} is string) and (${native.map((a) => jinjaTest(key, a, { text: true })).join(' or ')}) %}`);
    const example = native[0].kind === 'bool' ? `{{ ${key} | lower }}` : `{{ ${key} }}`;
    lines.push(textHint({ key, value: `{{ ${key} }}`, type, want: NATIVE[native[0].kind], json: example }));
    lines.push('{% else %}');
    lines.push(`${key}={{ ${key} }} is not ${type.spec}: expected ${expected(type)}`);
    lines.push('{% endif %}');
  } else {
    lines.push(`${key}={{ ${key} }} is not ${type.spec}: expected ${expected(type)}`);
  }
  lines.push('{% endif %}');
  return lines;
}

// Jinja (Ansible and nunjucks alike) for one alternative; null where the check
// needs more than both dialects share (list, map: YAML gives them their shape).
function jinjaTest(key, a, { text = false } = {}) {
  const s = `(${key} | string)`;
  // A number or bool kind takes a native value only; { text: true } asks
  // whether the text would fit once unquoted.
  const native = text ? '' : a.kind === 'bool' ? `(not (${key} is string)) and ` : `(${key} is number) and `;
  // Ansible's `match` test (nunjucks has the same one, lib/template.js); no
  // backslashes: the two dialects unescape string literals differently.
  const re = (pattern) => `(${s} is match('${pattern}'))`;
  switch (a.kind) {
    case 'int': {
      const parts = [`${native}${re(PATTERNS.int)}`];
      if (a.min !== -Infinity) parts.push(`(${key} | int) >= ${a.min}`);
      if (a.max !== Infinity) parts.push(`(${key} | int) <= ${a.max}`);
      return `(${parts.join(' and ')})`;
    }
    case 'port': return `(${native}${re(PATTERNS.int)} and (${key} | int) >= 1 and (${key} | int) <= 65535)`;
    case 'size': return re(PATTERNS.size);
    case 'duration': return re(PATTERNS.duration);
    case 'mode': return re(PATTERNS.mode);
    case 'enum': return `(${s} in [${a.values.map((v) => `'${v}'`).join(', ')}])`;
    case 'path': return `(${s} != '')`;
    case 'bool': return `(${native}((${s} | lower) in ['true', 'false']))`;
    case 'string': return 'true';
    case 'name': return re(PATTERNS.name);
    case 'version': return re(PATTERNS.version);
    case 'url': return re(PATTERNS.url);
    default: return null;
  }
}


const TYPES_TEMPLATE = 'roles/tunekit/templates/types.j2';

function main() {
  const { defaultFiles } = require('./definition');
  process.stdout.write(jinjaChecks(readTypes(defaultFiles())));
  return 0;
}

if (require.main === module) process.exitCode = main();

module.exports = { KINDS, TYPES_TEMPLATE, parseType, expected, mismatch, readTypes, problem, jinjaChecks };
