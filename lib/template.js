'use strict';
// The Node side of the kit's templating: a nunjucks environment configured to
// render the repo's Jinja2 templates byte for byte as Ansible's template module
// does (trim_blocks on, lstrip_blocks off, undefined names are errors), plus the
// few Jinja2 built-in filters nunjucks lacks and the Ansible filters and tests the
// templates use. Templates use only what both engines share;
// test/checks/nginx-render-parity.test.js proves the bytes match.

const nunjucks = require('nunjucks');
const { Compiler } = require('nunjucks/src/compiler');
const path = require('node:path');

// nunjucks 3.2.4 emits a test's arguments without commas between them, so a test
// with two arguments, which Jinja2 and Ansible allow (`v is version('1.19.10',
// '>=')`), compiles to invalid JavaScript. Emit them as an argument list, the way
// nunjucks compiles a function call's arguments. The parity test renders every
// template with both engines, so a nunjucks upgrade that changes this shows there.
Compiler.prototype.compileIs = function compileIs(node, frame) {
  const name = node.right.name ? node.right.name.value : node.right.value;
  this._emit(`env.getTest(${JSON.stringify(name)}).call(context, `);
  this.compile(node.left, frame);
  if (node.right.args) {
    for (const arg of node.right.args.children) {
      this._emit(', ');
      this.compile(arg, frame);
    }
  }
  this._emit(') === true');
};

const ROOT = path.resolve(__dirname, '..');

function jinjaMax(list) {
  if (!Array.isArray(list) || list.length === 0) throw new Error('max filter needs a non-empty list');
  return list.reduce((a, b) => (b > a ? b : a));
}

function jinjaMin(list) {
  if (!Array.isArray(list) || list.length === 0) throw new Error('min filter needs a non-empty list');
  return list.reduce((a, b) => (b < a ? b : a));
}

// Jinja2's tojson: JSON with <, >, & and ' escaped (htmlsafe_json_dumps).
function jinjaToJson(value) {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/'/g, '\\u0027');
}

// Ansible's `version` test (`x is version('1.19.10', '>=')`), for the dotted
// numeric versions the kit compares (nginx, Node). Unknown operators and
// malformed versions are errors, as in Ansible.
const VERSION_OPS = {
  '<': (c) => c < 0, lt: (c) => c < 0,
  '<=': (c) => c <= 0, le: (c) => c <= 0,
  '>': (c) => c > 0, gt: (c) => c > 0,
  '>=': (c) => c >= 0, ge: (c) => c >= 0,
  '==': (c) => c === 0, '=': (c) => c === 0, eq: (c) => c === 0,
  '!=': (c) => c !== 0, '<>': (c) => c !== 0, ne: (c) => c !== 0,
};

function compareVersions(a, b) {
  const parse = (v) => {
    const text = String(v);
    if (!/^\d+(\.\d+)*$/.test(text)) throw new Error(`"${text}" is not a version (expected digits and dots, e.g. 1.22.1)`);
    return text.split('.').map(Number);
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] || 0) - (y[i] || 0);
    if (d) return d < 0 ? -1 : 1;
  }
  return 0;
}

function jinjaVersionTest(value, ref, op = 'eq') {
  const cmp = VERSION_OPS[op];
  if (!cmp) throw new Error(`version test: unknown operator "${op}"`);
  return cmp(compareVersions(value, ref));
}

// Ansible's `match` test: the pattern matches at the start of the value.
function jinjaMatchTest(value, pattern) {
  return new RegExp(`^(?:${pattern})`).test(String(value));
}

// Ansible's `dirname` filter (Python's os.path.dirname): "/srv/app/x.js" -> "/srv/app".
function jinjaDirname(value) {
  const text = String(value);
  const i = text.lastIndexOf('/');
  if (i < 0) return '';
  const head = text.slice(0, i + 1);
  return /^\/+$/.test(head) ? head : head.replace(/\/+$/, '');
}

// One environment per search path list, made once: every caller configures it the
// same way and none changes it, and its string templates compile once. The rule
// table, the defaults' expressions and the apps' values are rendered again for every
// set of values resolved (tune checks hundreds; compiling was most of each check).
// Template files are still read afresh each time (the loader's noCache).
const ENVS = new Map();
const COMPILED_MAX = 5000;

function createEnv(searchPaths = [ROOT]) {
  const key = searchPaths.join('\0');
  if (!ENVS.has(key)) ENVS.set(key, makeEnv(searchPaths));
  return ENVS.get(key);
}

function makeEnv(searchPaths) {
  const loader = new nunjucks.FileSystemLoader(searchPaths, { noCache: true });
  const env = new nunjucks.Environment(loader, {
    autoescape: false,
    trimBlocks: true,
    lstripBlocks: false,
    throwOnUndefined: true,
  });
  env.addFilter('max', jinjaMax);
  env.addFilter('min', jinjaMin);
  env.addFilter('tojson', jinjaToJson);
  env.addFilter('dirname', jinjaDirname);
  env.addTest('version', jinjaVersionTest);
  env.addTest('match', jinjaMatchTest);
  // renderString as nunjucks has it (a Template of the string, rendered), with the
  // compiled template kept; a process that renders unbounded distinct strings
  // starts the cache over rather than grow it.
  const compiled = new Map();
  env.renderString = (src, ctx) => {
    let tmpl = compiled.get(src);
    if (!tmpl) {
      if (compiled.size >= COMPILED_MAX) compiled.clear();
      tmpl = new nunjucks.Template(src, env);
      compiled.set(src, tmpl);
    }
    return tmpl.render(ctx);
  };
  return env;
}

/** Whether a value is a Jinja template (Ansible templates it when it is read). */
function isTemplated(v) {
  return typeof v === 'string' && (v.includes('{{') || v.includes('{%'));
}

// Ansible (2.19, native types) turns a template whose result is an integer into
// an int and one whose result is a boolean into a bool; everything else stays a
// string. Mirror that for the values we derive (nunjucks prints true/false).
function nativeType(text) {
  if (/^-?\d+$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}

module.exports = { createEnv, compareVersions, ROOT, isTemplated, nativeType };
