// ESLint for the whole repository (npm run lint; installed on first use here, in tools/lint, so
// the gateway's own npm ci stays light). typescript-eslint's recommended rules without type
// information (fast enough for every CI run), plus the few rules this codebase relies on.
import { fileURLToPath } from 'node:url';
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { basePath: fileURLToPath(new URL('../..', import.meta.url)) },
  { ignores: ['**/node_modules/**', 'web/.bundle/**', 'dist/**', 'artifacts/**', '.data/**', 'web/vendor/**', 'coverage/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { ...globals.node, ...globals.browser } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-empty': ['error', { allowEmptyCatch: true }],
      eqeqeq: ['error', 'smart'],
      'prefer-const': 'error',
    },
  },
);
