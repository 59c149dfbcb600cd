'use strict';
// A WebSocket server under the tunekit runner, closing its connections with 1001
// ("going away") when the runner drains the worker (SIGTERM, SIGHUP's rolling
// restart). Without that, the drain leaves the connection open until its timeout
// and then cuts it: the client sees 1006 (closed abnormally) instead of a close frame.
//
//   npm install ws
//   npx tunekit run examples/websocket.js --listen unix:/tmp/ws.sock
//
// A factory (no parameters): the runner calls it and listens with the server it
// returns; ws answers the upgrades on it. Every message is echoed back.

const http = require('node:http');
const { WebSocketServer } = require('ws');

module.exports = function createServer() {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ok: true, pid: process.pid, websocket: 'connect with Upgrade: websocket' }));
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => {
    ws.send(JSON.stringify({ hello: process.pid }));
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  // The runner's drain: close every connection with a close frame; the worker
  // exits once they are closed, long before its drain timeout.
  process.once('tunekit:drain', () => {
    for (const ws of wss.clients) ws.close(1001, 'server restarting');
  });
  return server;
};
