/** Names an operator gives are printable on input, and what is stored is escaped on every text path. */
import { afterAll, describe, expect } from 'vitest';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { recordAudit } from '../../src/db/audit.js';
import { openDatabase } from '../../src/db/client.js';
import { oneLine, runCli } from '../support/cli.js';
import { HOSTILE, INERT } from '../support/hostileText.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { it } from '../support/fixtures.js';

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });

describe('printable names', () => {
  it.beforeAll(async ({ cliDataDir }) => void cliDataDir, 120_000);
  afterAll(() => {
    delete process.env.ATTEST_ACTOR;
  });

  it.each(Object.entries(HOSTILE))(
    'keys create --name with %s characters is refused: one line, exit 2, nothing stored',
    async (_name, payload) => {
      const run = await runCli('keys', 'create', '--name', payload);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(/^attest: --name must be 1 to 100 printable characters/);
      expect(JSON.parse((await runCli('keys', 'list', '--json')).stdout)).toEqual([]);
    },
  );

  it('--actor and ATTEST_ACTOR with a bidi override are refused (exit 2)', async () => {
    const flag = await runCli('--actor', 'ops\u202eevil', 'keys', 'create', '--name', 'x');
    expect(flag.code).toBe(2);
    expect(oneLine(flag)).toMatch(/--actor must be 1 to 100 printable characters/);
    process.env.ATTEST_ACTOR = 'ops\u202eevil';
    try {
      const env = await runCli('keys', 'create', '--name', 'x');
      expect(env.code).toBe(2);
      expect(oneLine(env)).toMatch(/ATTEST_ACTOR/);
    } finally {
      delete process.env.ATTEST_ACTOR;
    }
  });

  it('names and actors stored before (or by other means) are escaped in keys list, audit list and keys revoke', async () => {
    const hostile = 'a\u001b]0;TITLE\u0007b\u202e\u009b';
    const handle = await openDatabase({ dataDir: process.env.ATTEST_DATA_DIR!, role: 'cli' });
    try {
      await createApiKeyRepository(handle.db).insert({
        id: '0123456789abcdef',
        name: hostile,
        hash: 'h',
        expiresInSeconds: null,
      });
      await recordAudit(handle.db, { actor: hostile }, { action: 'keys.create', target: hostile });
    } finally {
      await handle.close();
    }
    for (const args of [
      ['keys', 'list'],
      ['audit', 'list'],
      ['keys', 'revoke', '0123456789abcdef', '--yes'],
    ]) {
      const run = await runCli(...args);
      expect(run.code, args.join(' ')).toBe(0);
      for (const line of run.stdout.split('\n')) expect(line, args.join(' ')).toMatch(INERT);
      expect(run.stdout, args.join(' ')).toContain('a\\x1B]0;TITLE\\x07b<U+202E>\\x9B');
    }
    // --json keeps the value, escaped as JSON
    const json = await runCli('keys', 'list', '--json');
    for (const line of json.stdout.split('\n')) expect(line).toMatch(INERT);
    expect((JSON.parse(json.stdout) as { name: string }[])[0]!.name).toBe(hostile);
  });
});
