'use strict';
// The `nginx-static` ceiling: the nginx.conf a stack renders (same main,
// events and http settings: workers, worker_connections, logging, buffers),
// with the proxied site swapped for one `return 200` location through the
// template's `site` block (static-nginx.conf.j2), so the figure is what nginx
// alone can do on this machine — the upper bound any proxied scenario can
// approach. Loadtest-only; nothing here is deployed.

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { childrenOf, freePort } = require('../lib/proc');
const { nginxBinary } = require('../lib/nginx');
const { createEnv } = require('../lib/template');

const BODY = '{"ok":true,"static":true}';
const TEMPLATE = 'loadtest/static-nginx.conf.j2';

/**
 * The nginx-static nginx.conf: the kit's nginx.conf.j2 extended through its
 * `site` block (loadtest/static-nginx.conf.j2), rendered with the values the
 * stack was rendered with, its pid, error log and listen address moved to `dir`
 * and `port`.
 */
function staticConf(vars, { dir, port }) {
  return createEnv().render(TEMPLATE, {
    ...vars,
    tunekit_nginx_pid_path: path.join(dir, 'nginx.pid'),
    tunekit_nginx_error_log_path: path.join(dir, 'error.log'),
    tunekit_nginx_listen_address: '127.0.0.1',
    tunekit_nginx_listen_port: port,
    static_body: BODY,
  });
}

// Start the ceiling next to a started stack (lib/stack.js). Returns a
// target-like handle with url, pids(), errorLogPath and stop().
async function startStaticNginx(stack) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-static-'));
  const port = await freePort();
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(file, staticConf(stack.vars, { dir, port }));
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
