'use strict';
// The one place that finds the local nginx binary and asks its version.
// Every part of the kit that runs nginx (render --check, the local stack, the
// load-test scenarios, doctor, the reports) goes through here, so $TUNEKIT_NGINX
// points all of them at another build.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ConfigError } = require('./errors');

const INSTALL_HINT = 'Run: apt-get install -y nginx (or set TUNEKIT_NGINX=/path/to/nginx)';

/** $TUNEKIT_NGINX, else the first executable nginx on PATH, /usr/sbin or /usr/local/sbin; null if none. */
function findNginx() {
  if (process.env.TUNEKIT_NGINX) return process.env.TUNEKIT_NGINX;
  const dirs = [...(process.env.PATH || '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin'];
  for (const d of dirs) {
    const p = path.join(d || '.', 'nginx');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return null;
}

/** Like findNginx(), but refuses with the install command when there is none. */
function nginxBinary() {
  const bin = findNginx();
  if (!bin) throw new ConfigError(`nginx is not installed (no nginx on PATH or in /usr/sbin). ${INSTALL_HINT}`);
  return bin;
}

/** "1.22.1" from `nginx -V` (it prints to stderr), or null when it cannot be run. */
function nginxVersion(bin = findNginx()) {
  const m = /nginx\/(\d+\.\d+\.\d+)/.exec(nginxBuildText(bin) || '');
  return m ? m[1] : null;
}

// What each nginx binary printed for -V: a binary does not change under a
// running command, and the version, OpenSSL and modules are all read from it.
const buildTexts = new Map();

/** What `nginx -V` prints (version, OpenSSL, configure arguments), or null when it cannot be run. */
function nginxBuildText(bin = findNginx()) {
  if (!bin) return null;
  if (!buildTexts.has(bin)) {
    const r = spawnSync(bin, ['-V'], { encoding: 'utf8' });
    buildTexts.set(bin, r.status === 0 ? `${r.stdout || ''}${r.stderr || ''}` : null);
  }
  return buildTexts.get(bin);
}

/**
 * The OpenSSL an nginx runs with, "3.0.19", from `nginx -V`: "running with
 * OpenSSL X" when the shared library differs from the one it was built with,
 * else "built with OpenSSL X". null when it cannot be run or has no OpenSSL.
 */
function nginxOpenssl(bin = findNginx()) {
  const text = nginxBuildText(bin);
  return text == null ? null : opensslOf(text);
}

/** Whether an nginx is built with ngx_http_v3_module (HTTP/3); null when it cannot be run. */
function nginxHttp3(bin = findNginx()) {
  const text = nginxBuildText(bin);
  return text == null ? null : http3Of(text);
}

/** Whether `nginx -V` output lists --with-http_v3_module. */
function http3Of(text) {
  return /(^|\s)--with-http_v3_module(\s|$)/m.test(text);
}

/** The running OpenSSL's version in `nginx -V` output (see nginxOpenssl), or null. */
function opensslOf(text) {
  const m = /running with OpenSSL (\d+\.\d+\.\d+)/.exec(text) || /built with OpenSSL (\d+\.\d+\.\d+)/.exec(text);
  return m ? m[1] : null;
}

module.exports = { findNginx, nginxBinary, nginxVersion, nginxBuildText, nginxOpenssl, opensslOf, nginxHttp3, http3Of, INSTALL_HINT };
