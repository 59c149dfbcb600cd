'use strict';
// Preloaded into every PM2 cluster worker (ecosystem.config.js: node_args
// --require). PM2's daemon runs with umask 0117 so the Unix socket it binds for
// the workers is 0660 from birth (app/pm2/README.md); the workers inherit that
// umask, which would make every directory the app creates 0660 — without the
// search bit, so not even its owner could use it. Give the app the umask the
// systemd unit gives it instead: files 0660, directories 0770.
process.umask(0o007);
