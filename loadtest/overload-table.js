'use strict';
// The tables of `tunekit bench --overload` (loadtest/overload.js), shared by the
// terminal, the Markdown and the HTML report: per stack, one row per step of the
// ladder, and the headline lines that compare the stacks at each step.

const { int, fixed, kindsText } = require('./format');
const { probeP99Ms } = require('./overload');

const ms = (us) => (us == null ? '–' : fixed(us / 1000, us < 10000 ? 2 : 0));

const STEP_HEAD = ['stack', 'offered', 'req/s', 'goodput', '× capacity', 'p50 ms', 'p99 ms', 'p99.9 ms',
  'refused', 'refused p99 ms', 'timeouts', 'errors', 'gen conns', 'gen waiting', 'nginx active', 'nginx listen q', 'app accept q', 'app conns', 'loop ms', 'srv µs/req', 'others'];

/** One row per step of one stack. */
function stepRows(s) {
  return s.steps.map((p) => {
    const refused = Object.entries(p.kinds).filter(([k]) => k.startsWith('HTTP ')).map(([k, n]) => `${int(n)} ${k.slice(5)}`).join(', ');
    const errors = kindsText(Object.fromEntries(Object.entries(p.kinds).filter(([k]) => !k.startsWith('HTTP ') && k !== 'timeout')));
    const q = p.queue;
    const v = (x) => (x == null ? '–' : int(x));
    return [s.stack, `${p.multiple}×${p.recovery ? ' (recovery)' : ''}`, int(p.rate), int(p.goodput), fixed(p.goodputShare, 2),
      ms(p.latencyUs.p50), ms(p.latencyUs.p99), ms(p.latencyUs.p999), refused || '0', p.rejectedUs ? ms(p.rejectedUs.p99) : '–',
      int(p.timeouts), errors || '0', v(q.connections), v(q.waiting), v(q.nginxActive), v(q.nginxQueue), v(q.appQueue), v(q.appConnections),
      q.loopMs == null ? '–' : fixed(q.loopMs, 0), p.cpuUsPerReq == null ? '–' : int(p.cpuUsPerReq), p.otherCores == null ? '–' : `${fixed(p.otherCores, 1)} cores`];
  });
}

/** One line per stack: the highest step against the lowest, and the recovery (with --burst: what the burst did). */
function headlines(doc) {
  if (doc.overload.burst) return doc.overload.stacks.map(burstLine);
  return doc.overload.stacks.map((s) => {
    const low = s.steps[0];
    const top = s.steps[s.steps.length - 2];
    const r = s.recovery;
    const back = r.secondsToRecover == null ? `not back within ${s.steps[s.steps.length - 1].durationS} s` : `back in ${r.secondsToRecover} s`;
    return `${s.stack}: at ${top.multiple}× goodput ${fixed(top.goodputShare, 2)} of capacity, served p99 ${ms(top.latencyUs.p99)} ms ` +
      `(${ms(low.latencyUs.p99)} ms at ${low.multiple}×), ${int(top.non2xx)} refused, ${int(top.timeouts)} timeouts; ` +
      `at 0.5× p99 ${back} to ≤ ${r.factor}× the ${low.multiple}× figure`;
  });
}

/** With --burst: the burst's requests refused, their served p99, the refusals after it, and how soon p99 was back. */
function burstLine(s) {
  const b = s.burst;
  const [low, burst, after] = s.steps;
  const r = s.recovery;
  const kinds = kindsText(b.kinds);
  const back = r.secondsToRecover == null ? `not back within ${after.durationS} s` : `back in ${r.secondsToRecover} s`;
  return `${s.stack}: ${burst.multiple}× for ${burst.durationS} s (${int(b.requests)} requests): ${b.refused ? `${int(b.refused)} refused or lost (${kinds})` : 'none refused'}, ` +
    `served p99 ${ms(b.servedP99Us)} ms (${ms(low.latencyUs.p99)} ms at ${low.multiple}× before); after it ${int(b.refusedAfter)} refused or lost; ` +
    `p99 ${back} to ≤ ${r.factor}× the ${low.multiple}× figure`;
}

/** The lines above the tables: capacity, ladder, the machine. */
function frame(doc) {
  const o = doc.overload;
  const runs = o.capacityRun && o.capacityRun.runs ? `the median of ${o.capacityRun.runs.length} runs: ${o.capacityRun.runs.map(int).join(', ')}; ` : '';
  const saturation = o.capacityRun ? `measured on ${o.capacityRun.stack} (${runs}${o.capacityRun.driver}, saturation, ${doc.options.connections} connections)` : 'given (--capacity)';
  const paced = o.capacityRun && o.capacityRun.paced;
  const cap = paced ? `the highest paced rate served by ${o.capacityRun.stack} (p99 ≤ ${probeP99Ms(doc.options.latencyBudgetMs)} ms, every request 2xx): ` +
    `${paced.probes.map((p) => `${int(p.rate)} ${p.served ? 'served' : 'not served'} (p99 ${ms(p.p99Us)} ms${p.refused ? `, ${int(p.refused)} not 2xx` : ''})`).join(', ')}` +
    `${paced.topped ? ', the highest probe' : ''}; the saturation figure ${int(paced.saturation)}, ${saturation}` : saturation;
  const others = o.stacks.map((s) => (s.otherCores == null ? null : `${s.stack} ${fixed(s.otherCores, 1)}`)).filter(Boolean).join(', ');
  const protectedSets = o.stacks.filter((s) => s.set).map((s) => `${s.stack}: ${s.set.join(', ')}`);
  return [
    ...protectedSets.map((t) => `protected stack, ${t} (bound and queue budget derived from them: docs/overload.md)`),
    `capacity ${int(o.capacity)} req/s, ${cap}; ${o.burst ? 'burst' : 'ladder'} ${o.ladder.map((p) => `${p.multiple}× ${p.durationS} s`).join(' → ')}; ` +
      `each step's figures leave out its first quarter (queues filling); open loop up to ${int(doc.options.maxConnections)} connections, ` +
      `client timeout ${doc.options.timeout} s`,
    ...(o.placement ? [`--own-core: the generator on CPU ${o.placement.generator}, every stack on CPU ${o.placement.stacks} (taskset), the capacity measured so too`] : []),
    `other load, the most during any run of each stack (cores busy outside the stack and the generator): ${others || 'not measured'}; ` +
      (o.burst ? 'the three steps are one run per stack, the stacks one after another' :
        'each step\'s runs take turns across the stacks, the order rotated per step; the highest step and the 0.5× one are one run'),
  ];
}

/** The HTML report's bars: goodput and served p99 per stack and step. */
function bars(doc) {
  const goodput = [];
  const p99 = [];
  doc.overload.stacks.forEach((s, i) => {
    for (const p of s.steps) {
      const name = `${s.stack} ${p.multiple}×${p.recovery ? ' after' : ''}`;
      goodput.push({ name, value: p.goodput, colorIndex: i });
      p99.push({ name, value: p.latencyUs.p99 == null ? null : p.latencyUs.p99 / 1000, colorIndex: i });
    }
  });
  return { goodput, p99 };
}

function text(doc, render) {
  return [
    `tunekit bench --overload — ${doc.host.cores} cores, Linux ${doc.host.kernel}, nginx ${doc.host.nginx || '?'}, Node ${doc.host.node}`,
    ...frame(doc),
    ...headlines(doc),
    '',
    render(STEP_HEAD, doc.overload.stacks.flatMap(stepRows)),
  ];
}

module.exports = { STEP_HEAD, stepRows, headlines, frame, bars, text };
