'use strict';
// Render the kit's templates into a host tree: every entry of the manifest
// (ansible/roles/tunekit/vars/main.yml, `tunekit_templates`, the same
// list the Ansible roles read) becomes OUT/<dest>.
//
// All templates are rendered into memory first; files are written only when every
// one rendered, each through a temp file in its own directory and a rename, so a
// reader never sees a half-written file and a failed render writes nothing.
//
// prefix mode (`tunekit render --prefix`): the tree is made self-contained and
// runnable by the user who renders it. File contents use paths under OUT (conf dir,
// pid, logs, temp dirs, socket dir, app config), nginx's user and the socket group
// become the caller's (or, with `nginxUser`, that user and its primary group, as on
// a host), and the runtime directories are created, so
// `nginx -t -c OUT/etc/nginx/nginx.conf` (and nginx itself) work without /etc.
// Destinations are still computed from the host paths, so the files land at the
// same places: OUT + /etc/nginx/nginx.conf.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');
const { createEnv, ROOT } = require('./template');
const { checkVars, requireNginxVersion } = require('./config');
const { readDefinition } = require('./config/definition');
const { ConfigError } = require('./errors');
const { nginxBinary } = require('./nginx');
const { makeDirs } = require('./files');
const accounts = require('./accounts');
const tls = require('./tls');

const MANIFEST = 'ansible/roles/tunekit/vars/main.yml';

// Absolute paths a prefixed tree moves under OUT: the variables whose comment
// block in the definition says `# Prefix: yes` (lib/config/definition.js).
// Derived ones (socket path, include dir) are marked too: a user may have set
// them explicitly. Read at each prefixed render (a few small files), so that
// loading this module never fails on a definition being edited.
function prefixKeys() {
  return readDefinition().filter((d) => d.prefix).map((d) => d.key);
}

/** The manifest: [{src, dest, layer, mode, when_var?, when_equals?, validate?}]. */
function loadManifest() {
  const file = path.join(ROOT, MANIFEST);
  const doc = YAML.parse(fs.readFileSync(file, 'utf8'));
  const list = doc && doc.tunekit_templates;
  if (!Array.isArray(list)) throw new ConfigError(`${MANIFEST} has no tunekit_templates list`);
  return list;
}

// Ansible's `bool` filter: what a role's `when:` would accept as true.
function truthy(v) {
  if (typeof v === 'string') return ['true', 'yes', 'on', '1'].includes(v.trim().toLowerCase());
  return v === true || v === 1;
}

/** Whether a manifest entry applies to this set of values (when_var / when_equals). */
function applies(entry, vars) {
  if (!entry.when_var) return true;
  if (!(entry.when_var in vars)) {
    throw new ConfigError(`${MANIFEST}: ${entry.src} has when_var ${entry.when_var}, which is not defined`);
  }
  const value = vars[entry.when_var];
  if ('when_equals' in entry) return String(value) === String(entry.when_equals);
  return truthy(value);
}

/**
 * The values a prefixed tree is rendered with: host paths moved under dir,
 * nginx's user and the socket group set to the caller's (with nginxUser: that
 * user, and its primary group for the socket), checks run again (a longer socket
 * path may now exceed sun_path).
 */
function prefixVars(vars, dir, { nginxUser = null } = {}) {
  const root = path.resolve(dir);
  const out = { ...vars };
  for (const key of prefixKeys()) {
    const value = vars[key];
    if (typeof value !== 'string' || !value) continue;
    if (!path.isAbsolute(value)) {
      throw new ConfigError(`${key}=${value} must be an absolute path`);
    }
    out[key] = path.join(root, value);
  }
  // A prefixed tree is self-contained: nothing of the host's nginx is included.
  out.tunekit_nginx_host_mode = 'dedicated';
  const me = os.userInfo();
  const group = accounts.groupName(me.gid);
  out.tunekit_nginx_user = nginxUser || me.username;
  out.tunekit_app_user = me.username;
  out.tunekit_app_group = group;
  out.tunekit_socket_group = nginxUser ? primaryGroup(nginxUser) : group;
  const problems = checkVars(out);
  if (problems.length) {
    throw new ConfigError(`inconsistent settings once prefixed with ${root}:\n  - ${problems.join('\n  - ')}`);
  }
  return out;
}

function primaryGroup(user) {
  const u = accounts.users().get(user);
  if (!u) throw new ConfigError(`nginx user ${user} does not exist on this machine: pass an existing unprivileged user (www-data, nobody)`);
  return accounts.groupName(u.gid);
}

/** Directories a running prefixed tree needs (nginx does not create parents). */
function runtimeDirs(vars) {
  const dirs = [
    path.dirname(vars.tunekit_nginx_pid_path),
    vars.tunekit_nginx_temp_dir,
    path.dirname(vars.tunekit_nginx_error_log_path),
    path.dirname(vars.tunekit_nginx_access_log_path),
  ];
  return [...new Set(dirs)];
}

function templateError(src, err) {
  const msg = String(err.message || err).replace(/\s+/g, ' ').trim();
  return new ConfigError(`cannot render ${src}: ${msg}`);
}

/**
 * A prefixed tree with TLS on runs without the host's certificate: when the
 * certificate or key is missing under the tree, a throwaway leaf and the CA
 * that signed it (ca.pem, next to the certificate) are made there.
 */
function throwawayCertificate(vars, algorithm) {
  const cert = vars.tunekit_nginx_tls_certificate;
  const key = vars.tunekit_nginx_tls_certificate_key;
  if (fs.existsSync(cert) && fs.existsSync(key)) return;
  const dir = path.dirname(cert);
  tls.makeLeaf(dir, tls.makeCA(dir), { cert, key }, { algorithm });
}

