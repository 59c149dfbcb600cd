'use strict';
// What `tunekit tune` writes: the vars file (YAML that `tunekit render --vars` and
// site.yml take as they are, a comment above each value with its evidence), the
// terminal summary, and the report in the loadtest style (Markdown, HTML with a
// chart of what was tried over time, JSON is the document itself).

const YAML = require('yaml');
const T = require('./tune');

const pct = (x) => `${(x * 100).toFixed(1)}%`;
const times = (s) => (s && s.median != null ? `×${s.median.toFixed(3)} (${s.min.toFixed(3)}–${s.max.toFixed(3)})` : 'n/a');
const unitOf = (objective) => (objective === 'rps' ? 'req/s' : 'server CPU per request');
// A gain as the user reads it: req/s multiplied, CPU per request divided (a gain of
// 1.25 on the cpu objective is CPU per request ÷1.25).
// With the verdict's 95% interval of the per-round gains (tune.js verdict, interval.js),
// where two or more rounds gave one.
const ciText = (ci) => (ci && ci.low != null ? `, 95% interval ×${ci.low.toFixed(3)}–${ci.high.toFixed(3)}` : '');
const gainText = (objective, s, ci) => {
  const text = `${times(s)}${ciText(ci)}`;
  return objective === 'rps' ? `req/s ${text}` : `server CPU per request ${text.replace(/×/g, '÷')}`;
};

// The steps that changed `key` (the strategy step sets the upstream kind too).
function changesOf(tune, key) {
  const dim = key === 'tunekit_upstream_kind' ? 'tunekit_app_strategy' : key;
  return tune.steps.filter((s) => s.changed && s.variable === dim);
}

// A step as the report names it: its number and its phase (the screen or the descent).
const stepName = (s) => (s.phase ? `${s.step} (${s.phase})` : String(s.step));

// The comment above one value of the vars file: what was measured for it.
function valueComment(tune, key, options = {}) {
  if (key === 'tunekit_upstream_kind') return ['# follows tunekit_app_strategy below: per-worker has one socket per worker; the other strategies keep the start\'s kind'];
  const changed = changesOf(tune, key);
  const tried = tune.steps.filter((s) => s.variable === key).flatMap((s) => s.challengers.map((c) => c.value));
  if (tune.recommend && changed.length && tune.recommended[key] !== tune.start[key]) {
    return changed.map((s) => {
      const c = s.challengers.find((x) => x.label === s.kept);
      const v = c.verdict;
      return `# step ${stepName(s)}: ${s.incumbent} -> ${s.kept}: ${howText(v, tune.objective)}`;
    });
  }
  if (!tried.length && options.vary && !options.vary.includes(key)) {
    return [key === T.GZIP_LEVEL && !options.gzip
      ? '# as the start values: not varied: the load asked for no compression, so the level could not matter (tune --gzip varies it)'
      : '# as the start values: not varied (not in --vary)'];
  }
  if (!tried.length) return ['# as the start values: not varied in this run (no budget left for it, or it does not apply)'];
  return [`# as the start values: tried ${[...new Set(tried)].join(', ')}; none won every round beyond the spread` +
    `${tune.recommend ? '' : ', or the winner was not confirmed'}`];
}

// worker_connections were measured only against the load's connections: what the
// value holds, so an operator sizes it for the service's clients, not for the test's.
function loadComment(tune, key, options) {
  if (key !== 'tunekit_nginx_worker_connections' || !options.connections) return [];
  const wc = tune.recommended[key];
  return [`# holds ${T.heldRequests(wc)} proxied requests at once per nginx worker; this load had ${options.connections} connections ` +
    `(tune tried none under ${T.connectionsNeeded(options.connections)}): size it for your service's clients at once, ` +
    'about 2.2 x them per worker'];
}

const VERDICT = {
  faster: 'won every round', fixes: 'won: met the objective in every round, the incumbent did not',
  slower: 'lost every round', breaks: 'lost: missed the objective where the incumbent met it',
};

/** How a winner won (tune.js verdict), in one clause. */
function howText(v, objective) {
  if (v.how === 'fixes') {
    return `met the objective in all ${v.rounds} rounds where the other missed it in ${v.missed.incumbent}, ` +
      `and was not slower beyond the spread (${pct(v.margin)}) where both met it: ${gainText(objective, v.gain, v.ci)}`;
  }
  // A round the incumbent missed and the challenger met is won whatever the speeds
  // (gain Infinity); the gain figures are those of the other rounds, said as such.
  const fixed = v.gains ? v.gains.filter((g) => g === Infinity).length : 0;
  if (fixed) {
    const rest = v.rounds - fixed;
    return `won all ${v.rounds} rounds beyond the spread (${pct(v.margin)}): met the objective in the ${fixed} where the other missed it` +
      (rest ? `, and ${gainText(objective, v.gain, v.ci)} in the other ${rest}` : '');
  }
  return `won all ${v.rounds} rounds beyond the spread (${pct(v.margin)}): ${gainText(objective, v.gain, v.ci)}`;
}

