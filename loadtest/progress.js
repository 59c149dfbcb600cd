'use strict';
// Progress on stderr while a run goes: a bar redrawn in place when stderr is a
// terminal, one plain line per measurement otherwise (CI logs, pipes).

function createProgress({ stream = process.stderr, enabled = true } = {}) {
  const tty = Boolean(stream.isTTY);
  let current = null;
  let timer = null;

  const draw = () => {
    if (!current) return;
    const elapsed = (Date.now() - current.started) / 1000;
    const frac = Math.min(1, elapsed / current.seconds);
    const width = 24;
    const done = Math.round(frac * width);
    const rate = current.rate != null ? `  ${Math.round(current.rate).toLocaleString('en-US')} req/s` : '';
    stream.write(`\r\x1b[K[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${String(Math.round(frac * 100)).padStart(3)}%  ${current.label}${rate}`);
  };

  return {
    start(label, seconds) {
      if (!enabled) return;
      current = { label, seconds, started: Date.now(), responses: null, at: null, rate: null };
      if (tty) {
        draw();
        timer = setInterval(draw, 250);
        timer.unref();
      } else {
        stream.write(`${label} (${seconds} s)\n`);
      }
    },
    // Responses so far (reported about once a second by the drivers); the
    // bar shows the rate since the previous report.
    update(responses) {
      if (!current || responses == null) return;
      const now = Date.now();
      if (current.at !== null && now > current.at && responses >= current.responses) {
        current.rate = ((responses - current.responses) * 1000) / (now - current.at);
      }
      current.responses = responses;
      current.at = now;
    },
    done() {
      if (!enabled || !current) return;
      clearInterval(timer);
      if (tty) stream.write('\r\x1b[K');
      current = null;
    },
    note(text) {
      if (!enabled) return;
      if (tty && current) stream.write('\r\x1b[K');
      stream.write(`${text}\n`);
    },
  };
}

module.exports = { createProgress };
