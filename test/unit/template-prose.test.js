'use strict';
// Prose in the templates stays true after an override: a comment explains a
// directive whose value comes from a variable, and never states that value
// ("max_fails=0: never mark down" above `max_fails={{ x }}` is wrong once x
// is overridden). The value is in the directive below the comment, and the
// kit's reason for it in the definition's comment. "Default:" lines state
// nginx's or systemd's own default, a fact about them, and are exempt.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');

const templates = [...new Set(renderer.loadManifest().map((e) => e.src))];
const isComment = (line) => /^\s*#/.test(line);

/** Directive and parameter names whose value a template takes from a variable. */
function variableNames(text) {
  const names = new Set();
  for (const line of text.split('\n')) {
    if (isComment(line)) continue;
    const directive = /^\s*(\w+)[\s=].*\{\{/.exec(line);
    if (directive) names.add(directive[1]);
    for (const m of line.matchAll(/(\w+)=\{\{/g)) names.add(m[1]);
  }
  return names;
}

/** Comment text a value could be stated in: not links, not "Default:" facts. */
function prose(line) {
  const text = line.replace(/^\s*#\s?/, '');
  if (/^https?:/.test(text)) return '';
  return text.split('Default:')[0];
}

test('no template comment states the value of a directive set from a variable', () => {
  const names = new Set(templates.flatMap((src) => [...variableNames(fs.readFileSync(path.join(ROOT, src), 'utf8'))]));
  assert.ok(names.has('max_fails') && names.has('worker_connections'), 'the scan finds the templated directives');
  const found = [];
  for (const src of templates) {
    fs.readFileSync(path.join(ROOT, src), 'utf8').split('\n').forEach((line, i) => {
      if (!isComment(line)) return;
      const text = prose(line);
      for (const name of names) {
        // NAME=VALUE or NAME VALUE with a literal value: "max_fails=0", "keepalive 64".
        if (new RegExp(`\\b${name}(=| )[0-9"']`).test(text)) found.push(`${src}:${i + 1}: ${line.trim()}`);
      }
      // A comparison with the upstream default ("shorter than nginx's 60 s")
      // holds only for the kit's own value.
      if (/\b(shorter|longer|larger|smaller|higher|lower|more|fewer) than (nginx|node|systemd|the kernel|the default)/i.test(text)) {
        found.push(`${src}:${i + 1}: ${line.trim()}`);
      }
    });
  }
  assert.deepEqual(found, [], 'say what the directive does, not which value it has');
});
