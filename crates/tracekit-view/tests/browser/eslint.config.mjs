// Lint of the viewer's page (assets/, ES modules in the browser) and of its
// browser tests (node). Run from crates/tracekit-view, as .ci/run does:
//   tests/browser/node_modules/.bin/eslint -c tests/browser/eslint.config.mjs assets tests/browser
// (with -c the files are matched from there, where the page lives).
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['tests/browser/node_modules/'] },
  {
    files: ['assets/**/*.js'],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: globals.browser },
  },
  {
    files: ['tests/browser/*.mjs'],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node, ...globals.browser } },
  },
];
