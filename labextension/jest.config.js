/** Unit tests of the pure parts (runs.ts, protocol.ts) with ts-jest, no browser. */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['**/src/__tests__/**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