/**
 * Render the manifest into memory.
 * @param {object} vars  resolved values (lib/config resolve())
 * @param {object} [opts]
 * @param {object} [opts.contentVars=vars]  values the file contents are rendered with
 * @param {string[]} [opts.layers]  only these layers (nginx, app, systemd, sysctl, pm2)
 * @param {object[]} [opts.manifest]  entries to render instead of the manifest file's
 * @returns {{dest: string, src: string, layer: string, mode: number, content: string}[]}
 */
function renderAll(vars, { contentVars = vars, layers = null, manifest = null } = {}) {
  const env = createEnv();
  const out = [];
  const missing = [];
  for (const entry of manifest || loadManifest()) {
    if (layers && !layers.includes(entry.layer)) continue;
    if (!applies(entry, contentVars)) continue;
    if (entry.layer === 'nginx') requireNginxVersion(vars);
    if (!fs.existsSync(path.join(ROOT, entry.src))) {
      missing.push(entry.src);
      continue;
    }
    let dest;
    try {
      dest = env.renderString(String(entry.dest), vars);
    } catch (err) {
      throw templateError(`the dest of ${entry.src}`, err);
    }
    if (!path.isAbsolute(dest) || path.normalize(dest) !== dest) {
      throw new ConfigError(`${entry.src} renders to "${dest}", which is not a clean absolute path; check the variables in its dest (${entry.dest})`);
    }
    let content;
    try {
      content = env.render(entry.src, contentVars);
    } catch (err) {
      throw templateError(entry.src, err);
    }
    out.push({ dest, src: entry.src, layer: entry.layer, mode: parseInt(String(entry.mode || '0644'), 8), content });
  }
  if (missing.length) {
    throw new ConfigError(
      `templates listed in ${MANIFEST} do not exist: ${missing.join(', ')}. ` +
        'Restore them, or render only the layers you need (--layer nginx --layer app).',
    );
  }
  return out;
}

function writeAtomic(file, content, mode) {
  makeDirs(path.dirname(file));
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  try {
    fs.writeFileSync(tmp, content, { mode });
    fs.chmodSync(tmp, mode);
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Render every applicable template and write the tree under outDir.
 * @param {object} vars  resolved values (lib/config resolve())
 * @param {string} outDir
 * @param {object} [opts]
 * @param {boolean} [opts.prefix=false]  make the tree self-contained (see top)
 * @param {string[]} [opts.layers]  only these layers
 * @param {object[]} [opts.manifest]  entries to render instead of the manifest file's
 * @param {'ec'|'rsa'} [opts.throwawayKey='ec']  key type of a throwaway certificate (prefixed TLS trees)
 * @param {string|null} [opts.nginxUser]  prefixed trees: nginx's workers run as this user, the socket
 *   in its primary group (default: the caller and its group)
 * @returns {{files: string[], dirs: string[], vars: object}} absolute paths written, the values used
 */
function render(vars, outDir, { prefix = false, layers = null, manifest = null, throwawayKey = 'ec', nginxUser = null } = {}) {
  const root = path.resolve(outDir);
  const contentVars = prefix ? prefixVars(vars, root, { nginxUser }) : vars;
  const rendered = renderAll(vars, { contentVars, layers, manifest });
  const files = [];
  for (const r of rendered) {
    const file = path.join(root, r.dest);
    writeAtomic(file, r.content, r.mode);
    files.push(file);
  }
  const dirs = [];
  if (prefix) {
    for (const d of runtimeDirs(contentVars)) {
      makeDirs(d);
      dirs.push(d);
    }
    if (contentVars.tunekit_nginx_tls) {
      makeDirs(contentVars.tunekit_nginx_acme_webroot);
      dirs.push(contentVars.tunekit_nginx_acme_webroot);
      throwawayCertificate(contentVars, throwawayKey);
    }
    // The socket's directory: searchable by the socket group only (0750), as
    // systemd's RuntimeDirectory makes it on a host.
    makeDirs(contentVars.tunekit_socket_dir, { mode: 0o750 });
    dirs.push(contentVars.tunekit_socket_dir);
  }
  return { files, dirs, vars: contentVars };
}

/**
 * `nginx -t` on a prefixed tree (render(..., {prefix: true}) returned its vars).
 * @returns {{ok: boolean, output: string, command: string}}
 */
function checkNginx(prefixedVars) {
  const bin = nginxBinary();
  const conf = path.join(prefixedVars.tunekit_nginx_conf_dir, 'nginx.conf');
  const args = ['-t', '-q', '-c', conf];
  const { spawnSync } = require('node:child_process');
  const r = spawnSync(bin, args, { encoding: 'utf8' });
  const output = `${r.stdout || ''}${r.stderr || ''}`.trim();
  return { ok: r.status === 0, output: output || (r.error ? r.error.message : ''), command: `${bin} ${args.join(' ')}` };
}

/**
 * Validate a set before it is written: render a prefixed twin into a temp dir,
 * run `nginx -t` on it, remove it. Throws a ConfigError with nginx's message.
 */
function validate(vars, { layers = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-check-'));
  try {
    const { vars: pv } = render(vars, dir, { prefix: true, layers: layers ? [...new Set([...layers, 'nginx'])] : null });
    const r = checkNginx(pv);
    if (!r.ok) {
      const msg = r.output.split(dir).join('');
      throw new ConfigError(`nginx -t refuses the rendered config:\n${msg}`);
    }
    return r;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = {
  MANIFEST,
  prefixKeys,
  loadManifest,
  applies,
  prefixVars,
  renderAll,
  render,
  checkNginx,
  validate,
  writeAtomic,
};
