'use strict';
// A real Prometheus (Debian's `prometheus` package) for a test: started on
// 127.0.0.1 on a free port with its own storage in a temp dir and a config this
// writes (scrape_interval and evaluation_interval 1s, the rule files it is given),
// stopped by its pid when the test ends (also when it fails). Queries go through
// its HTTP API.
//
//   const prom = await startPrometheus(t, { jobs: { tunekit_app: ['127.0.0.1:9464'] } });
//   await prom.scrapedAfter('tunekit_app', Date.now());   // a successful scrape that began after then
//   const rows = await prom.query('sum by (connection) (tunekit_app_requests_total)');
//
// https://prometheus.io/docs/prometheus/latest/querying/api/

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn } = require('node:child_process');
const { freePort } = require('../../lib/proc');
const { until } = require('./util');

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';

function get(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`${url}: HTTP ${res.statusCode} ${body.slice(0, 300)}`));
        else resolve(body);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer within 5 s`)));
    req.on('error', reject);
  });
}

function writeConfig(dir, jobs, rules) {
  const lines = ['global:', '  scrape_interval: 1s', '  scrape_timeout: 1s', '  evaluation_interval: 1s'];
  if (rules.length) lines.push('rule_files:', ...rules.map((f) => `  - '${f}'`));
  lines.push('scrape_configs:');
  for (const [job, targets] of Object.entries(jobs)) {
    lines.push(`  - job_name: ${job}`, '    static_configs:', `      - targets: [${targets.map((x) => `'${x}'`).join(', ')}]`);
  }
  const file = path.join(dir, 'prometheus.yml');
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Start Prometheus scraping `jobs` ({ job: ['host:port', ...] }) with `rules` (rule files); stopped in t.after. */
async function startPrometheus(t, { jobs, rules = [] }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tunekit-prometheus-'));
  const port = await freePort();
  const log = path.join(dir, 'prometheus.log');
  const out = fs.openSync(log, 'a');
  const child = spawn(PROMETHEUS, [
    `--config.file=${writeConfig(dir, jobs, rules)}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, 'SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10000).unref())]);
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const base = `http://127.0.0.1:${port}`;
  await until(`Prometheus ready on ${base} (log: ${log})`, async () => {
    if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}: ${fs.readFileSync(log, 'utf8').slice(-600)}`);
    return get(`${base}/-/ready`).then(() => true);
  }, 60000, 200);

  /** GET an API path (`/api/v1/alerts`): its data. */
  const api = async (p) => JSON.parse(await get(`${base}${p}`)).data;
  const query = async (expr) => {
    const r = JSON.parse(await get(`${base}/api/v1/query?query=${encodeURIComponent(expr)}`));
    return r.data.result.map((row) => ({ labels: row.metric, value: Number(row.value[1]) }));
  };
  /** Waits for a successful scrape of `job` that began at or after `sinceMs`. */
  const scrapedAfter = (job, sinceMs, timeoutMs = 60000) => until(`a scrape of ${job} after ${new Date(sinceMs).toISOString()}`, async () => {
    const rows = await query(`timestamp(up{job="${job}"} == 1)`);
    return rows.length > 0 && rows.every((row) => row.value * 1000 >= sinceMs);
  }, timeoutMs, 200);
  return { url: base, pid: child.pid, api, query, scrapedAfter, log };
}

module.exports = { startPrometheus, PROMETHEUS, PROMTOOL };
