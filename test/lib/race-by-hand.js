'use strict';
// The keep-alive race made by hand the common way, on a rendered tree before its
// stack starts: app.json's keepAliveTimeoutMs back at Node's default 5 s, the
// upstream block's keepalive_timeout line gone (nginx keeps idle connections its
// default 60 s). doctor fails keepalive-race on it; the sampler writes it broken
// (test/unit/metrics-rules.test.js, test/faults/alerts.test.js).

const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');

function raceByHand(vars) {
  const app = vars.tunekit_app_config_path;
  fs.writeFileSync(app, `${JSON.stringify({ ...JSON.parse(fs.readFileSync(app, 'utf8')), keepAliveTimeoutMs: 5000 }, null, 2)}\n`);
  const upstream = path.join(vars.tunekit_nginx_include_dir, 'upstream.conf');
  const text = fs.readFileSync(upstream, 'utf8');
  assert.match(text, /^\s*keepalive_timeout \S+;$/m);
  fs.writeFileSync(upstream, text.replace(/^\s*keepalive_timeout \S+;$/m, ''));
}

module.exports = { raceByHand };