/**
 * The bench that measures a recommendation against the kit's values in the same
 * interleaved rounds (its try/uds ratio): the app and start values of the run, and
 * its paced rate when the objective was CPU per request.
 */
function checkCommand(o) {
  return ['tunekit bench --scenarios uds', o.app ? `--app ${o.app}` : '', o.from ? `--vars ${o.from}` : '',
    '--try THIS_FILE --rounds 3', o.objective === 'cpu' ? `--cpu-rate ${o.rate}` : ''].filter(Boolean).join(' ');
}

/** The vars file: every value the search varies, each with its evidence. */
function varsText(doc) {
  const t = doc.tune;
  const c = t.confirmation;
  const head = [
    '# tunekit tune: values for this host and this app, found by measurement.',
    `# ${doc.command}`,
    `# ${doc.createdAt}, ${doc.host.hostname}: ${doc.host.cores} cores, nginx ${doc.host.nginx || '?'}, Node ${doc.host.node}; ` +
      `objective: ${doc.options.objectiveText}`,
  ];
  if (t.recommend) {
    head.push(`# Recommended: against the start values, ${howText(c.verdict, t.objective)}.`);
  } else {
    head.push('# Keep what you have: these are the start values.', `# Why: ${c.why}.`);
  }
  const from = doc.options.from ? ` --vars ${doc.options.from}` : '';
  head.push(`# Use: tunekit render --out DIR${from} --vars THIS_FILE, or ansible-playbook -i INVENTORY tunekit.stack.site -e @THIS_FILE`);
  if (t.recommend) head.push(`# Check it: ${checkCommand(doc.options)}`);
  head.push('');
  const body = [];
  for (const key of T.KEYS) {
    body.push(...valueComment(t, key, doc.options), ...loadComment(t, key, doc.options), YAML.stringify({ [key]: t.recommended[key] }).trimEnd());
  }
  return `${head.join('\n')}\n${body.join('\n')}\n`;
}

