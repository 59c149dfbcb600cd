'use strict';
// Command-line parsing shared by the commands: node:util's parseArgs, with a
// negative number taken as the value of the option before it (`--workers -3`
// gives -3 to --workers, so the value's own check names the problem) instead of
// node:util's "ambiguous" refusal, and its long messages cut to the first sentence.

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { UsageError } = require('./errors');
const { reason } = require('./files');

const NEGATIVE_NUMBER = /^-\d+(\.\d+)?$/;

/** parseArgs(config), throwing a one-line UsageError that points at `help`. */
function parseCommandLine(config, help) {
  const args = [];
  const argv = config.args;
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([^=]+)$/.exec(argv[i]);
    const opt = m && config.options[m[1]];
    if (opt && opt.type === 'string' && NEGATIVE_NUMBER.test(argv[i + 1] || '')) {
      args.push(`${argv[i]}=${argv[i + 1]}`);
      i++;
    } else {
      args.push(argv[i]);
    }
  }
  try {
    return parseArgs({ ...config, args });
  } catch (err) {
    // node:util's messages run to several sentences; the first names the problem.
    throw new UsageError(`${err.message.split(/\.\s|\n/)[0]}; see ${help}`);
  }
}

/** A flag's whole-number value within [min, max], or a UsageError naming the flag. */
function wholeNumber(name, value, min, max) {
  const n = Number(value);
  if (!/^-?\d+$/.test(String(value).trim()) || n < min || n > max) {
    throw new UsageError(`--${name} ${value}: expected a whole number from ${min} to ${max}`);
  }
  return n;
}

/** A flag's value from a fixed list, or a UsageError naming the flag and the list. */
function oneOf(name, value, list) {
  if (!list.includes(value)) throw new UsageError(`--${name} ${value}: expected one of ${list.join(', ')}`);
  return value;
}

/** A file a flag names for writing: its directory must exist (nothing is created at a mistyped path). */
function outputFile(name, value) {
  const dir = path.dirname(path.resolve(value));
  if (!isDirectory(dir)) throw new UsageError(`--${name} ${value}: directory ${dir} does not exist; create it first or choose another path`);
  return value;
}

/** A file a flag names for reading: it must exist and be a regular file. */
function inputFile(name, value) {
  let st = null;
  try {
    st = fs.statSync(value);
  } catch (err) {
    throw new UsageError(`--${name} ${value}: ${reason(err)}; give the path of an existing file`);
  }
  if (!st.isFile()) throw new UsageError(`--${name} ${value}: not a regular file; give the path of a file`);
  return value;
}

function isDirectory(dir) {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

module.exports = { parseCommandLine, wholeNumber, oneOf, outputFile, inputFile, isDirectory };
