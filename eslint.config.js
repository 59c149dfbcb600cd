'use strict';
// The one lint the tests run (test/unit/lint.test.js): names that are not
// defined (a require() left out), imports no one uses, and, in the kit's own
// code, no function longer than 80 lines (blank and comment lines aside): one
// that must be says why in an eslint-disable comment. Style is left to the
// code's own consistency, not to a rule set.

const NODE_GLOBALS = [
  'require', 'module', 'exports', 'process', '__dirname', '__filename', 'console', 'Buffer', 'URL', 'URLSearchParams',
  'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask',
  'fetch', 'AbortController', 'AbortSignal', 'TextDecoder', 'TextEncoder', 'performance', 'structuredClone',
  'SharedArrayBuffer', 'Atomics', 'globalThis', 'WebSocket', 'Response', 'Request', 'Headers',
];

module.exports = [
  { ignores: ['node_modules/**', '.venv/**', 'docs/**', 'test/fixtures/ansible/dir-app/vendor/**'] },
  {
    files: ['**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      ecmaVersion: 2023,
      globals: Object.fromEntries(NODE_GLOBALS.map((g) => [g, 'readonly'])),
    },
    rules: {
      'no-undef': 'error',
      'no-unused-vars': ['error', { args: 'none', caughtErrors: 'none' }],
    },
  },
  {
    files: ['app/**/*.js', 'bin/**/*.js', 'lib/**/*.js', 'loadtest/**/*.js', 'profile/**/*.js', 'examples/**/*.js', 'metrics/**/*.js'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    // The Next.js app the frameworks test builds: ES modules with JSX, as Next compiles them.
    files: ['test/fixtures/frameworks/next-app/**/*.js'],
    languageOptions: { sourceType: 'module', parserOptions: { ecmaFeatures: { jsx: true } } },
  },
];
