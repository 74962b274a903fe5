import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['test/support/pgliteTemplate.ts'],
    // ink draws only its last frame when it believes it runs in CI: the viewer tests need a terminal's behaviour
    env: { CI: 'false' },
    benchmark: { include: ['bench/**/*.bench.ts'] },
  },
});
