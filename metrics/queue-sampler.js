#!/usr/bin/env node
'use strict';
// tunekit doctor's evaluation of this host, every interval, for node_exporter's
// textfile collector: each rule of the kit's table (roles/tunekit/vars/rules.yml)
// as doctor evaluates it live — the same extractor (lib/live) and the same
// evaluator (lib/doctor.js, lib/live/evaluate.js), broken or holding — and the
// accept queues the kit sizes: for the app's Unix socket and nginx's TCP
// listeners, how many connections wait to be accepted and how many may (`ss -l`:
// for a listening socket Recv-Q is the queue, Send-Q its limit). A Unix socket
// has no overflow counter; a full one shows only as nginx's EAGAIN 502.
// It requires ../lib: the tunekit_metrics role ships it with the part of the kit
// doctor needs (lib/, the rule table, the definition, nunjucks and yaml).
//
//   node queue-sampler.js --textfile-dir /var/lib/prometheus/node-exporter \
//     --unix /run/tunekit-app/app.sock --tcp 80 --tcp 443 \
//     --app-config /etc/tunekit-app/app.json --nginx-conf /etc/nginx/nginx.conf [--interval-s 15 | --once]
//
// The file (FILE_NAME) is written whole, then renamed into place: node_exporter
// never reads half a sample. Metric names: lib/textfile.js, metrics/README.md.

const fs = require('node:fs');
const { parseArgs } = require('node:util');
const { sample, writeAtomically, FILE_NAME } = require('../lib/textfile');

const OPTIONS = {
  'textfile-dir': { type: 'string' },
  unix: { type: 'string', multiple: true, default: [] },
  tcp: { type: 'string', multiple: true, default: [] },
  'app-config': { type: 'string' },
  'nginx-conf': { type: 'string' },
  'nginx-bin': { type: 'string' },
  'interval-s': { type: 'string', default: '15' },
  once: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
};

const USAGE = 'usage: queue-sampler.js --textfile-dir DIR [--unix PATH]... [--tcp [ADDR:]PORT]... '
  + '[--app-config app.json] [--nginx-conf nginx.conf] [--nginx-bin nginx] [--interval-s N | --once]';

function options(argv) {
  const { values: v } = parseArgs({ args: argv, options: OPTIONS, strict: true });
  if (v.help) return { help: true };
  if (!v['textfile-dir']) throw new Error(`--textfile-dir is required (node_exporter's --collector.textfile.directory)\n${USAGE}`);
  if (!fs.statSync(v['textfile-dir'], { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`--textfile-dir ${v['textfile-dir']} is not a directory: create it, or pass node_exporter's --collector.textfile.directory`);
  }
  const intervalS = Number(v['interval-s']);
  if (!(intervalS > 0)) throw new Error(`--interval-s ${v['interval-s']} is not a positive number of seconds`);
  for (const t of v.tcp) if (!/^(\d+|.+:\d+)$/.test(t)) throw new Error(`--tcp ${t}: give PORT or ADDR:PORT as ss prints it (127.0.0.1:80, [::]:443)`);
  return { textfileDir: v['textfile-dir'], unix: v.unix, tcp: v.tcp, appConfig: v['app-config'], nginxConf: v['nginx-conf'],
    nginxBin: v['nginx-bin'], intervalS, once: v.once };
}

/** One sample written; what could not be read said on stderr. Returns whether all was read. */
async function tick(o) {
  try {
    const { text, errors } = await sample(o);
    writeAtomically(o.textfileDir, FILE_NAME, text);
    for (const e of errors) console.error(`queue-sampler: cannot read ${e}`);
    return errors.length === 0;
  } catch (err) {
    // ss failed, a file named went away or the directory did: the file keeps its
    // last sample, whose timestamp shows its age; the next tick tries again.
    console.error(`queue-sampler: ${err.message}`);
    return false;
  }
}

async function main(argv = process.argv.slice(2)) {
  let o;
  try {
    o = options(argv);
  } catch (err) {
    console.error(`queue-sampler: ${err.message}`);
    process.exit(2);
  }
  if (o.help) {
    console.log(USAGE);
    return;
  }
  if (o.once) {
    if (!await tick(o)) process.exitCode = 1;
    return;
  }
  // The next sample starts an interval after this one ended: a slow `nginx -T`
  // never stacks samples.
  let timer = null;
  let stopped = false;
  for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => { stopped = true; clearTimeout(timer); });
  const loop = async () => {
    await tick(o);
    if (!stopped) timer = setTimeout(loop, o.intervalS * 1000);
  };
  await loop();
}

if (require.main === module) main();

module.exports = { options, FILE_NAME };
