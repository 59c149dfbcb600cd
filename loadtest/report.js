'use strict';
// The report document (JSON, schema in README.md) and the host facts every
// report carries. Number formatting lives in format.js.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { cores } = require('./cpu');
const { nginxVersion } = require('../lib/nginx');
const { makeDirs } = require('../lib/files');
const { toMarkdown } = require('./markdown');
const { toHtml } = require('./html');

const SCHEMA = 'tunekit-loadtest/1';

function version(cmd, args, re) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  const m = re.exec(`${r.stdout || ''}${r.stderr || ''}`);
  return m ? m[1] : null;
}

function host() {
  let cpuModel = null;
  try {
    cpuModel = (/model name\s*:\s*(.+)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8')) || [])[1] || null;
  } catch { /* not Linux */ }
  let autocannon = null;
  try {
    autocannon = require('autocannon/package.json').version;
  } catch { /* not installed */ }
  return {
    hostname: os.hostname(),
    kernel: os.release(),
    cores: cores(),
    cpuModel,
    node: process.versions.node,
    nginx: nginxVersion(),
    autocannon,
    wrk: version('/usr/bin/wrk', ['--version'], /wrk (\S+)/),
  };
}

function document(kind, { command, options, stack = null, results, summary = null, ratios = null, warnings = [] }) {
  return {
    schema: SCHEMA,
    kind,
    createdAt: new Date().toISOString(),
    command,
    host: host(),
    options,
    stack,
    results,
    summary,
    ratios,
    warnings,
  };
}

function writeFile(file, text) {
  makeDirs(path.dirname(path.resolve(file)), { what: file });
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

// Write the reports asked for (--json, --md, --html); returns the files written.
function writeAll(doc, { json, md, html }) {
  if (json) writeFile(json, `${JSON.stringify(doc, null, 2)}\n`);
  if (md) writeFile(md, toMarkdown(doc));
  if (html) writeFile(html, toHtml(doc));
  return [json, md, html].filter(Boolean);
}

// The scenarios that got no successful response at all: the command then
// exits 1, whatever else it printed.
function failedScenarios(doc) {
  return [...new Set(doc.results.filter((r) => r.requests.ok === 0).map((r) => r.scenario))];
}

module.exports = { SCHEMA, host, document, writeFile, writeAll, failedScenarios };
