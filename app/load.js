'use strict';
// Turn the user's MODULE into an http.Server that the worker can listen with.
//
// Accepted shapes (module.exports, or its `default` for ES modules):
//   1. a request handler  (req, res) => …      e.g. an express app, a plain function
//   2. a factory          () => server | Promise<server>   e.g. fastify:
//        module.exports = async () => { const f = fastify(); …; await f.ready(); return f.server; }
//        (a factory may also return a handler; it is then wrapped like shape 1)
//   3. an http.Server (or https/http2 server) that is not listening yet
//
// Handler or factory? A function marked `module.exports.tunekit = 'factory'` (or
// 'handler') is what it says. Unmarked, a function that declares two or more
// parameters is a handler (express apps declare (req, res, next)); one with none
// or one is a factory. Mark it when a wrapper hides the arity.

const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const example = require('./example');

async function importModule(file) {
  try {
    return require(file);
  } catch (err) {
    if (err.code !== 'ERR_REQUIRE_ESM') throw err;
    const ns = await import(pathToFileURL(file).href);
    return ns.default !== undefined ? ns.default : ns;
  }
}

function kindOf(fn) {
  if (fn.tunekit === 'factory' || fn.tunekit === 'handler') return fn.tunekit;
  return fn.length >= 2 ? 'handler' : 'factory';
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
  let exported = await importModule(file);
  if (exported && typeof exported === 'object' && exported.default !== undefined && !(exported instanceof net.Server)) {
    exported = exported.default;
  }
  if (exported instanceof net.Server) return { server: exported, kind: 'server', source: file };
  if (typeof exported !== 'function') {
    throw new TypeError(
      `${file} exports ${exported === null ? 'null' : typeof exported}; export a request handler (req, res), a factory returning an http.Server, or an http.Server`,
    );
  }
  const kind = kindOf(exported);
  if (kind === 'handler') return { server: http.createServer(exported), kind, source: file };
  const made = await exported();
  if (made instanceof net.Server) return { server: made, kind, source: file };
  if (typeof made === 'function') return { server: http.createServer(made), kind, source: file };
  throw new TypeError(
    `${file} is a factory (it declares fewer than two parameters) but returned ${made === null ? 'null' : typeof made}; return an http.Server or a (req, res) handler, or mark a handler with module.exports.tunekit = 'handler'`,
  );
}

module.exports = { loadApp, kindOf };
