'use strict';
// A command's options in one table, the one home of their facts: parseArgs reads
// it, the values it lists are the values accepted, and --help is printed from it.
//
// A command is described as
//   {
//     name: 'render',
//     usage: ['--out DIR [options]'],          // one line each, after "tunekit render"
//     about: 'what it does, one paragraph',
//     options: {
//       out:    { type: 'string', value: 'DIR', help: 'where to write the tree' },
//       target: { type: 'string', value: 'NAME', choices: ['host', 'kubernetes'], default: 'host', help: '...' },
//       layer:  { type: 'string', value: 'NAME', multiple: true, choices: [...], help: '...' },
//       prefix: { type: 'boolean', help: '...' },
//     },
//     positionals: 0 | n,                      // how many positionals it takes (default 0)
//     examples: ['tunekit render --out /tmp/tree', ...],   // run as written; a test parses each
//     notes: 'text after the examples',        // optional
//   }
// -h/--help is added to every command. Help lines: the flag and its value's
// name, what it does, then its allowed values and its default.

const { parseCommandLine } = require('./args');
const { UsageError } = require('./errors');

const WIDTH = 80;
const FLAG_COLUMN = 24;
const HELP_OPTION = { type: 'boolean', short: 'h', help: 'this text' };

function optionsOf(command) {
  return { ...command.options, help: HELP_OPTION };
}

/** "--name VALUE" (or "-h, --help") as the help text shows it. */
function flagText(name, o) {
  const short = o.short ? `-${o.short}, ` : '';
  return `${short}--${name}${o.type === 'string' ? ` ${o.value || 'VALUE'}` : ''}`;
}

function showDefault(o) {
  if (o.default === undefined || o.type === 'boolean') return null;
  if (Array.isArray(o.default)) return o.default.length ? o.default.join(',') : null;
  return o.default === '' ? null : String(o.default);
}

// Words filled into lines of at most WIDTH columns, the first after `first`,
// the rest indented by `indent` spaces.
function wrap(text, first, indent) {
  const lines = [];
  let line = first;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const sep = line.trim() === '' ? '' : ' ';
    if (line.length + sep.length + word.length > WIDTH && line.trim() !== '') {
      lines.push(line);
      line = ' '.repeat(indent) + word;
    } else {
      line += sep + word;
    }
  }
  lines.push(line);
  return lines.join('\n');
}

function optionLine(name, o) {
  const extra = [];
  if (o.choices) extra.push(`one of: ${o.choices.join(', ')}`);
  const dflt = showDefault(o);
  if (dflt !== null) extra.push(`default: ${dflt}`);
  if (o.multiple) extra.push('repeatable');
  const text = `${o.help}${extra.length ? ` (${extra.join('; ')})` : ''}`;
  const flag = `  ${flagText(name, o)}`;
  // The text starts in its column, on the flag's line when the flag fits before it.
  if (flag.length < FLAG_COLUMN - 1) return wrap(text, flag.padEnd(FLAG_COLUMN - 1), FLAG_COLUMN);
  return `${flag}\n${wrap(text, ' '.repeat(FLAG_COLUMN), FLAG_COLUMN)}`;
}

/** The --help text of a command: usage, what it does, options, examples, notes. */
function helpText(command) {
  const usage = command.usage.map((u, i) => `${i === 0 ? 'usage: ' : '       '}tunekit ${command.name}${u ? ` ${u}` : ''}`);
  const options = Object.entries(optionsOf(command)).map(([name, o]) => optionLine(name, o));
  const parts = [
    usage.join('\n'),
    command.about.split(/\n\s*\n/).map((p) => wrap(p, '', 0)).join('\n\n'),
    `options:\n${options.join('\n')}`,
    `examples:\n${command.examples.map((e) => `  ${e}`).join('\n')}`,
  ];
  if (command.notes) parts.push(command.notes.split(/\n\s*\n/).map((p) => wrap(p, '', 0)).join('\n\n'));
  return parts.join('\n\n');
}

/**
 * Parse argv by the command's table: unknown flags, a missing value, a value
 * outside `choices` and too many positionals are one-line UsageErrors pointing
 * at --help. Returns {values, positionals}; values.help is true for -h/--help
 * (nothing else is checked then).
 */
function parse(command, argv) {
  const options = {};
  for (const [name, o] of Object.entries(optionsOf(command))) {
    options[name] = { type: o.type };
    if (o.short) options[name].short = o.short;
    if (o.multiple) options[name].multiple = true;
    if (o.default !== undefined) options[name].default = o.default;
    else if (o.type === 'boolean') options[name].default = false;
    else if (o.multiple) options[name].default = [];
  }
  const see = `tunekit ${command.name} --help`;
  const max = command.positionals || 0;
  const { values, positionals } = parseCommandLine({ args: argv, options, strict: true, allowPositionals: max > 0 }, see);
  if (values.help) return { values, positionals };
  if (positionals.length > max) {
    throw new UsageError(`unexpected ${positionals.slice(max).join(' ')}: tunekit ${command.name} takes ${max ? `at most ${max} argument(s)` : 'no arguments'}; see ${see}`);
  }
  for (const [name, o] of Object.entries(command.options)) {
    if (!o.choices || values[name] === undefined) continue;
    for (const v of [].concat(values[name])) {
      if (!o.choices.includes(v)) throw new UsageError(`--${name} ${v}: expected one of ${o.choices.join(', ')}; see ${see}`);
    }
  }
  return { values, positionals };
}

/** How the user runs this CLI from the current directory, for the commands the CLI prints (lib/kit.js). */
function invocation() {
  return require('./kit').invocation();
}

/**
 * This command again, as root: `sudo node bin/tunekit.js NAME ARGS...`, each
 * argument quoted for sh where it needs it; what a command that needs root (or
 * a path only root may write) offers in its one line.
 */
function asRoot(name, argv) {
  const quote = (a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${String(a).replace(/'/g, "'\\''")}'`);
  return `sudo ${invocation()} ${[name, ...argv].map(quote).join(' ')}`;
}

/** With -h/--help among the parsed values: print the command's help and say so (its main returns 0). */
function printedHelp(command, values) {
  if (!values.help) return false;
  console.log(typeof values.help === 'string' ? values.help : helpText(command));
  return true;
}

module.exports = { helpText, parse, printedHelp, flagText, invocation, asRoot };
