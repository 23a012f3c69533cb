/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.[cm]?[tj]s$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  // ESM-only packages are compiled to CommonJS for jest.
  transformIgnorePatterns: ['/node_modules/(?!(jose|@electric-sql|kysely-pglite-dialect|openapi-fetch|openid-client|oauth4webapi|oauth2-mock-server|is-plain-obj|p-retry|is-network-error)/)'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  maxWorkers: 2,
  // Generous: a test waits for conditions (up to a minute each), and on a loaded machine the heavy
  // ones (processes started from source, large files) take several times their usual time.
  testTimeout: 180_000,
};
