'use strict';
// The `nginx-static` ceiling: the very nginx.conf a stack rendered (same
// main, events and http settings: workers, worker_connections, logging,
// buffers), with the proxied site swapped for one `return 200` location, so
// the figure is what nginx alone can do on this machine — the upper bound any
// proxied scenario can approach. Loadtest-only; nothing here is deployed.

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { childrenOf, freePort } = require('../lib/proc');

const { nginxBinary } = require('../lib/nginx');
const BODY = '{"ok":true,"static":true}';


function findFile(dir, name) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const hit = findFile(p, name);
      if (hit) return hit;
    } else if (entry.name === name) {
      return p;
    }
  }
  return null;
}

// The rendered nginx.conf with pid, error_log and the site include rewritten.
function staticConf(mainConf, { dir, port, siteListen }) {
  const site = path.join(dir, 'static-site.conf');
  const listenOpts = (siteListen || '').split(/\s+/).slice(1).filter((t) => /^(default_server|backlog=\d+|reuseport)$/.test(t));
  fs.writeFileSync(site, [
    '# tunekit loadtest: the nginx-static ceiling (return 200, no upstream).',
    'server {',
    `    listen 127.0.0.1:${port} ${listenOpts.join(' ')};`.replace(/ ;$/, ';'),
    '    access_log off;',
    '    location / {',
    '        default_type application/json;',
    `        return 200 '${BODY}';`,
    '    }',
    '}',
    '',
  ].join('\n'));
  let text = mainConf
    .replace(/^(\s*)pid\s+[^;]+;/m, `$1pid ${path.join(dir, 'nginx.pid')};`)
    .replace(/^(\s*)error_log\s+(\S+)([^;]*);/m, `$1error_log ${path.join(dir, 'error.log')}$3;`)
    .replace(/^(\s*)include\s+\S*\/site\.conf;/m, `$1include ${site};`)
    .replace(/^(\s*)include\s+\S*\/upstream\.conf;\n/m, '');
  if (!text.includes(site)) throw new Error('the rendered nginx.conf has no `include …/site.conf;` line to replace for nginx-static');
  text = text.replace(/^\s*daemon\s+\w+;\n/m, '');
  return text;
}

// Start the ceiling next to a started stack (lib/stack.js). Returns a
// target-like handle with url, pids(), errorLogPath and stop().
async function startStaticNginx(stack) {
  const conf = findFile(stack.renderDir, 'nginx.conf');
  if (!conf) throw new Error(`no nginx.conf under ${stack.renderDir}; nginx-static needs a rendered stack`);
  const siteFile = findFile(stack.renderDir, 'site.conf');
  const siteListen = siteFile ? (/^\s*listen\s+([^;]+);/m.exec(fs.readFileSync(siteFile, 'utf8')) || [])[1] : null;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-static-'));
  const port = await freePort();
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(file, staticConf(fs.readFileSync(conf, 'utf8'), { dir, port, siteListen }));
  const errorLogPath = path.join(dir, 'error.log');
  const args = ['-c', file, '-e', errorLogPath, '-g', 'daemon off;'];
  const t = spawnSync(nginxBinary(), ['-t', ...args], { encoding: 'utf8' });
  if (t.status !== 0) throw new Error(`nginx -t refused the nginx-static config ${file}:\n${t.stderr.trim()}`);
  const child = spawn(nginxBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  // Ready when it accepts a connection.
  const deadline = Date.now() + 10000;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nginx-static did not start on 127.0.0.1:${port}: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    errorLogPath,
    dir,
    pids: () => ({ nginx: [child.pid, ...childrenOf(child.pid)], app: [] }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGQUIT');
        const t1 = setTimeout(() => child.kill('SIGTERM'), 5000);
        const t2 = setTimeout(() => child.kill('SIGKILL'), 10000);
        await exited;
        clearTimeout(t1);
        clearTimeout(t2);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

module.exports = { startStaticNginx, staticConf, BODY };
