import { defineConfig } from 'vitest/config';

// files that mock modules need a module graph of their own; the others share one per worker,
// which spares each file seconds of importing the same modules again (the server, postgres.js, jose...).
// A server started in one of them swaps the global Request and Response: pristineGlobals puts
// the originals back before each file.
// ...and so do files that override a fixture (it.override): without isolation the override
// outlives the file, and the next file's data dir would be made with its variables
const MOCKING = [
  'test/db/devReceipts.test.ts',
  'test/core/verify.test.ts',
  'test/server/apiKeyAuthenticator.test.ts',
  'test/server/authAbuse.test.ts',
  'test/server/authPrecheck.test.ts',
];
// in-process units of core, db and server: no process-wide state (env, exit code, stdout) is touched
const SHARED = [
  'test/core/**/*.test.ts',
  'test/google/**/*.test.ts',
  'test/fuzz/**/*.test.ts',
  'test/docs/**/*.test.ts',
  'test/client/**/*.test.ts',
  'test/server/**/*.test.ts',
  'test/db/**/*.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // two workers even on two cores: the CLI and process tests mostly wait for the children they
    // spawn, so a second worker fills that time (vitest's default here would be one)
    maxWorkers: 2,
    globalSetup: ['test/support/embeddedServer.ts'],
    // ink draws only its last frame when it believes it runs in CI: the viewer tests need a terminal's behaviour
    // ...and no test reaches Google's Android status list: servers started in-process keep the snapshot
    env: { CI: 'false', ATTEST_ANDROID_REVOCATION_URL: 'off' },
    benchmark: { include: ['bench/**/*.bench.ts'] },
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: SHARED,
          exclude: MOCKING,
          isolate: false,
          setupFiles: ['test/support/pristineGlobals.ts'],
        },
      },
      { extends: true, test: { name: 'mocking', include: MOCKING } },
      {
        extends: true,
        test: {
          name: 'isolated',
          include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
          exclude: SHARED,
        },
      },
    ],
  },
});
