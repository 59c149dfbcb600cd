'use strict';
// The one evaluator of the rule table over a live host: the same rules
// (roles/tunekit/vars/rules.yml) and the same nunjucks `when` that `tunekit render`
// refuses a set by (lib/config/rules.js), over the live set (variables.js). Each
// rule is evaluated — broken or holding, with the values it read and where — or
// not, with each variable it would need and why that one was not read.

const rules = require('../config/rules');
const { createEnv } = require('../template');

const show = (v) => (typeof v === 'string' ? JSON.stringify(v) : v && typeof v === 'object' ? "(the kit's table)" : String(v));

/**
 * @param live {values, from, missing} (variables.js liveVariables)
 * @returns [{ id, rule, evaluated: true, broken, read: ["tunekit_x=V (where)"], from: ["where"], says }
 *          | { id, rule, evaluated: false, missing: [{ variable, why }] }]
 */
function evaluate(live, { table = rules.load(), env = createEnv() } = {}) {
  return table.map((rule) => {
    const reads = rules.reads(rule);
    const missing = reads.filter((k) => !(k in live.values))
      .map((k) => ({ variable: k, why: live.missing[k] || 'the definition gives it no # Live: line' }));
    if (missing.length) return { id: rule.id, rule, evaluated: false, missing };
    // `says` may name more of the live values than `when` reads (a group, a path).
    const broken = rules.broken(rule, live.values, env);
    return {
      id: rule.id,
      rule,
      evaluated: true,
      broken,
      read: reads.map((k) => `${k}=${show(live.values[k])} (${live.from[k]})`),
      from: reads.map((k) => live.from[k]),
      says: broken ? rules.says(rule, live.values, env) : null,
    };
  });
}

module.exports = { evaluate };
