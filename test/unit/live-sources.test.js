'use strict';
// The `# Live:` lines of the definition (lib/config/live.js): where a running
// host shows each value a cross-layer rule reads. A line outside the grammar is
// refused with the variable named; the docs' table says, rule by rule, whether
// doctor can read all it needs, and for each variable it cannot, why.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { readDefinition } = require('../../lib/config/definition');
const live = require('../../lib/config/live');
const vartable = require('../../lib/config/vartable');

function definitionWith(lines, t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-live-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, '99-x.yml');
  fs.writeFileSync(file, ['# A value for the test.', '# Unit: s | Upstream default: 60 | Why: a test', ...lines, 'tunekit_x_s: 60', ''].join('\n'));
  return () => readDefinition([file]);
}

test('a # Live: line is parsed into its sources, in order', (t) => {
  const [d] = definitionWith(['# Live: nginx keepalive_timeout in upstream as seconds or app.json idleMs as seconds'], t)();
  assert.deepEqual(d.live, [
    { kind: 'nginx', directive: 'keepalive_timeout', param: null, context: 'upstream', shape: 'seconds' },
    { kind: 'app.json', field: 'idleMs', seconds: true },
  ]);
  assert.equal(d.what, 'A value for the test.', 'the line is not part of the prose');
  // The Node version of the app's processes, where no /healthz reports it (a PM2 cluster's workers).
  assert.deepEqual(live.parse('healthz node or process node-version'), [{ kind: 'healthz', field: 'node', seconds: false }, { kind: 'process', field: 'node-version' }]);
  assert.equal(live.term({ kind: 'process', field: 'node-version' }), "the app's Node version");
});

test('a # Live: line outside the grammar is refused, naming the variable and what to write', (t) => {
  for (const [line, says] of [
    ['# Live: nginx keepalive_timeout in somewhere', /tunekit_x_s: "# Live: nginx keepalive_timeout in somewhere": the context is one of main, events/],
    ['# Live: ps aux', /tunekit_x_s: "# Live: ps aux": a source is one of nginx, sysctl/],
    ['# Live: no:', /tunekit_x_s: "# Live: no:": say why it is not read live/],
    ['# Live: nginx listen in server as octal', /the shape is one of seconds, number/],
  ]) {
    assert.throws(definitionWith([line], t), (err) => says.test(err.message), line);
  }
});

test("the docs' table marks a rule live exactly when every variable it reads has a live source, and names each one that has none", () => {
  const definition = [
    { key: 'tunekit_a', live: live.parse('sysctl net.core.somaxconn') },
    { key: 'tunekit_b', live: live.parse('no: only the pod has it') },
  ];
  const table = [
    { id: 'both-live', when: '{{ tunekit_a > 1 }}' },
    { id: 'one-not', when: '{{ tunekit_a > tunekit_b }}' },
    { id: 'unlined', when: '{{ tunekit_c }}' },
  ];
  const text = vartable.liveTable(definition, table);
  assert.match(text, /\*\*1 of 3\*\*/);
  assert.match(text, /\| <a id="rule-both-live"><\/a>`both-live` \| `tunekit_a` \| yes \|/);
  assert.match(text, /\| <a id="rule-one-not"><\/a>`one-not` \| `tunekit_a`, `tunekit_b` \| no: `tunekit_b`: only the pod has it \|/);
  assert.match(text, /\| <a id="rule-unlined"><\/a>`unlined` \| `tunekit_c` \| no: `tunekit_c`: no `# Live:` line \|/);
  assert.match(text, /\| `tunekit_a` \| sysctl `net.core.somaxconn` \|/);
});

test("every variable a rule of the kit's table reads says where a live host shows it, or why it cannot (a # Live: line)", () => {
  const { readDefinition } = require('../../lib/config/definition');
  const rules = require('../../lib/config/rules');
  const lined = new Set(readDefinition().filter((v) => v.live).map((v) => v.key));
  const unlined = rules.load().flatMap((r) => rules.reads(r).filter((k) => !lined.has(k)).map((k) => `${k} (rule ${r.id})`));
  assert.deepEqual(unlined, [], 'add a # Live: line beside each (lib/config/live.js has the grammar; "no: REASON" when no host shows it)');
});
