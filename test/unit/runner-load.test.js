'use strict';
// app/load.js: every module shape Node loads becomes the server the worker listens
// with, and the framework objects it does not start itself are refused with the
// factory to export instead. Each shape is a small module written to a temp dir,
// loaded as the worker loads it, and asked one request on a loopback port.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { loadApp } = require('../../app/load');

function fixtures(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tkr-load-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return (name, text) => {
    const file = path.join(dir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    return file;
  };
}

/** One GET to the loaded server on 127.0.0.1; resolves with the body. */
async function ask(server) {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${server.address().port}/`);
    return await res.text();
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const HANDLER = '(req, res) => res.end("%s")';
const SERVER = 'require("node:http").createServer((req, res) => res.end("%s"))';
const ESM_SERVER = 'http.createServer((req, res) => res.end("%s"))';
const answers = (text, word) => text.replace('%s', word);

test('every module shape Node loads is served, and answers with its own handler', async (t) => {
  const write = fixtures(t);
  // [what, file, text, kind, the body it answers]
  const shapes = [
    ['CommonJS handler', 'h.js', `module.exports = ${answers(HANDLER, 'cjs-handler')};`, 'handler', 'cjs-handler'],
    ['CommonJS server', 's.js', `module.exports = ${answers(SERVER, 'cjs-server')};`, 'server', 'cjs-server'],
    ['CommonJS sync factory returning a server', 'f.js', `module.exports = () => ${answers(SERVER, 'sync-factory')};`, 'factory', 'sync-factory'],
    ['CommonJS async factory returning a handler', 'fa.js', `module.exports = async () => ${answers(HANDLER, 'async-factory')};`, 'factory', 'async-factory'],
    ['CommonJS exports.default (TypeScript output)', 'ts.js',
      `Object.defineProperty(exports, "__esModule", { value: true }); exports.default = ${answers(HANDLER, 'ts-default')};`, 'handler', 'ts-default'],
    ['ESM export default handler', 'e.mjs', `export default ${answers(HANDLER, 'esm-handler')};`, 'handler', 'esm-handler'],
    ['ESM export default server', 'es.mjs', `import http from 'node:http';\nexport default ${answers(ESM_SERVER, 'esm-server')};`, 'server', 'esm-server'],
    ['ESM export default async factory', 'ef.mjs',
      `import http from 'node:http';\nexport default async () => ${answers(ESM_SERVER, 'esm-factory')};`, 'factory', 'esm-factory'],
    ['ESM with top-level await, export default handler', 'tla.mjs',
      `await new Promise((r) => setTimeout(r, 5));\nexport default ${answers(HANDLER, 'tla-handler')};`, 'handler', 'tla-handler'],
    ['ESM with top-level await, export default server', 'tlas.mjs',
      `import http from 'node:http';\nconst word = await Promise.resolve('tla-server');\nexport default http.createServer((req, res) => res.end(word));`, 'server', 'tla-server'],
    ['ESM .js under "type": "module" with top-level await', 'pkg/app.js',
      `await null;\nexport default ${answers(HANDLER, 'type-module')};`, 'handler', 'type-module'],
  ];
  write('pkg/package.json', '{"type":"module"}');
  for (const [name, file, text, kind, body] of shapes) {
    const app = await loadApp(write(file, text));
    assert.equal(app.kind, kind, name);
    assert.equal(await ask(app.server), body, name);
  }
});

test('an ES module with top-level await runs once (import() finishes what require() started)', async (t) => {
  const write = fixtures(t);
  const file = write('once.mjs', 'globalThis.tunekitLoads = (globalThis.tunekitLoads || 0) + 1;\nawait null;\nexport default (req, res) => res.end("once");');
  await loadApp(file);
  assert.equal(globalThis.tunekitLoads, 1);
  delete globalThis.tunekitLoads;
});

// A Koa app is an object with callback(), use() and context (https://koajs.com/#application).
// No Koa package here: the fixture is an object of the same shape, whose callback()
// returns the handler Koa's would.
const KOA_SHAPED = `
const app = { context: {}, use() { return app; }, callback() { return (req, res) => res.end('koa-callback'); } };
module.exports = app;`;

test('a Koa-shaped app (callback, use, context) is served through app.callback()', async (t) => {
  const write = fixtures(t);
  const app = await loadApp(write('koa.js', KOA_SHAPED));
  assert.equal(app.kind, 'koa');
  assert.equal(await ask(app.server), 'koa-callback');
  const made = await loadApp(write('koa-factory.mjs', `import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
export default async () => require('./koa.js');`));
  assert.equal(made.kind, 'factory');
  assert.equal(await ask(made.server), 'koa-callback');
});

test('Fastify, hapi and NestJS objects are refused with the one factory to export', async (t) => {
  const write = fixtures(t);
  // Objects with the properties each framework documents (no framework installed).
  const fastify = 'const http = require("node:http"); module.exports = { server: http.createServer(), ready() {}, register() {}, inject() {} };';
  const hapi = 'const http = require("node:http"); module.exports = { listener: http.createServer(), initialize() {}, route() {}, start() {} };';
  const nest = 'module.exports = { getHttpServer() {}, getHttpAdapter() {}, init() {}, listen() {} };';
  await assert.rejects(loadApp(write('fastify.js', fastify)),
    /fastify\.js exports a Fastify instance, which the runner does not start itself; export a factory that readies it: async \(\) => \{ await app\.ready\(\); return app\.server; \}$/);
  await assert.rejects(loadApp(write('hapi.js', hapi)),
    /hapi\.js exports a hapi server, which the runner does not start itself; export a factory that initializes it: async \(\) => \{ await server\.initialize\(\); return server\.listener; \}$/);
  await assert.rejects(loadApp(write('nest.js', nest)),
    /nest\.js exports a NestJS app, which the runner does not start itself; export a factory that initializes it: .*await app\.init\(\); return app\.getHttpServer\(\); \}$/);
  await assert.rejects(loadApp(write('fastify-factory.js', `module.exports = async () => { ${fastify.replace('module.exports =', 'return')} };`)),
    /fastify-factory\.js returns a Fastify instance, which the runner does not start itself; export a factory that readies it/);
});

test('what a wrong export is told', async (t) => {
  const write = fixtures(t);
  await assert.rejects(loadApp(write('named.mjs', 'export const handler = (req, res) => res.end();')),
    /named\.mjs has no default export \(it exports handler\); add `export default` of a request handler \(req, res\), a factory returning an http\.Server, or an http\.Server$/);
  await assert.rejects(loadApp(write('plain.js', 'module.exports = { use() {}, callback() {} };')),
    /plain\.js exports object; export a request handler/);
  // Bound before it is exported (the top-level await waits for 'listening').
  const listening = write('listening.mjs', `import http from 'node:http';
const server = http.createServer();
globalThis.tunekitListening = server;
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
export default server;`);
  t.after(() => globalThis.tunekitListening.close());
  await assert.rejects(loadApp(listening),
    /listening\.mjs exports an http\.Server that is already listening \(.*\); export it without calling listen\(\): the runner listens on its socket$/);
});

test('a module that throws at load keeps its own error (no import() retry hides it)', async (t) => {
  const write = fixtures(t);
  await assert.rejects(loadApp(write('throws.js', 'throw new Error("db url missing");')), /^Error: db url missing$/);
  await assert.rejects(loadApp(write('throws.mjs', 'await null;\nthrow new Error("esm db url missing");')), /^Error: esm db url missing$/);
  const app = await loadApp('');
  assert.ok(app.server instanceof http.Server);
});
