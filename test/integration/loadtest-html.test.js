'use strict';
// The HTML report renders offline in headless Chromium with its charts
// visible: a screenshot of the report has many coloured pixels (chart lines
// and bars; text is black or grey), a screenshot of a blank page has none.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { toHtml } = require('../../loadtest/html');
const { sampleBenchDoc } = require('../fixtures/loadtest/sample');
const png = require('../fixtures/loadtest/png');

const CHROMIUM = '/usr/bin/chromium';

function screenshot(htmlFile, outFile) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'lt-chromium-'));
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    `--user-data-dir=${profile}`, `--screenshot=${outFile}`, '--window-size=1200,1600', `file://${htmlFile}`];
  return new Promise((resolve, reject) => {
    const child = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 90000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      fs.rmSync(profile, { recursive: true, force: true });
      if (code === 0 && fs.existsSync(outFile)) resolve(png.ink(png.decode(fs.readFileSync(outFile))));
      else reject(new Error(`chromium exited ${code}: ${stderr.slice(-2000)}`));
    });
  });
}

test('the HTML report renders in headless Chromium with its charts visible',
  { skip: !fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed (apt-get install -y chromium)` }, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lt-html-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const report = path.join(dir, 'report.html');
    const blank = path.join(dir, 'blank.html');
    fs.writeFileSync(report, toHtml(sampleBenchDoc()));
    fs.writeFileSync(blank, '<!doctype html><html><body></body></html>');

    const empty = await screenshot(blank, path.join(dir, 'blank.png'));
    const full = await screenshot(report, path.join(dir, 'report.png'));
    t.diagnostic(`blank: ${JSON.stringify(empty)}, report: ${JSON.stringify(full)}`);
    assert.equal(empty.coloured, 0, 'a blank page has no coloured pixels');
    // Three bars of req/s and six of CPU are each >= 12 px tall and tens of px
    // wide; the curves add more. 20,000 coloured pixels is far below what
    // they cover and far above anything text could produce.
    assert.ok(full.coloured > 20000, `only ${full.coloured} coloured pixels: charts missing?`);
    assert.ok(full.dark > empty.dark + 50000, 'the page has content');
  });
