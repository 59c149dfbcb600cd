'use strict';
// A reader for nginx configuration as `nginx -T` prints it: the whole tree, every
// include expanded, each file introduced by "# configuration file PATH:". Enough
// grammar for an audit (directives, blocks, quoted strings, comments); it does not
// validate — `nginx -t` does that.

/** Split nginx config text into tokens: words ({ word, line }), '{', '}', ';'. Lines count from 1. */
function tokenize(text) {
  const tokens = [];
  let i = 0;
  let line = 1;
  const skip = (to) => {
    for (; i < to; i++) if (text[i] === '\n') line++;
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '#') {
      let j = i;
      while (j < text.length && text[j] !== '\n') j++;
      skip(j);
    } else if (/\s/.test(c)) {
      skip(i + 1);
    } else if (c === '{' || c === '}' || c === ';') {
      tokens.push(c);
      i++;
    } else if (c === '"' || c === "'") {
      const at = line;
      let j = i + 1;
      let word = '';
      while (j < text.length && text[j] !== c) {
        if (text[j] === '\\' && j + 1 < text.length) j++;
        word += text[j++];
      }
      tokens.push({ word, line: at });
      skip(j + 1);
    } else {
      let j = i;
      while (j < text.length && !/[\s{};]/.test(text[j])) j++;
      tokens.push({ word: text.slice(i, j), line });
      i = j;
    }
  }
  return tokens;
}

/**
 * Parse one file's text into a tree of { name, args, file, line, children? }:
 * where each directive is written (file as given, line of its name).
 * `nginx -T` output holds several files; use parseDump for it.
 */
function parse(text, file = null) {
  const tokens = tokenize(text);
  let pos = 0;
  function block() {
    const out = [];
    while (pos < tokens.length) {
      const t = tokens[pos];
      if (t === '}') {
        pos++;
        return out;
      }
      if (t === ';' || t === '{') {
        pos++;
        continue;
      }
      const words = [];
      const { line } = t;
      while (pos < tokens.length && typeof tokens[pos] === 'object') words.push(tokens[pos++].word);
      const end = tokens[pos++];
      const node = { name: words[0], args: words.slice(1), file, line };
      if (end === '{') node.children = block();
      out.push(node);
    }
    return out;
  }
  return block();
}

/**
 * Split `nginx -T` output into files and resolve `include` directives, giving the
 * effective tree rooted at the main file.
 */
function parseDump(dump) {
  const files = new Map();
  let current = null;
  for (const line of dump.split('\n')) {
    const m = /^# configuration file (.+):$/.exec(line);
    if (m) {
      current = m[1];
      files.set(current, []);
    } else if (current) {
      files.get(current).push(line);
    }
  }
  if (!files.size) throw new Error('no "# configuration file" sections: is this `nginx -T` output?');
  const parsed = new Map([...files].map(([f, lines]) => [f, parse(lines.join('\n'), f)]));
  const main = [...files.keys()][0];
  const seen = new Set();
  function expand(nodes, dir) {
    const out = [];
    for (const n of nodes) {
      if (n.name === 'include') {
        const pattern = n.args[0].startsWith('/') ? n.args[0] : `${dir}/${n.args[0]}`;
        const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
        for (const [file, tree] of parsed) {
          if (re.test(file) && !seen.has(file)) {
            seen.add(file);
            out.push(...expand(tree, dir));
            seen.delete(file);
          }
        }
      } else if (n.children) {
        out.push({ ...n, children: expand(n.children, dir) });
      } else {
        out.push(n);
      }
    }
    return out;
  }
  const prefixDir = main.slice(0, main.lastIndexOf('/'));
  return { main, files: [...files.keys()], tree: expand(parsed.get(main), prefixDir) };
}

/** Where a directive is written, as an editor opens it: "FILE:LINE" (its line alone when the file is not known). */
function where(node) {
  return node.file ? `${node.file}:${node.line}` : `line ${node.line}`;
}

/** Every node named `name` anywhere under `nodes`, with its ancestors. */
function findAll(nodes, name, ancestors = []) {
  const out = [];
  for (const n of nodes) {
    if (n.name === name) out.push({ node: n, ancestors });
    if (n.children) out.push(...findAll(n.children, name, [...ancestors, n]));
  }
  return out;
}

/** The first direct child directive `name` of a block, or null. */
function child(nodes, name) {
  return (nodes || []).find((n) => n.name === name) || null;
}

/** nginx time ("60s", "1m", "75", "1h 30m") in seconds. */
function seconds(value) {
  const units = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, M: 2592000, y: 31536000 };
  let total = 0;
  const re = /(\d+)(ms|s|m|h|d|w|M|y)?/g;
  let m;
  let any = false;
  while ((m = re.exec(value))) {
    any = true;
    total += Number(m[1]) * units[m[2] || 's'];
  }
  if (!any) throw new Error(`"${value}" is not an nginx time`);
  return total;
}

module.exports = { tokenize, parse, parseDump, findAll, child, seconds, where };
