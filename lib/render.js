'use strict';
// Render the kit's templates into a host tree: every entry of the manifest
// (roles/tunekit/vars/main.yml, `tunekit_templates`, the same
// list the Ansible roles read) becomes OUT/<dest>.
//
// All templates are rendered into memory first; files are written only when every
// one rendered, and then all or nothing (lib/files.js writeTree): the tree is
// written into a staging directory on OUT's file system and each file renamed
// into place, so a reader never sees a half-written file, and a render that fails
// on the way (a path it cannot write, a file where a directory goes) leaves OUT
// as it was, files already there kept, and says which path and why in one line.
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
const apps = require('./config/apps');
const { readDefinition } = require('./config/definition');
const { ConfigError } = require('./errors');
const { nginxBinary } = require('./nginx');
const { writeTree, reason } = require('./files');
const accounts = require('./accounts');
const tls = require('./tls');

const MANIFEST = 'roles/tunekit/vars/main.yml';

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
 * Refuse a host path that is not absolute (nginx, systemd and the runner do not
 * run in the directory it was typed in, and the runner refuses a relative socket).
 * Every render runs it before anything is written.
 */
function requireAbsolutePaths(vars) {
  for (const key of prefixKeys()) {
    const value = vars[key];
    if (typeof value === 'string' && value && !path.isAbsolute(value)) {
      throw new ConfigError(`${key}=${value} must be an absolute path (nginx, systemd and the runner do not run in this directory); give one that starts with /`);
    }
  }
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
  requireAbsolutePaths(vars);
  for (const key of prefixKeys()) {
    const value = vars[key];
    if (typeof value === 'string' && value) out[key] = path.join(root, value);
  }
  // A prefixed tree is self-contained: nothing of the host's nginx is included.
  out.tunekit_nginx_host_mode = 'dedicated';
  const me = os.userInfo();
  const group = accounts.groupName(me.gid);
  out.tunekit_nginx_user = nginxUser || me.username;
  out.tunekit_app_user = me.username;
  out.tunekit_app_group = group;
  out.tunekit_socket_group = nginxUser ? primaryGroup(nginxUser) : group;
  if (vars.tunekit_apps_resolved) {
    // Each app's set is prefixed the same way; the host-wide set stands for no app.
    out.tunekit_apps_resolved = vars.tunekit_apps_resolved.map((a) => prefixVars(a, dir, { nginxUser }));
    return out;
  }
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
 * that signed it (ca.pem, next to the certificate) are made there. at(path):
 * where a path of the tree is written (its staging directory).
 */
function throwawayCertificate(vars, algorithm, at) {
  const cert = vars.tunekit_nginx_tls_certificate;
  const key = vars.tunekit_nginx_tls_certificate_key;
  if (fs.existsSync(cert) && fs.existsSync(key)) return;
  const dir = at(path.dirname(cert));
  tls.makeLeaf(dir, tls.makeCA(dir), { cert: at(cert), key: at(key) }, { algorithm });
}

/**
 * Render the manifest into memory.
 * @param {object} vars  resolved values (lib/config resolve())
 * @param {object} [opts]
 * @param {object} [opts.contentVars=vars]  values the file contents are rendered with
 * @param {string[]} [opts.layers]  only these layers (nginx, app, systemd, sysctl, pm2)
 * @param {object[]} [opts.manifest]  entries to render instead of the manifest file's
 * @param {string|null} [opts.only]  of the per-app files (scope app), only this app's
 * @returns {{dest: string, src: string, layer: string, mode: number, content: string, app?: string}[]}
 */
function renderAll(vars, { contentVars = vars, layers = null, manifest = null, only = null } = {}) {
  if (only) apps.requireApp(vars, only);
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
    const mode = parseInt(String(entry.mode || '0644'), 8);
    if (entry.scope === 'app') {
      // Once per app: its own dest and content (tunekit_apps).
      const destSets = apps.appSets(vars);
      apps.appSets(contentVars).forEach((set, i) => {
        if (only && destSets[i].tunekit_app_name !== only) return;
        out.push({ dest: destOf(env, entry, destSets[i]), src: entry.src, layer: entry.layer, mode, content: renderOne(env, entry.src, set), app: destSets[i].tunekit_app_name });
      });
      continue;
    }
    // One file: once for the host, or each app's block (apps) or site (sites) in turn.
    const sets = entry.scope === 'apps' ? apps.appSets(contentVars) : entry.scope === 'sites' ? apps.siteSets(contentVars) : [contentVars];
    const content = sets.map((set) => renderOne(env, entry.src, set)).join('\n');
    out.push({ dest: destOf(env, entry, vars), src: entry.src, layer: entry.layer, mode, content });
  }
  if (missing.length) {
    throw new ConfigError(
      `templates listed in ${MANIFEST} do not exist: ${missing.join(', ')}. ` +
        'Restore them, or render only the layers you need (--layer nginx --layer app).',
    );
  }
  return out;
}

