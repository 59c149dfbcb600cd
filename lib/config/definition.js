'use strict';
// The one definition's comment blocks, read (roles/tunekit/defaults/main/*.yml).
// Each tunable has a block of comment lines above it:
//
//   # <what it does>
//   # Unit: ... | Upstream default: ... | Why: ...   the variables table's columns
//   # Type: <type>                                   the grammar is in types.js
//   # Prefix: yes      a host path `tunekit render --prefix` moves under the tree (lib/render.js)
//   # Pod: <value>     what the Kubernetes pod sets it to (lib/kubernetes.js): a YAML
//                      scalar, which may be Jinja over the pod's tunekit_k8s_* values
//   # Per app: yes     an entry of tunekit_apps may set it for its app alone (lib/config/apps.js)
//   # Stock: <value>   its value in the stock profile, a YAML scalar (Jinja allowed);
//                      ansible/profiles/stock.yml is generated from these lines
//   # Live: <source>   where a running host shows its value (an nginx directive, a
//                      sysctl, /proc limits, the app's values, a probe), or "no: why";
//                      the grammar is in live.js, doctor reads it (lib/live/)
//   # See: <link>
//
// Nothing else keeps a list of which variable is prefixed, set by the pod or
// part of stock: these lines are that list (`npm run generate` writes stock.yml).

const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');
const { ROOT } = require('../template');
const live = require('./live');
const { readYaml } = require('../files');

const DEFAULTS_DIR = path.join(ROOT, 'roles/tunekit/defaults/main');

function defaultFiles() {
  return fs.readdirSync(DEFAULTS_DIR)
    .filter((f) => f.endsWith('.yml'))
    .sort()
    .map((f) => path.join(DEFAULTS_DIR, f));
}

/**
 * Read every tunable with its comment block. Keys that follow each other with no
 * comment between them share the block above the first (e.g. user and group).
 * @returns {{file: string, key: string, value: string, what: string, unit: string,
 *            upstream: string, why: string, type: string, see: string,
 *            prefix: boolean, perApp: boolean, pod: string|null, stock: string|null,
 *            live: object[]|null}[]}
 *          (pod and stock: the line's YAML text, as written; live: the sources of the
 *          `# Live:` line, parsed by live.js)
 */
function readDefinition(files = defaultFiles()) {
  const out = [];
  for (const file of files) {
    let block = [];
    let shared = null;
    const rel = path.relative(ROOT, file);
    const { text, doc } = readYaml(file);
    const values = doc || {};
    for (const line of text.split('\n')) {
      const comment = /^#\s?(.*)$/.exec(line);
      const entry = /^(tunekit_\w+):\s*(.*)$/.exec(line);
      if (comment) {
        block.push(comment[1]);
        shared = null;
      } else if (entry) {
        const info = block.length ? parseBlock(block, `${rel}: ${entry[1]}`) : shared;
        if (!info) throw new Error(`${rel}: ${entry[1]} has no comment; say what it does, its unit, upstream default and why`);
        out.push({ file: rel, key: entry[1], value: show(values[entry[1]]), ...info });
        shared = info;
        block = [];
      } else {
        block = [];
        if (line.trim() === '') shared = null;
      }
    }
  }
  return out;
}

function show(value) {
  if (value && typeof value === 'object') return '(table)';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function parseBlock(lines, where) {
  const info = { what: [], unit: '', upstream: '', why: '', type: '', see: '', prefix: false, perApp: false, pod: null, stock: null, live: null };
  for (const line of lines) {
    const annotation = /^(Type|See|Prefix|Pod|Stock|Per app):\s*(.*)$/.exec(line);
    const liveLine = /^Live:\s*(.*)$/.exec(line);
    if (liveLine) {
      info.live = live.parse(liveLine[1], where);
    } else if (/^Unit:/.test(line)) {
      for (const part of line.split(/ \| (?=Upstream default:|Why:)/)) {
        const m = /^(Unit|Upstream default|Why):\s*(.*)$/.exec(part.trim());
        if (m) info[{ Unit: 'unit', 'Upstream default': 'upstream', Why: 'why' }[m[1]]] = m[2];
      }
    } else if (annotation) {
      const [, name, text] = annotation;
      if ((name === 'Prefix' || name === 'Per app') && text !== 'yes') throw new Error(`${where}: "# ${name}: ${text}": write "# ${name}: yes", or leave the line out`);
      if (name === 'Pod' || name === 'Stock') yamlScalar(text, `${where}: "# ${name}: ${text}"`);
      if (name === 'Per app') info.perApp = true;
      else info[name.toLowerCase()] = name === 'Prefix' ? true : text;
    } else {
      info.what.push(line);
    }
  }
  return { ...info, what: info.what.join(' ').trim() };
}

/** The value of a `# Pod:` or `# Stock:` line: one YAML scalar (a number, true/false, text). */
function yamlScalar(text, where = text) {
  if (/^\{[{%]/.test(text)) throw new Error(`${where}: quote a Jinja expression, as the definition's values do: "${text}"`);
  let value;
  try {
    value = YAML.parse(text, { mapAsMap: true });
  } catch (err) {
    throw new Error(`${where} is not a YAML value (${err.message.split('\n')[0]}); quote text that YAML would read otherwise`);
  }
  if (value === null || typeof value === 'object') throw new Error(`${where}: write one value (a number, true/false, text; "" for empty)`);
  return value;
}

module.exports = { DEFAULTS_DIR, defaultFiles, readDefinition, yamlScalar };
