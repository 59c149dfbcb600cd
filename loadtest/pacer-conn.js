'use strict';
// One keep-alive HTTP/1.1 connection for the pacer: a fixed GET written with
// one write, the response read with a minimal parser (status line,
// Content-Length or chunked, Connection: close). Far less CPU per request
// than node:http's ClientRequest (~3× here), so the generator's own cost
// stays small next to the server's. One request in flight at a time.

const net = require('node:net');

const HEADER_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = Buffer.from('0\r\n\r\n');
// Pause before reconnecting after a failed request or connect.
const RETRY_MS = 50;

class PacerConn {
  // target: { host, port } or { socketPath }; request: Buffer;
  // onDone(conn, { status, body, closeAfter }) / onFail(conn, err).
  constructor(target, request, onDone, onFail) {
    this.target = target;
    this.request = request;
    this.onDone = onDone;
    this.onFail = onFail;
    this.job = null;
    this.ready = false;
    this.closed = false;
    this.retry = null;
    this.connect();
  }

  connect() {
    this.ready = false;
    this.buf = null;
    const s = this.target.socketPath ? net.connect(this.target.socketPath) : net.connect(this.target.port, this.target.host);
    this.socket = s;
    s.setNoDelay(true);
    s.on('connect', () => {
      this.ready = true;
      if (this.job) s.write(this.request);
    });
    s.on('data', (d) => this.onData(d));
    s.on('error', (err) => this.fail(err));
    s.on('close', () => {
      if (this.socket !== s) return;
      this.ready = false;
      // Closed by the peer: fail what was in flight, then open a new one.
      if (this.job) this.fail(new Error('connection closed before the response'));
      else this.reconnect(RETRY_MS);
    });
  }

  // Send one request (the caller checks `idle`).
  send(job) {
    this.job = job;
    job.sentNs = process.hrtime.bigint();
    if (this.ready) this.socket.write(this.request);
    // else: written on 'connect' (a reconnect is under way)
  }

  get idle() {
    return !this.job && !this.closed;
  }

  onData(d) {
    this.buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    const end = this.buf.indexOf(HEADER_END);
    if (end === -1) return;
    const head = this.buf.toString('latin1', 0, end);
    const status = Number(head.slice(9, 12));
    const lower = head.toLowerCase();
    const cl = /\r\ncontent-length:\s*(\d+)/.exec(lower);
    let bodyEnd;
    if (cl) {
      bodyEnd = end + 4 + Number(cl[1]);
      if (this.buf.length < bodyEnd) return;
    } else if (/\r\ntransfer-encoding:\s*chunked/.test(lower)) {
      const z = this.buf.indexOf(CHUNKED_END, end + 4);
      if (z === -1) return;
      bodyEnd = z + CHUNKED_END.length;
    } else {
      this.fail(new Error('response has neither Content-Length nor chunked encoding'));
      return;
    }
    const body = this.buf.subarray(end + 4, bodyEnd);
    const closeAfter = /\r\nconnection:\s*close/.test(lower);
    this.buf = this.buf.length > bodyEnd ? this.buf.subarray(bodyEnd) : null;
    const job = this.job;
    this.job = null;
    if (closeAfter) this.reconnect(0);
    this.onDone(this, job, { status, body });
  }

  // Drop the socket and open a new one, at once or after a pause (after a
  // failure, so a refusing server is not hammered in a loop).
  reconnect(delayMs) {
    const old = this.socket;
    old.removeAllListeners('close');
    old.removeAllListeners('error');
    old.on('error', () => {});
    old.destroy();
    this.ready = false;
    if (this.closed || this.retry) return;
    if (delayMs > 0) {
      this.retry = setTimeout(() => {
        this.retry = null;
        if (!this.closed) this.connect();
      }, delayMs);
    } else {
      this.connect();
    }
  }

  fail(err) {
    const job = this.job;
    this.job = null;
    this.reconnect(RETRY_MS);
    if (job) this.onFail(this, job, err);
  }

  // A request in flight for longer than the timeout: drop the connection.
  timeout() {
    const job = this.job;
    this.job = null;
    this.reconnect(0);
    return job;
  }

  close() {
    this.closed = true;
    clearTimeout(this.retry);
    this.socket.removeAllListeners('close');
    this.socket.on('error', () => {});
    this.socket.destroy();
  }
}

module.exports = { PacerConn };
