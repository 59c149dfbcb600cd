'use strict';
// `tunekit render --target kubernetes`: the stack as one pod (nginx and the
// cluster runner sharing a Unix socket on an emptyDir), a Service and the
// ConfigMaps, from the same definition as the hosts.
//
// The pod's nginx files and app.json are the host templates (the manifest of
// lib/render.js), rendered with the pod's paths, port and worker counts
// (podOverrides: the `# Pod:` lines of the definition); the Kubernetes objects
// are the templates listed in kubernetes/templates.yml. Everything is rendered
// in memory before a file is written, then all or nothing (lib/render.js writeFiles).

const crypto = require('node:crypto');
const apps = require('./config/apps');
const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');
const config = require('./config');
const types = require('./config/types');
const { readDefinition, yamlScalar } = require('./config/definition');
const { createEnv, ROOT } = require('./template');
const renderer = require('./render');

const LIST = 'kubernetes/templates.yml';

/** [{src, dest}] from kubernetes/templates.yml. */
function loadList() {
  const doc = YAML.parse(fs.readFileSync(path.join(ROOT, LIST), 'utf8'));
  const list = doc && doc.tunekit_kubernetes_templates;
  if (!Array.isArray(list)) throw new config.ConfigError(`${LIST} has no tunekit_kubernetes_templates list`);
  return list;
}

/**
 * The host tunables the pod sets from its own (tunekit_k8s_*): paths into the
 * pod's volumes, nginx on the container port, logs to the container's
 * stdout/stderr, worker counts from the CPU limits, the socket's group the fsGroup.
 * Each is the `# Pod:` line of the variable in the definition, its Jinja
 * rendered against v (the values resolved before the pod's are applied). A
 * rendered text stays text where the variable's type takes text (a group id
 * as a group name), else it is read as YAML (a port, a worker count).
 */
function podOverrides(v) {
  const env = createEnv();
  const typeOf = types.readTypes(config.defaultFiles());
  const out = {};
  for (const d of readDefinition().filter((x) => x.pod !== null)) {
    const value = yamlScalar(d.pod);
    if (typeof value !== 'string' || !value.includes('{{')) {
      out[d.key] = value;
      continue;
    }
    const text = env.renderString(value, v);
    out[d.key] = types.mismatch(text, typeOf[d.key]) === null ? text : yamlScalar(text, `${d.key}'s # Pod: ${d.pod}`);
  }
  return out;
}

/** ConfigMap entries ({key, content}) from rendered host files, keyed by file name. */
function configFiles(rendered) {
  return rendered.map((r) => ({ key: path.basename(r.dest), content: r.content }));
}

/**
 * Resolve the definition for the pod and render every Kubernetes manifest in memory.
 * @param {object} opts  as lib/config resolve(): varsFiles, set, overrides
 * @returns {{files: {dest: string, content: string}[], vars: object}}
 */
function renderKubernetes({ varsFiles = [], set = [], overrides = {} } = {}) {
  // Several apps share no host in Kubernetes: each is a pod of its own, checked alone.
  const probe = config.resolve({ varsFiles, set, overrides, check: false });
  if (Array.isArray(probe.tunekit_apps) && probe.tunekit_apps.length) return renderEachApp(probe, { varsFiles, set, overrides });
  const first = config.resolve({ varsFiles, set, overrides });
  if (first.tunekit_upstream_kind === 'tcp' || first.tunekit_profile === 'stock') {
    throw new config.ConfigError('the pod shares a Unix socket between nginx and the app; ' +
      `tunekit_upstream_kind=${first.tunekit_upstream_kind} with tunekit_profile=${first.tunekit_profile} listens on TCP. ` +
      'Use tunekit_upstream_kind=uds (or per-worker) and the tuned profile');
  }
  if (first.tunekit_nginx_tls || first.tunekit_nginx_http3) {
    throw new config.ConfigError(`the pod's nginx serves plain HTTP on tunekit_k8s_container_port; tunekit_nginx_tls=${first.tunekit_nginx_tls}` +
      ` and tunekit_nginx_http3=${first.tunekit_nginx_http3} need a certificate the pod does not have. Terminate TLS (and HTTP/3,` +
      ' which needs a load balancer that passes UDP) at the Ingress or load balancer in front of the Service, and render the pod with both off');
  }
  const vars = config.resolve({ varsFiles, set, overrides: { ...overrides, ...podOverrides(first) } });
  const nginxFiles = configFiles(renderer.renderAll(vars, { layers: ['nginx'] }));
  const appFiles = configFiles(renderer.renderAll(vars, { layers: ['app'] }));
  const dest = new Set(nginxFiles.map((f) => f.key));
  if (dest.size !== nginxFiles.length) {
    throw new config.ConfigError('two nginx files have the same name; the pod mounts them in one directory');
  }
  const checksum = crypto.createHash('sha256');
  for (const f of [...nginxFiles, ...appFiles]) checksum.update(`${f.key}\0${f.content}\0`);
  const context = {
    ...vars,
    tunekit_k8s_nginx_files: nginxFiles,
    tunekit_k8s_app_files: appFiles,
    tunekit_k8s_config_checksum: checksum.digest('hex'),
  };
  const env = createEnv();
  const files = loadList().map((e) => {
    try {
      return { dest: e.dest, content: env.render(e.src, context) };
    } catch (err) {
      throw new config.ConfigError(`cannot render ${e.src}: ${String(err.message).replace(/\s+/g, ' ')}`);
    }
  });
  return { files, vars };
}

/**
 * Several apps (tunekit_apps): one pod per app, each rendered as the one app of
 * its own pod (the entry's values over the host-wide ones; the pod's CPU decides
 * its workers), its manifests under DIR/NAME/ and named after it (tunekit_k8s_name).
 */
function renderEachApp(host, { varsFiles, set, overrides }) {
  const files = [];
  const vars = [];
  for (const entry of host.tunekit_apps) {
    const one = renderKubernetes({ varsFiles, set, overrides: { ...overrides, ...apps.ownValues(entry), tunekit_apps: [] } });
    for (const f of one.files) files.push({ dest: path.join(String(entry.name), f.dest), content: f.content });
    vars.push(one.vars);
  }
  return { files, vars: vars[0], apps: vars };
}

/**
 * Render and write the manifests under outDir, all or nothing (lib/render.js writeFiles).
 * @param {object} [opts]  renderKubernetes's, and writeFiles's what and asRoot
 * @returns {{files: string[], vars: object}}
 */
function writeKubernetes(outDir, { what, asRoot, ...opts } = {}) {
  const { files, vars } = renderKubernetes(opts);
  const written = renderer.writeFiles(outDir, files.map((f) => ({ dest: f.dest, content: f.content, mode: 0o644 })), { what, asRoot });
  return { files: written, vars };
}

module.exports = { LIST, loadList, podOverrides, renderKubernetes, writeKubernetes };
