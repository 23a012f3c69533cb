const tseslint = require('typescript-eslint');

module.exports = tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'generated/', 'coverage/', '.data/'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      'no-console': 'off',
    },
  },
  {
    // SQL only in repositories (docs/architecture.md): services, handlers, workers, http/ and the entry ask a repository.
    files: ['src/app.ts', 'src/composition/**', 'src/server.ts', 'src/http/**', 'src/areas/**'],
    ignores: ['src/areas/*/repository.ts', 'src/areas/*/repository/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.property.name=/^(selectFrom|insertInto|updateTable|deleteFrom|mergeInto|replaceInto)$/]',
          message: 'SQL belongs in a repository (src/areas/<area>/repository.ts, or its files in repository/).',
        },
        { selector: "TaggedTemplateExpression[tag.name='sql'], MemberExpression[object.name='sql']", message: 'SQL belongs in a repository (src/areas/<area>/repository.ts, or its files in repository/).' },
      ],
    },
  },
  {
    // Migrations are frozen against `Kysely<any>`: they must not depend on today's schema type.
    files: ['src/platform/db/migrate.ts', 'src/platform/db/migrations/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
