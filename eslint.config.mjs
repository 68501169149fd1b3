// Lint: typescript-eslint with type information, and Nx module boundaries with real constraints
// (libs/domain depends on nothing; apps depend on libs, never on apps; db never on queues).
import nx from '@nx/eslint-plugin';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'tmp/**', '.data/**', '.nx/**', '**/*.mjs', '**/*.js', '**/*.d.mts', 'apps/portal/**'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommended],
    plugins: { '@nx': nx },
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false },
      ],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          depConstraints: [
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: [] },
            { sourceTag: 'type:config', onlyDependOnLibsWithTags: [] },
            { sourceTag: 'type:contract', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:db', onlyDependOnLibsWithTags: ['type:domain', 'type:config'] },
            { sourceTag: 'type:queues', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:processor', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:recovery', onlyDependOnLibsWithTags: ['type:domain', 'type:db', 'type:queues'] },
            {
              sourceTag: 'type:platform',
              onlyDependOnLibsWithTags: ['type:domain', 'type:config', 'type:db', 'type:queues', 'type:processor'],
            },
            {
              sourceTag: 'type:testing',
              onlyDependOnLibsWithTags: ['type:domain', 'type:config', 'type:db', 'type:queues', 'type:processor'],
            },
            {
              sourceTag: 'type:app',
              onlyDependOnLibsWithTags: [
                'type:domain',
                'type:config',
                'type:db',
                'type:contract',
                'type:queues',
                'type:processor',
                'type:recovery',
                'type:platform',
                'type:testing',
              ],
            },
          ],
        },
      ],
    },
  },
  {
    // Decorated constructor parameters need value imports for Nest's DI metadata.
    files: ['apps/**/*.ts', 'libs/platform/**/*.ts'],
    rules: { '@typescript-eslint/consistent-type-imports': 'off' },
  },
  prettier,
);
