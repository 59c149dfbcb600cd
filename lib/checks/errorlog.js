'use strict';
// doctor's checks of what nginx's error log says it ran out of in the last
// hours: worker connections, the open-files limit it could not raise, file
// descriptors (no live check can see a past peak).

const { ERROR_LOG_HOURS } = require('../live/nginx');
const { workersCapped } = require('./listen');

// What nginx's error log says it ran out of (no live check can see a past peak).
const alert = (facts, id) => facts.nginx && facts.nginx.alerts && facts.nginx.alerts[id];

function workerConnectionsAlert(facts) {
  const a = alert(facts, 'worker-connections');
  const wc = a && facts.nginx.workerConnections;
  return a ? [{ id: 'worker-connections', level: 'fail',
    what: `nginx ran out of connections ${a.count} time(s) in the last ${ERROR_LOG_HOURS} h: "${a.last}"; each worker holds a client connection and an upstream one per proxied request, so worker_connections ${wc} serve about ${Math.floor(wc / 2)} requests at once; past that nginx closes idle keep-alive connections, then stops accepting: new clients wait in the listen queue or are closed unanswered`,
    fix: 'raise worker_connections (tunekit_nginx_worker_connections; ansible/profiles/large.yml has 16384), and worker_rlimit_nofile with it (the kit derives 2x)' }] : [];
}

// While the workers are held at the master's hard limit, the rule nginx-limit-nofile reports this alert with its cause.
function nginxRlimitAlert(facts) {
  const a = !workersCapped(facts) && alert(facts, 'nginx-rlimit');
  return a ? [{ id: 'nginx-rlimit', level: 'warn', what: `nginx could not raise its open-files limit (${a.count} time(s) in the last ${ERROR_LOG_HOURS} h): "${a.last}"; its workers run with the limit they inherited`,
    fix: 'raise the hard limit nginx starts with: LimitNOFILE= in nginx.service (the kit renders a drop-in that covers worker_rlimit_nofile)' }] : [];
}

function nginxEmfileAlert(facts) {
  const a = alert(facts, 'nginx-emfile');
  return a ? [{ id: 'nginx-emfile', level: 'fail', what: `nginx ran out of file descriptors ${a.count} time(s) in the last ${ERROR_LOG_HOURS} h: "${a.last}"`,
    fix: 'raise worker_rlimit_nofile (the kit derives 2 x worker_connections) and nginx.service\'s LimitNOFILE' }] : [];
}

module.exports = { workerConnectionsAlert, nginxRlimitAlert, nginxEmfileAlert };
