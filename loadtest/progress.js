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
      current = { label, seconds, started: Date.now(), rate: null };
      if (tty) {
        draw();
        timer = setInterval(draw, 250);
        timer.unref();
      } else {
        stream.write(`${label} (${seconds} s)\n`);
      }
    },
    // Responses so far, all generators together (the drivers report about
    // once a second). A driver with several processes passes its own `rate`
    // (each process on its own clock); otherwise the bar shows the mean
    // rate since the start.
    update(responses, rate = null) {
      if (!current || responses == null) return;
      const elapsedMs = Date.now() - current.started;
      if (rate != null) current.rate = rate;
      else if (elapsedMs > 0) current.rate = (responses * 1000) / elapsedMs;
    },
    // The rate the bar shows now (req/s), or null before the first report.
    rate() {
      return current ? current.rate : null;
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
