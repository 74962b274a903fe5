/**
 * `verify-file` in database mode shows observed rules truthfully: the failing check marked as
 * observed (not passed, not failed), the verdict valid, and the observed codes named, in the JSON
 * document and the text report; enforced, the same token is rejected at that check.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { openDatabase } from '../../src/db/client.js';
import { runMigrations } from '../../src/db/migrate.js';
import {
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
} from '../support/appleFactory.js';
import { scratch, verifyFile } from '../support/verifyFileTokens.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';

const AT = TEST_NOW.toISOString();
let files: ReturnType<typeof scratch>;
let env: Record<string, string>;
let token: Buffer;
let nonce: Buffer;

const setObserve = async (observe: string[]) => {
  const handle = await openDatabase({ dataDir: env.ATTEST_DATA_DIR!, role: 'cli' });
  try {
    await createAllowlistRepository(handle.db, null).addApple(TEST_APP_ID, undefined, undefined, {
      validationCategories: ['appstore'],
      observeChange: { enforce: 'all', observe },
    });
  } finally {
    await handle.close();
  }
};

beforeAll(async () => {
  files = scratch('attest-vf-observed-');
  const ca = await createTestCa();
  env = {
    ATTEST_APPLE_ROOT_CA: files.file(ca.rootPem, 'root.pem'),
    ATTEST_DATA_DIR: join(files.dir, 'data'),
    ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV,
  };
  const handle = await openDatabase({ dataDir: env.ATTEST_DATA_DIR!, role: 'cli' });
  try {
    await runMigrations(handle);
    await createAllowlistRepository(handle.db, null).addApple(TEST_APP_ID, 'production');
  } finally {
    await handle.close();
  }
  // a Development key without the iOS 27 extensions: two policy rules fail
  const device = await createDeviceKey();
  nonce = randomBytes(32);
  const { attestation } = await createAttestation(ca, device, {
    nonce,
    environment: 'Development',
  });
  token = encodeAppleToken({ nonce, keyId: device.keyId, attestation });
}, 120_000);
afterAll(() => files?.remove());

const run = (...flags: string[]) =>
  verifyFile([files.file(token), '--at', AT, '--nonce', nonce.toString('base64'), ...flags], env);

describe('verify-file with observed rules (database mode)', () => {
  it('observed: valid, each failing rule listed as observed with its reason, the observed codes named', async () => {
    await setObserve(['apple_environment_not_allowed', 'apple_distribution_not_allowed']);
    const json = await run('--json');
    expect(json.code, json.stderr).toBe(0);
    expect(json.json).toMatchObject({
      valid: true,
      observed: ['apple_environment_not_allowed', 'apple_distribution_not_allowed'],
    });
    const byId = new Map(json.json!.checks.map((c) => [c.id, c]));
    expect(byId.get('apple.attestation.environment')).toMatchObject({
      status: 'observed',
      reason: 'apple_environment_not_allowed',
    });
    expect(byId.get('apple.attestation.distribution')).toMatchObject({
      status: 'observed',
      reason: 'apple_distribution_not_allowed',
    });
    expect(json.json!.checks.some((c) => c.status === 'fail')).toBe(false);

    const text = await run();
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/\[OBSV\] App Attest environment is allowed for the app/);
    expect(text.stdout).toContain(
      '(apple_environment_not_allowed: failed, observed, not enforced)',
    );
    expect(text.stdout).toMatch(/VALID/);
    expect(text.stdout).toContain(
      'observed rules failed: apple_environment_not_allowed, apple_distribution_not_allowed',
    );
  });

  it('one observed, one enforced: rejected at the enforced check, the observed one still shown', async () => {
    await setObserve(['apple_environment_not_allowed']);
    const json = await run('--json');
    expect(json.code).toBe(1);
    expect(json.json).toMatchObject({ valid: false, reason: 'apple_distribution_not_allowed' });
    expect(json.json).not.toHaveProperty('observed');
    const byId = new Map(json.json!.checks.map((c) => [c.id, c]));
    expect(byId.get('apple.attestation.environment')).toMatchObject({ status: 'observed' });
    expect(byId.get('apple.attestation.distribution')).toMatchObject({ status: 'fail' });
  });

  it('enforced: rejected at the first failing rule', async () => {
    await setObserve([]);
    const json = await run('--json');
    expect(json.json).toMatchObject({ valid: false, reason: 'apple_environment_not_allowed' });
    expect(json.json!.checks.some((c) => c.status === 'observed')).toBe(false);
  });
});
