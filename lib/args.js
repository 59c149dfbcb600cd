'use strict';
// Command-line parsing shared by the commands: node:util's parseArgs, with a
// negative number taken as the value of the option before it (`--workers -3`
// gives -3 to --workers, so the value's own check names the problem) instead of
// node:util's "ambiguous" refusal, and its long messages cut to the first sentence.

const { parseArgs } = require('node:util');
const { UsageError } = require('./errors');

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

module.exports = { parseCommandLine };
