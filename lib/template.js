'use strict';
// The Node side of the kit's templating: a nunjucks environment configured to
// render the repo's Jinja2 templates byte for byte as Ansible's template module
// does (trim_blocks on, lstrip_blocks off, undefined names are errors), plus the
// few Jinja2 built-in filters nunjucks lacks. Templates use only what both
// engines share; test/integration/nginx-render-parity.test.js proves the bytes match.

const nunjucks = require('nunjucks');
const path = require('node:path');

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

function createEnv(searchPaths = [ROOT]) {
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
  return env;
}

module.exports = { createEnv, ROOT };
