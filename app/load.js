'use strict';
// Turn the user's MODULE into an http.Server that the worker can listen with.
//
// Any module Node can load: CommonJS, an ES module (.mjs, or .js under
// "type": "module"), an ES module whose graph uses top-level await. What it exports
// (module.exports, or the default export; a CommonJS `exports.default`, as
// TypeScript compiles `export default`, counts as the default):
//   1. a request handler  (req, res) => …      e.g. an express app, a plain function
//   2. a factory          () => X | Promise<X>, X one of the other shapes, e.g. fastify:
//        module.exports = async () => { const f = fastify(); …; await f.ready(); return f.server; }
//   3. an http.Server (or https/http2 server) that is not listening yet
//   4. a Koa app (an object with callback(), use() and context): served through
//      app.callback(), as Koa's own listen() does
//
// Handler or factory? A function marked `module.exports.tunekit = 'factory'` (or
// 'handler') is what it says. Unmarked, a function that declares two or more
// parameters is a handler (express apps declare (req, res, next)); one with none
// or one is a factory. Mark it when a wrapper hides the arity.
//
// Framework objects that need their own start-up before they can serve (a Fastify
// instance, a hapi server, a NestJS app) are refused with the one factory to
// export instead: that start-up runs the app's plugins and hooks, which may fail
// or wait, and belongs in the app's code where its author sees it (the worker
// reports a factory that never settles: tunekit_app_start_timeout_ms). They are
// recognised by the properties their documentation names, never by importing them.

const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const example = require('./example');

// require() refuses an ES module with ERR_REQUIRE_ESM before Node 20.19 / 22.12
// (which added require(esm)), and since then still refuses one whose graph uses
// top-level await, with ERR_REQUIRE_ASYNC_MODULE. import() loads both. Node
// evaluates such a module once: the import() gets the module the failed require()
// started (https://nodejs.org/api/modules.html#loading-ecmascript-modules-using-require).
const IMPORT_INSTEAD = new Set(['ERR_REQUIRE_ESM', 'ERR_REQUIRE_ASYNC_MODULE']);

async function importModule(file) {
  try {
    return require(file);
  } catch (err) {
    if (!IMPORT_INSTEAD.has(err.code)) throw err;
    return import(pathToFileURL(file).href);
  }
}

const isModuleNamespace = (v) => Object.prototype.toString.call(v) === '[object Module]';

/** The module's export: its default export, or module.exports. */
function exportOf(loaded, file) {
  let value = loaded;
  // An ES namespace's default, then a CommonJS exports.default (TypeScript's output,
  // also seen through import(), where module.exports is the namespace's default).
  for (let i = 0; i < 2 && value && typeof value === 'object' && !(value instanceof net.Server); i++) {
    if (value.default !== undefined) {
      value = value.default;
    } else if (isModuleNamespace(value)) {
      const names = Object.keys(value);
      throw new TypeError(
        `${file} has no default export${names.length ? ` (it exports ${names.join(', ')})` : ''}; ` +
          'add `export default` of a request handler (req, res), a factory returning an http.Server, or an http.Server',
      );
    }
  }
  return value;
}

function kindOf(fn) {
  if (fn.tunekit === 'factory' || fn.tunekit === 'handler') return fn.tunekit;
  return fn.length >= 2 ? 'handler' : 'factory';
}

const has = (obj, ...fns) => fns.every((name) => typeof obj[name] === 'function');

// Framework objects the runner does not start itself: what they are, by the
// properties their documentation names, and the factory to export instead.
const NEEDS_A_FACTORY = [
  {
    name: 'a Fastify instance',
    // https://fastify.dev/docs/latest/Reference/Server/#server, #ready
    is: (o) => o.server instanceof net.Server && has(o, 'ready', 'register', 'inject'),
    fix: 'export a factory that readies it: async () => { await app.ready(); return app.server; }',
  },
  {
    name: 'a hapi server',
    // https://hapi.dev/api/#-serverlistener, #-await-serverinitialize
    is: (o) => o.listener instanceof net.Server && has(o, 'initialize', 'route'),
    fix: 'export a factory that initializes it: async () => { await server.initialize(); return server.listener; }',
  },
  {
    name: 'a NestJS app',
    // https://docs.nestjs.com/faq/http-adapter, INestApplication#init
    is: (o) => has(o, 'getHttpServer', 'getHttpAdapter', 'init'),
    fix: 'export a factory that initializes it: async () => { const app = await NestFactory.create(AppModule); await app.init(); return app.getHttpServer(); }',
  },
];

// https://koajs.com/#app-callback-: a handler for http.createServer.
const isKoa = (o) => has(o, 'callback', 'use') && o.context !== null && typeof o.context === 'object';

function describe(value) {
  return value === null ? 'null' : typeof value;
}

function serverOf(srv, kind, file) {
  if (srv.listening) {
    throw new TypeError(`${file} exports an http.Server that is already listening (${JSON.stringify(srv.address())}); export it without calling listen(): the runner listens on its socket`);
  }
  return { server: srv, kind, source: file };
}

/** A handler, server or framework object as a server; `kind` names the export's shape. */
function fromValue(value, kind, file, made) {
  if (value instanceof net.Server) return serverOf(value, kind || 'server', file);
  if (typeof value === 'function') return { server: http.createServer(value), kind: kind || 'handler', source: file };
  if (value && typeof value === 'object') {
    if (isKoa(value)) return { server: http.createServer(value.callback()), kind: kind || 'koa', source: file };
    const framework = NEEDS_A_FACTORY.find((f) => f.is(value));
    if (framework) {
      throw new TypeError(`${file} ${made ? 'returns' : 'exports'} ${framework.name}, which the runner does not start itself; ${framework.fix}`);
    }
  }
  return null;
}

/**
 * @param {string} modulePath  '' for the example app; relative paths resolve from cwd
 * @returns {Promise<{server: http.Server, kind: string, source: string}>}
 */
async function loadApp(modulePath) {
  if (!modulePath) {
    return { server: http.createServer(example), kind: 'handler', source: 'example' };
  }
  const file = path.resolve(modulePath);
  const exported = exportOf(await importModule(file), file);
  if (typeof exported === 'function' && kindOf(exported) === 'factory') {
    const made = await exported();
    const served = fromValue(made, 'factory', file, true);
    if (served) return served;
    throw new TypeError(
      `${file} is a factory (it declares fewer than two parameters) but returned ${describe(made)}; return an http.Server or a (req, res) handler, or mark a handler with module.exports.tunekit = 'handler'`,
    );
  }
  const served = fromValue(exported, null, file, false);
  if (served) return served;
  throw new TypeError(
    `${file} exports ${describe(exported)}; export a request handler (req, res), a factory returning an http.Server, or an http.Server`,
  );
}

module.exports = { loadApp, kindOf };
