'use strict';
// HTTP/3 in the render: a quic listener beside the TLS one, the HTTP/3
// directives and an Alt-Svc header only when it is on, reuseport on the quic
// listen as asked, 0-RTT off unless asked (and then marked for the app); and
// each refusal naming the value and the fix, before anything is written.
const test = require('node:test');
const assert = require('node:assert/strict');
const config = require('../../lib/config');
const renderer = require('../../lib/render');
const { renderKubernetes } = require('../../lib/kubernetes');

const H3 = ['tunekit_nginx_version=1.26.3', 'tunekit_nginx_http3_module=true', 'tunekit_nginx_tls=true', 'tunekit_nginx_http3=true'];

function files(set) {
  const vars = config.resolve({ set });
  return Object.fromEntries(renderer.renderAll(vars).map((f) => [f.dest.replace(/^.*\/tunekit\//, ''), f.content]));
}

test('HTTP/3 off (the default): no quic listener, no HTTP/3 directive, no Alt-Svc; 0-RTT written off', () => {
  const f = files(['tunekit_nginx_version=1.26.3', 'tunekit_nginx_tls=true']);
  assert.doesNotMatch(f['site.conf'], /\bquic\b/);
  assert.doesNotMatch(f['tls.conf'], /^(http3|quic_retry|quic_gso|add_header Alt-Svc)/m);
  assert.match(f['tls.conf'], /^ssl_early_data off;$/m);
  assert.doesNotMatch(f['proxy.conf'], /Early-Data/);
});

test('HTTP/3 on: a quic listen on the TLS port with reuseport, the directives, and Alt-Svc naming that port', () => {
  const vars = config.resolve({ set: H3 });
  const f = files(H3);
  const port = vars.tunekit_nginx_tls_port;
  assert.match(f['site.conf'], new RegExp(`^ {4}listen ${port} ssl default_server backlog=\\d+ reuseport;$`, 'm'));
  assert.match(f['site.conf'], new RegExp(`^ {4}listen ${port} quic default_server reuseport;$`, 'm'));
  assert.match(f['tls.conf'], /^http3 on;$/m);
  assert.match(f['tls.conf'], /^quic_retry off;$/m);
  assert.match(f['tls.conf'], /^quic_gso off;$/m);
  assert.match(f['tls.conf'], new RegExp(`^http3_max_concurrent_streams ${vars.tunekit_nginx_http3_max_concurrent_streams};$`, 'm'));
  assert.match(f['tls.conf'], new RegExp(`^add_header Alt-Svc 'h3=":${port}"; ma=${vars.tunekit_nginx_http3_alt_svc_max_age}' always;$`, 'm'));
  // Another site has the port's reuseport: the kit's quic listen goes without.
  const shared = files([...H3, 'tunekit_nginx_http3_reuseport=false']);
  assert.match(shared['site.conf'], new RegExp(`^ {4}listen ${port} quic default_server;$`, 'm'));
});

test('0-RTT on: ssl_early_data on, and requests from early data reach the app marked Early-Data', () => {
  const f = files([...H3, 'tunekit_nginx_tls_early_data=true']);
  assert.match(f['tls.conf'], /^ssl_early_data on;$/m);
  assert.match(f['proxy.conf'], /^proxy_set_header Early-Data \$ssl_early_data;$/m);
});

test('HTTP/3 is refused by name without TLS, below nginx 1.25.0, and without (or not knowing of) the module', () => {
  const msg = (set) => {
    try {
      config.resolve({ set, check: true });
    } catch (err) {
      return err.message;
    }
    return '';
  };
  assert.match(msg(['tunekit_nginx_version=1.26.3', 'tunekit_nginx_http3_module=true', 'tunekit_nginx_http3=true']),
    /tunekit_nginx_http3=true needs tunekit_nginx_tls=true/);
  assert.match(msg(['tunekit_nginx_version=1.22.1', 'tunekit_nginx_tls=true', 'tunekit_nginx_http3=true']),
    /tunekit_nginx_http3=true needs nginx 1\.25\.0 or later, and tunekit_nginx_version=1\.22\.1/);
  assert.match(msg(['tunekit_nginx_version=1.26.3', 'tunekit_nginx_http3_module=false', 'tunekit_nginx_tls=true', 'tunekit_nginx_http3=true']),
    /needs an nginx built with ngx_http_v3_module, and tunekit_nginx_http3_module=false: `nginx -V` on the host does not list --with-http_v3_module/);
  assert.match(msg(['tunekit_nginx_version=1.26.3', 'tunekit_nginx_tls=true', 'tunekit_nginx_http3=true']),
    /tunekit_nginx_http3_module is unknown \(the files are not for the local nginx\)/);
  assert.equal(msg(H3), '');
});

test('the Kubernetes pod (plain HTTP behind its Service) refuses TLS and HTTP/3, saying where they belong', () => {
  assert.throws(() => renderKubernetes({ set: ['tunekit_nginx_tls=true'] }),
    /the pod's nginx serves plain HTTP on tunekit_k8s_container_port; tunekit_nginx_tls=true .*Terminate TLS \(and HTTP\/3, which needs a load balancer that passes UDP\) at the Ingress/);
});
