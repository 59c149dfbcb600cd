'use strict';
// Every command's help, as a user reads it: `tunekit CMD --help`, `-h` and
// `tunekit help CMD` print the same text, in one format (a usage line, what it
// does, the options with their values, two examples), and what the text says
// holds: each example parses as written, and each allowed value it lists is
// accepted by the command's own argument parsing.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runCommand } = require('../lib/util');
const { helpText } = require('../../lib/command');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'bin/tunekit.js');
const COMMANDS = fs.readdirSync(path.join(ROOT, 'bin/commands')).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3));

// The examples name ./app.js as a user's app and tune.yml as tune's result: parse them where both exist.
const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'tk-help-'));
fs.writeFileSync(path.join(cwd, 'app.js'), "module.exports = (req, res) => res.end('ok');\n");
fs.writeFileSync(path.join(cwd, 'tune.yml'), 'tunekit_app_workers: 1\n');
process.chdir(cwd);
test.after(() => {
  process.chdir(ROOT);
  fs.rmSync(cwd, { recursive: true, force: true });
});

const tunekit = (args) => runCommand(process.execPath, [CLI, ...args], { cwd, timeoutMs: 60000 });

for (const name of COMMANDS) {
  const mod = require(`../../bin/commands/${name}`);
  const { COMMAND } = mod;

  test(`tunekit ${name} --help, -h and tunekit help ${name} print the same text, in the one format`, async () => {
    const runs = await Promise.all([[name, '--help'], [name, '-h'], ['help', name]].map(tunekit));
    for (const r of runs) assert.equal(r.code, 0, r.out);
    assert.equal(runs[1].stdout, runs[0].stdout);
    assert.equal(runs[2].stdout, runs[0].stdout);
    const text = runs[0].stdout;
    assert.equal(text, `${helpText(COMMAND)}\n`);
    assert.match(text, new RegExp(`^usage: tunekit ${name} `));
    const sections = text.split('\n\n').map((p) => p.split('\n')[0]);
    assert.ok(sections.includes('options:') && sections.includes('examples:'), text);
    assert.doesNotMatch(text, /--\S+ X( |$)/m, 'every value has a name that says what it is');
    assert.ok(COMMAND.examples.length >= 2, `${name}: two examples`);
    for (const [opt, o] of Object.entries(COMMAND.options)) {
      assert.ok(o.help, `--${opt} says what it does`);
      if (o.type === 'string') assert.match(o.value || '', /^[A-Z]/, `--${opt} names its value`);
    }
  });

  test(`tunekit ${name}: every example in its help parses`, () => {
    for (const example of COMMAND.examples) {
      assert.doesNotMatch(example, /["'$`\\]/, 'an example is plain words, as split here');
      const [prog, cmd, ...argv] = example.split(/\s+/);
      assert.deepEqual([prog, cmd], ['tunekit', name], example);
      assert.doesNotThrow(() => mod.parse(argv), example);
    }
  });

  test(`tunekit ${name}: every allowed value its help lists is accepted`, () => {
    const base = COMMAND.examples[0].split(/\s+/).slice(2);
    for (const [opt, o] of Object.entries(COMMAND.options)) {
      for (const value of o.choices || []) {
        assert.doesNotThrow(() => mod.parse([...base, `--${opt}`, value]), `--${opt} ${value}`);
      }
      if (o.choices) assert.throws(() => mod.parse([...base, `--${opt}`, 'no-such-value']), { name: 'UsageError' }, `--${opt} refuses what it does not list`);
    }
  });
}

test('tunekit help CMD is that command\'s help, not the list of commands', async () => {
  const r = await tunekit(['help', 'run']);
  assert.equal(r.code, 0, r.out);
  assert.match(r.stdout, /^usage: tunekit run \[MODULE\]/);
  const top = await tunekit(['help']);
  assert.match(top.stdout, /^usage: tunekit <command>/);
  assert.match(top.stdout, /tunekit help <command>/);
});