/** The answer in a few lines (the terminal, and the top of every report). */
function verdictLines(doc) {
  const t = doc.tune;
  const c = t.confirmation;
  const lines = [];
  if (t.recommend) {
    lines.push(`Recommended: ${t.best.label} — against the start values, ${howText(c.verdict, t.objective)}.`);
  } else {
    lines.push(`Keep what you have: ${c.why}${t.best.label !== 'start values' ? ` (the search's best was ${t.best.label})` : ''}.`);
  }
  const measured = t.candidates.filter((x) => x.rules === 'passed');
  lines.push(`${t.steps.length} steps, ${measured.length} candidates measured, ${t.candidates.length - measured.length} refused by the kit's rules or the load's, ` +
    `${t.trials.filter((x) => x.rejected).length} runs in rounds rejected for other load; ${Math.round(t.elapsedS)} s of a ${doc.options.budgetS} s budget` +
    `${t.stoppedBy === 'budget' ? ' (stopped by the budget)' : ' (no neighbour of the best won)'}.`);
  return lines;
}

const CANDIDATE_HEAD = ['candidate', 'rules', 'rounds', 'rejected rounds', 'first tried (s)'];
const candidateRow = (c) => [c.label, c.failed ? `passed; did not start: ${c.failed}` : c.rules, c.rounds, c.rejectedRounds, c.firstAtS];
const STEP_HEAD = ['step', 'variable', 'incumbent', 'challenger', 'rounds', 'gain (median, min–max)', 'gain, 95% interval', 'spread', 'verdict'];
function stepRows(t) {
  return t.steps.flatMap((s) => s.challengers.map((c) => [stepName(s), s.variable, s.incumbent, c.label, c.verdict ? c.verdict.rounds : 0,
    c.verdict ? times(c.verdict.gain) : 'n/a', c.verdict && c.verdict.ci && c.verdict.ci.low != null ? `×${c.verdict.ci.low.toFixed(3)}–${c.verdict.ci.high.toFixed(3)}` : 'n/a',
    c.verdict ? pct(c.verdict.margin) : 'n/a',
    !c.verdict ? 'not measured' : !c.verdict.rounds ? 'no counted round (all rejected or out of budget)' : VERDICT[c.verdict.how] || 'unclear: kept the incumbent']));
}
const TRIAL_HEAD = ['step', 'round', 'candidate', 'at (s)', 'value', 'p99 µs', 'met', 'others (cores)', 'counted'];
const trialRow = (x) => [x.step, x.round, x.label, x.atS, x.value == null ? 'n/a' : Number(x.value.toFixed(1)),
  x.p99Us == null ? 'n/a' : Math.round(x.p99Us), x.meets ? 'yes' : 'no',
  x.result.otherCores == null ? 'n/a' : x.result.otherCores.toFixed(2), x.rejected ? 'rejected: other load' : 'yes'];

function mdTable(head, rows) {
  const esc = (c) => String(c).replace(/\|/g, '\\|');
  return [`| ${head.map(esc).join(' | ')} |`, `|${head.map((_, i) => (i ? '---:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}

function toMarkdown(doc) {
  const t = doc.tune;
  return [`# tunekit tune`, '', `\`${doc.command}\` — ${doc.createdAt}`, '', `Objective: ${doc.options.objectiveText}.`, '',
    ...verdictLines(doc).map((l) => `- ${l}`), '',
    '## Candidates (each checked by the kit\'s rules first; a refused one was never started)', '', mdTable(CANDIDATE_HEAD, t.candidates.map(candidateRow)), '',
    '## Steps', '', mdTable(STEP_HEAD, stepRows(t)), '',
    '## Confirmation rounds (the best against the start values)', '',
    mdTable(TRIAL_HEAD, t.trials.filter((x) => x.step === 'confirmation').map(trialRow)), '',
    '## Every run', '', mdTable(TRIAL_HEAD, t.trials.map(trialRow)), ''].join('\n');
}

// What was tried over time: each run a dot at its time, its value relative to the
// start values' median; the incumbent's runs filled, rejected rounds hollow.
function timeChart(t) {
  const { esc } = require('./html');
  const W = 1000;
  const H = 320;
  const m = { l: 60, r: 20, t: 16, b: 36 };
  const runs = t.trials.filter((x) => x.value != null);
  if (!runs.length) return '<p>No run measured.</p>';
  // The start values' median over their runs (rejected ones too: the scale, not a verdict).
  const startRuns = runs.filter((x) => x.label === 'start values').map((x) => x.value).sort((a, b) => a - b);
  const base = startRuns.length ? startRuns[startRuns.length >> 1] : runs[0].value;
  const rel = (v) => v / base;
  const ys = runs.map((x) => rel(x.value));
  const lo = Math.min(...ys, 1) * 0.95;
  const hi = Math.max(...ys, 1) * 1.05;
  const maxT = Math.max(...runs.map((x) => x.atS), 1);
  const X = (s) => m.l + (s / maxT) * (W - m.l - m.r);
  const Y = (v) => H - m.b - ((v - lo) / (hi - lo)) * (H - m.t - m.b);
  const labels = [...new Set(runs.map((x) => x.label))];
  const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" role="img">`,
    `<line x1="${m.l}" x2="${W - m.r}" y1="${Y(1)}" y2="${Y(1)}" stroke="#999" stroke-dasharray="4 3"/>`,
    `<text x="${m.l - 6}" y="${Y(1) + 4}" text-anchor="end" font-size="11">1.00</text>`,
    `<text x="${m.l - 6}" y="${Y(hi) + 10}" text-anchor="end" font-size="11">${hi.toFixed(2)}</text>`,
    `<text x="${m.l - 6}" y="${Y(lo)}" text-anchor="end" font-size="11">${lo.toFixed(2)}</text>`,
    `<text x="${W / 2}" y="${H - 6}" text-anchor="middle" font-size="11">seconds since the start; value ÷ the start values' median (${esc(unitOf(t.objective))})</text>`];
  for (const x of runs) {
    const color = COLORS[labels.indexOf(x.label) % COLORS.length];
    out.push(`<circle cx="${X(x.atS).toFixed(1)}" cy="${Y(rel(x.value)).toFixed(1)}" r="4" ${x.rejected ? `fill="none" stroke="${color}"` : `fill="${color}"`}><title>${esc(`${x.label}, step ${x.step}, round ${x.round}`)}</title></circle>`);
  }
  labels.forEach((l, i) => out.push(`<text x="${m.l + 8}" y="${m.t + 12 + i * 14}" font-size="11" fill="${COLORS[i % COLORS.length]}">● ${esc(l)}</text>`));
  out.push('</svg>');
  return out.join('\n');
}

function toHtml(doc) {
  const { page, esc, htmlTable } = require('./html');
  const t = doc.tune;
  const body = [
    '<h1>tunekit tune</h1>',
    `<p class="meta"><code>${esc(doc.command)}</code> — ${esc(doc.createdAt)}<br>Objective: ${esc(doc.options.objectiveText)}</p>`,
    ...verdictLines(doc).map((l) => `<p class="verdict">${esc(l)}</p>`),
    '<h2>What was tried, over time</h2>',
    '<p>Every measured run; hollow: a round rejected because other processes kept too many cores busy.</p>',
    timeChart(t),
    '<h2>Candidates</h2><p>Every one passed the kit\'s rules before it was started; refused ones were never started.</p>',
    htmlTable(CANDIDATE_HEAD, t.candidates.map(candidateRow)),
    '<h2>Steps</h2>', htmlTable(STEP_HEAD, stepRows(t)),
    '<h2>Confirmation rounds</h2>', htmlTable(TRIAL_HEAD, t.trials.filter((x) => x.step === 'confirmation').map(trialRow)),
    '<h2>Every run</h2>', htmlTable(TRIAL_HEAD, t.trials.map(trialRow)),
  ];
  return page('tunekit tune report', body);
}

module.exports = { varsText, verdictLines, toMarkdown, toHtml, valueComment, howText };
