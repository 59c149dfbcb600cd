'use strict';
// The facts written twice stay equal. A template explains each directive and
// states the upstream default on a "Default:" line; the definition's comment
// states the same default ("Upstream default:") for the variable that sets the
// directive, and both link the same documentation. Where a template directive
// takes its whole value from one variable, the two defaults must agree (the
// value before any "(...)" note; "60s" in nginx's syntax is 60 for a variable in
// seconds) and the template's link must be the variable's "See:" link.
//
// Only where the variable documents that very directive (its See: link ends in
// #NAME): a variable that feeds several programs states the default of one.
// A block with several directives states their defaults in order, separated by
// "; " or ", " (a part may also start with the directive's name: "KillMode=...").

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const renderer = require('../../lib/render');
const { ROOT } = require('../../lib/template');
const { readDefinition } = require('../../lib/config/vartable');

const definition = new Map(readDefinition().map((d) => [d.key, d]));
const templates = [...new Set(renderer.loadManifest().map((e) => e.src))];
const COMMENT = /^\s*#/;

/** Split "a (x; y), b; c" at top-level ", " and "; ". */
function parts(text) {
  const out = [''];
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (depth === 0 && (text.startsWith(', ', i) || text.startsWith('; ', i))) {
      out.push('');
      i++;
    } else {
      out[out.length - 1] += c;
    }
  }
  return out.map((p) => p.trim());
}

const head = (text) => text.split(' (')[0].trim();

/**
 * Each comment block with a Default: line and the directives right below it:
 * [{ src, line, name, variable, unit, stated, links }].
 */
function pairs() {
  const out = [];
  for (const src of templates) {
    const lines = fs.readFileSync(path.join(ROOT, src), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!COMMENT.test(lines[i])) continue;
      const block = [];
      while (i < lines.length && COMMENT.test(lines[i])) block.push(lines[i++].replace(/^\s*#\s?/, ''));
      const directives = [];
      for (; i < lines.length && lines[i].trim() !== '' && !COMMENT.test(lines[i]); i++) {
        if (/^\s*\{[%#]/.test(lines[i])) continue;
        // nginx: `name value;` — systemd: `Name=value`
        const m = /^\s*(\w+)\s+(.*);\s*$/.exec(lines[i]) || /^\s*(\w+)=(.*)$/.exec(lines[i]);
        if (m) directives.push({ name: m[1], value: m[2].trim(), line: i + 1 });
      }
      i--;
      // nginx's templates give it a line; systemd's end a sentence with it.
      const stated = block.map((l) => /\bDefault:\s*(.*?)\.?$/.exec(l)).find(Boolean);
      if (!stated || !directives.length) continue;
      const defaults = parts(stated[1]);
      const links = block.filter((l) => /^https?:\/\//.test(l));
      directives.forEach((d, k) => {
        const v = /^\{\{\s*(tunekit_\w+)\s*\}\}(s|ms)?$/.exec(d.value);
        if (!v || !definition.has(v[1])) return;
        // The variable documents this directive (its See: link is the
        // directive's): the same fact. A variable that feeds directives of
        // several programs (the backlog: Node, nginx, systemd) states one.
        if (!new RegExp(`#${d.name}(=|$|\\s)`).test(definition.get(v[1]).see)) return;
        const named = defaults.find((p) => p.startsWith(`${d.name} `) || p.startsWith(`${d.name}=`));
        const part = named ? named.slice(d.name.length + 1)
          : defaults.length === directives.length ? defaults[k]
            : directives.length === 1 ? defaults.join(', ') : null;
        // The unit: nginx's suffix after the value (60s), or the variable's name (_s).
        const unit = v[2] || (/_ms$/.test(v[1]) ? 'ms' : /_s$/.test(v[1]) ? 's' : '');
        out.push({ src, line: d.line, name: d.name, variable: v[1], unit, stated: part, links });
      });
    }
  }
  return out;
}

test('every default a template states for a variable\'s directive is the definition\'s', () => {
  const found = pairs();
  assert.ok(found.length >= 25, `${found.length} directive/variable pairs read`);
  const differ = [];
  for (const p of found) {
    const def = definition.get(p.variable);
    const stated = p.stated === null ? null : head(p.stated).replace(new RegExp(`^(\\d+) ?${p.unit}$`), p.unit ? '$1' : '$&');
    if (stated !== head(def.upstream)) {
      differ.push(`${p.src}:${p.line} ${p.name}: template "Default: ${p.stated}", ${def.file} ${p.variable} "Upstream default: ${def.upstream}"`);
    }
  }
  assert.deepEqual(differ, [], 'one default, said the same way in both places');
});

test('a template links the documentation its variable links', () => {
  const differ = [];
  for (const p of pairs()) {
    const see = definition.get(p.variable).see;
    if (!p.links.length || !see) continue;
    if (!p.links.some((l) => see.split(/\s+/).includes(l))) {
      differ.push(`${p.src}:${p.line} ${p.name}: template ${p.links.join(' ')}, ${p.variable} See: ${see}`);
    }
  }
  assert.deepEqual(differ, []);
});
