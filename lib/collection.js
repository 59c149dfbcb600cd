'use strict';
// The Ansible collection tunekit.stack is this repository (galaxy.yml at the
// root; docs/design.md, "The repository is the collection"). What it ships is
// the tree minus galaxy.yml's build_ignore; `npm run generate` (lib/generate.js)
// writes from it the ignore file of `ansible-test sanity`
// (tests/sanity/ignore-X.Y.txt, X.Y the ansible-core pinned in requirements-dev.txt):
// ansible-test takes a collection's bin/ for Python scripts and allows only
// Python and shell shebangs, and the kit's CLI there is JavaScript.
// https://docs.ansible.com/ansible-core/2.19/dev_guide/testing/sanity/ignores.html

const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');
const { ROOT } = require('./template');

const GALAXY = 'galaxy.yml';
// The sanity tests that read every file of bin/ as Python.
const PYTHON_TESTS = ['compile-3.11', 'pep8', 'pylint'];

/** A build_ignore pattern (fnmatch: * ? [...]) as a RegExp over a path relative to the root. */
function pattern(glob) {
  const body = glob.replace(/[.+^${}()|\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.').replace(/\[!/g, '[^');
  return new RegExp(`^${body}$`);
}

/** galaxy.yml's build_ignore, as RegExps. */
function ignored(root = ROOT) {
  const galaxy = YAML.parse(fs.readFileSync(path.join(root, GALAXY), 'utf8'));
  return (galaxy.build_ignore || []).map(pattern);
}

/** Is the path (relative to the root) left out of the collection? A directory left out leaves out all below it. */
function leftOut(rel, patterns = ignored()) {
  const parts = rel.split('/');
  return parts.some((_, i) => patterns.some((p) => p.test(parts.slice(0, i + 1).join('/'))));
}

/** Every file the collection ships, relative to the root, sorted: the tree, less build_ignore (and .git). */
function shippedFiles(root = ROOT, patterns = ignored(root)) {
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (p === '.git' || leftOut(p, patterns)) continue;
      if (e.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk('');
  return out.sort();
}

/** The ansible-core minor version the kit pins (requirements-dev.txt), e.g. "2.19". */
function ansibleCoreMinor(root = ROOT) {
  const m = /^ansible-core==(\d+\.\d+)\./m.exec(fs.readFileSync(path.join(root, 'requirements-dev.txt'), 'utf8'));
  if (!m) throw new Error('requirements-dev.txt pins no ansible-core==X.Y.Z; the sanity ignore file is named after it');
  return m[1];
}

function sanityIgnorePath(root = ROOT) {
  return `tests/sanity/ignore-${ansibleCoreMinor(root)}.txt`;
}

/**
 * The ignore file's lines for the shipped files: each JavaScript file of bin/
 * skips the Python tests, each shipped file with a `#!/usr/bin/env node` line
 * skips the shebang test, and each module of plugins/modules/ is let off the
 * GPLv3 header validate-modules asks for (the collection is MIT). Nothing else
 * is ignored.
 */
function sanityIgnores(files, read) {
  const lines = [];
  for (const f of files) {
    if (f.startsWith('bin/')) {
      for (const t of PYTHON_TESTS) lines.push(`${f} ${t}!skip  # not Python: the kit's CLI (JavaScript); ansible-test reads bin/ as Python`);
    }
    if (f.endsWith('.js') && read(f).startsWith('#!/usr/bin/env node')) lines.push(`${f} shebang!skip  # a Node.js script`);
    if (/^plugins\/modules\/[^/]+\.py$/.test(f)) lines.push(`${f} validate-modules:missing-gplv3-license  # the collection is MIT-licensed (galaxy.yml)`);
  }
  return `${lines.join('\n')}\n`;
}

module.exports = { GALAXY, pattern, ignored, leftOut, shippedFiles, ansibleCoreMinor, sanityIgnorePath, sanityIgnores };