function destOf(env, entry, vars) {
  let dest;
  try {
    dest = env.renderString(String(entry.dest), vars);
  } catch (err) {
    throw templateError(`the dest of ${entry.src}`, err);
  }
  if (!path.isAbsolute(dest) || path.normalize(dest) !== dest) {
    throw new ConfigError(`${entry.src} renders to "${dest}", which is not a clean absolute path; check the variables in its dest (${entry.dest})`);
  }
  return dest;
}

function renderOne(env, src, vars) {
  try {
    return env.render(src, vars);
  } catch (err) {
    throw templateError(src, err);
  }
}

/** Write one file of a tree being built (writeTree's staging directory), its mode as given. */
function writeFile(file, content, mode) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content, { mode });
  fs.chmodSync(file, mode);
}

/**
 * Write files [{dest, content, mode}] under outDir (dest: a host path, "/etc/x"),
 * all or nothing (lib/files.js writeTree, whose guarantee this is).
 * @param {object} [opts]  writeTree's: what (how the user named outDir), asRoot
 * @returns {string[]} the files written, absolute
 */
function writeFiles(outDir, files, opts = {}) {
  const root = path.resolve(outDir);
  writeTree(root, (stage) => {
    for (const f of files) writeFile(path.join(stage, f.dest), f.content, f.mode);
  }, opts);
  return files.map((f) => path.join(root, f.dest));
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
 * @param {string|null} [opts.only]  of the per-app files, only this app's (tunekit_apps)
 * @param {string} [opts.what]  how the user named outDir, for messages ("--out /x")
 * @param {string} [opts.asRoot]  the command line as root, offered when outDir is not writable
 * @returns {{files: string[], dirs: string[], vars: object}} absolute paths written, the values used
 */
function render(vars, outDir, { prefix = false, layers = null, manifest = null, throwawayKey = 'ec', nginxUser = null, only = null, what, asRoot } = {}) {
  const root = path.resolve(outDir);
  if (!prefix) for (const set of apps.appSets(vars)) requireAbsolutePaths(set); // prefixVars checks them too
  const contentVars = prefix ? prefixVars(vars, root, { nginxUser }) : vars;
  const rendered = renderAll(vars, { contentVars, layers, manifest, only });
  // A prefixed tree's directories: the runtime ones, the ACME webroot with TLS, and
  // the socket's, searchable by the socket group only (0750), as systemd's
  // RuntimeDirectory makes it on a host. All under root (their keys say Prefix: yes).
  const dirs = !prefix ? [] : [
    ...runtimeDirs(contentVars).map((dir) => ({ dir })),
    ...(contentVars.tunekit_nginx_tls ? [{ dir: contentVars.tunekit_nginx_acme_webroot }] : []),
    ...[...new Set(apps.appSets(contentVars).map((a) => a.tunekit_socket_dir))].map((dir) => ({ dir, mode: 0o750 })),
  ];
  writeTree(root, (stage) => {
    const at = (p) => {
      const rel = path.relative(root, p);
      if (rel.startsWith('..') || path.isAbsolute(rel)) throw new Error(`${p} is outside the prefixed tree ${root}: its variable needs "# Prefix: yes"`);
      return path.join(stage, rel);
    };
    for (const r of rendered) writeFile(path.join(stage, r.dest), r.content, r.mode);
    for (const d of dirs) fs.mkdirSync(at(d.dir), { recursive: true, ...(d.mode ? { mode: d.mode } : {}) });
    if (prefix && contentVars.tunekit_nginx_tls) throwawayCertificate(contentVars, throwawayKey, at);
  }, { what, asRoot });
  return {
    files: rendered.map((r) => path.join(root, r.dest)),
    dirs: dirs.map((d) => d.dir),
    vars: contentVars,
    rendered: rendered.map(({ dest, src, layer, app }) => ({ dest, src, layer, ...(app ? { app } : {}) })),
  };
}

/**
 * The commands that give each app's settings to its group once copied: cp makes
 * root the group of what it copies, and the unit's user reads app.json (mode
 * 0640, its folder 0750) through the app's group, as the Ansible role installs
 * it; without them the runner stops (EACCES on app.json, measured on Debian 13).
 */
function settingsGroupCommands(vars, rendered) {
  const sets = apps.appSets(vars).filter((a) => rendered.some((r) => r.dest === a.tunekit_app_config_path));
  return [...new Set(sets.map((a) => {
    const dir = path.dirname(a.tunekit_app_config_path);
    return `chgrp -R ${a.tunekit_app_group} ${dir} && chmod 0750 ${dir}`;
  }))];
}

/**
 * What to do with a rendered host tree, step by step, as root on the host: derived
 * from the files that were rendered (`render().rendered`) and the values, so a
 * layer left out or a setting changed changes the steps.
 * @param {object} vars  the values it was rendered with
 * @param {{dest: string, src: string, layer: string}[]} rendered
 * @param {object} o
 * @param {string} o.outDir  where the tree is
 * @param {string} o.kit     how to run the kit's CLI from here (e.g. "node bin/tunekit.js")
 * @returns {string[]} one step each (continuation lines indented by 3)
 */
function installSteps(vars, rendered, { outDir, kit }) {
  const has = (pred) => rendered.some(pred);
  const bySrc = (src) => rendered.find((r) => r.src === src);
  const nginx = has((r) => r.layer === 'nginx');
  const unit = bySrc('systemd/app.service.j2');
  const socketUnit = bySrc('systemd/app.socket.j2');
  const pm2 = bySrc('app/pm2/ecosystem.config.js.j2');
  const nginxDropIn = bySrc('systemd/nginx-limits.conf.j2');
  const sysctlFile = bySrc('sysctl/sysctl.conf.j2');
  // The apps whose files were rendered (all, or the one of --app): one is told as the one app of a host is.
  const appList = apps.appSets(vars).filter((a) => !unit || rendered.some((r) => r.src === unit.src && r.app === a.tunekit_app_name));
  if (appList.length === 1) vars = appList[0];
  const user = vars.tunekit_app_user;
  const group = vars.tunekit_socket_group;
  const uds = vars.tunekit_upstream_kind !== 'tcp';
  const steps = [];

  const accounts = [];
  if (unit || pm2) {
    accounts.push(`getent group ${group} >/dev/null || groupadd --system ${group}`);
    if (vars.tunekit_app_group !== group) accounts.push(`getent group ${vars.tunekit_app_group} >/dev/null || groupadd --system ${vars.tunekit_app_group}`);
    accounts.push(`id -u ${user} >/dev/null 2>&1 || useradd --system --gid ${vars.tunekit_app_group} --no-create-home --shell /usr/sbin/nologin ${user}`);
  }
  if (nginx && uds) accounts.push(`usermod -aG ${group} ${vars.tunekit_nginx_user}`);
  if (accounts.length) {
    const why = nginx && uds ? `; nginx's user ${vars.tunekit_nginx_user} joins the socket group ${group} to reach the socket` : '';
    steps.push(`Create the app's user ${user} and its group${why}:\n${accounts.map((c) => `     ${c}`).join('\n')}`);
  }
  if (appList.length > 1 && unit) {
    const dirs = appList.map((a) => a.tunekit_app_install_dir);
    steps.push(`Put the runner (the kit's app/ folder, node: built-ins only) in each app's directory; each app's unit starts ${vars.tunekit_node_bin} DIR/app/cluster.js:\n` +
      `${dirs.map((d) => `     mkdir -p ${d} && cp -r ${path.join(ROOT, 'app')} ${d}/`).join('\n')}\n   ` +
      `Each serves its tunekit_app_module (the kit's example app when unset): ${appList.map((a) => `${a.tunekit_app_name} ${a.tunekit_app_module || 'example'}`).join(', ')}.`);
  } else if (unit || pm2) {
    const runner = `${vars.tunekit_app_install_dir}/app`;
    const app = vars.tunekit_app_module
      ? `It serves ${vars.tunekit_app_module}: the user ${user} must be able to read it (and its node_modules).`
      : `It serves the kit's example app; to serve yours, render again with --set tunekit_app_module=/srv/myapp/app.js (a path ${user} can read).`;
    const starts = unit ? `the unit starts ${vars.tunekit_node_bin} ${runner}/cluster.js` : 'PM2 runs ecosystem.config.js from there';
    steps.push(`Put the runner (the kit's app/ folder, node: built-ins only) where ${starts}:\n` +
      `     mkdir -p ${vars.tunekit_app_install_dir} && cp -r ${path.join(ROOT, 'app')} ${vars.tunekit_app_install_dir}/\n   ${app}`);
  }
  if (vars.tunekit_nginx_tls && nginx) {
    steps.push(`Put the certificate and key where nginx reads them: ${vars.tunekit_nginx_tls_certificate} and ${vars.tunekit_nginx_tls_certificate_key} ` +
      `(e.g. certbot certonly --webroot -w ${vars.tunekit_nginx_acme_webroot} -d ${vars.tunekit_nginx_server_name}).`);
  }
  const tops = [...new Set(rendered.map((r) => r.dest.split('/')[1]))].sort();
  const keep = nginx ? 'Keep a copy of /etc/nginx/nginx.conf, then copy' : 'Copy';
  const settings = settingsGroupCommands(vars, rendered);
  steps.push(`${keep} the files to their places${settings.length ? ', the app\'s settings readable by its group' : ''}:\n` +
    `${[...tops.map((d) => `cp -r ${path.join(outDir, d)}/. /${d}/`), ...settings].map((c) => `     ${c}`).join('\n')}`);
  if (nginx && vars.tunekit_nginx_host_mode === 'shared' && vars.tunekit_nginx_default_server) {
    steps.push('The kit\'s site is the default server on :80; if Debian\'s welcome site is enabled, disable it (its link only):\n' +
      '     rm -f /etc/nginx/sites-enabled/default');
  }
  if (sysctlFile) {
    steps.push(`Apply the kernel settings without lowering a live value (--dry-run first shows what would change):\n     ${kit} sysctl apply ${sysctlFile.dest}`);
  }
  const units = [unit, socketUnit, nginxDropIn, bySrc('app/pm2/pm2-service.conf.j2')].filter(Boolean);
  if (units.length) {
    const start = appList.map((a) => (socketUnit ? `${a.tunekit_app_name}.socket ${a.tunekit_app_name}.service` : a.tunekit_app_name)).join(' ');
    const cmds = ['systemctl daemon-reload'];
    if (unit) cmds.push(`systemctl enable --now ${start}`);
    steps.push(`Load the systemd units${unit ? ' and start the app' : ''}:\n     ${cmds.join(' && ')}`);
  }
  if (pm2) {
    steps.push(`As ${user}, start the app under PM2 and save the list, then restart PM2's unit (app/pm2/README.md):\n` +
      `     pm2 start ${pm2.dest} && pm2 save\n     systemctl restart pm2-${user}`);
  }
  if (nginx) {
    steps.push(nginxDropIn
      ? 'Check nginx\'s config and restart it (a restart, the first time: the LimitNOFILE drop-in applies to a new master; later changes need only nginx -t && systemctl reload nginx):\n     nginx -t && systemctl restart nginx'
      : 'Check nginx\'s config and reload it:\n     nginx -t && systemctl reload nginx');
  }
  if (nginx) {
    const port = vars.tunekit_nginx_listen_port === 80 ? '' : `:${vars.tunekit_nginx_listen_port}`;
    // Over HTTPS, by the certificate's name (127.0.0.1 is not in it).
    const url = vars.tunekit_nginx_tls ? `https://${vars.tunekit_nginx_server_name === '_' ? 'YOUR-NAME' : vars.tunekit_nginx_server_name}/` : `http://127.0.0.1${port}/`;
    steps.push(`Check the result: curl -s ${url} answers through nginx; ${kit} doctor audits every layer ` +
      `${require('./kit').onTheHost()}.`);
  }
  return steps;
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
  let dir;
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-check-'));
  } catch (err) {
    throw new ConfigError(`--check renders a copy in ${os.tmpdir()} first and cannot write there (${reason(err)}); set TMPDIR to a directory you can write`);
  }
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
  requireAbsolutePaths,
  installSteps,
  loadManifest,
  applies,
  prefixVars,
  renderAll,
  render,
  checkNginx,
  validate,
  writeFiles,
};
