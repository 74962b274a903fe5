/**
 * `attest dev receipts refresh`: the admin operation stores a development receipt with a test-mode
 * key's risk metric, and the verifier the server builds (over the database's key store, its
 * one-statement assertion path included) sees the metric on the next assertion. Live keys are
 * refused, by the operation (usage) and by the CLI (exit 2). And `dev mint apple --receipt` with
 * the iOS 27 extensions, checked by verify-file as a test key and as a live key would.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { AdminError } from '../../src/admin/adminError.js';
import { runOperation } from '../../src/admin/operations.js';
import type { OperationContext } from '../../src/admin/operation.js';
import { encodeBase64 } from '../../src/core/base64.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { createReceiptVerifier } from '../../src/core/apple/verifyReceipt.js';
import {
  createDevCa,
  createSimulatedKey,
  mintAssertion,
  mintAttestation,
  type SimulatedKey,
} from '../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../src/core/apple/appleToken.js';
import { createMemoryAllowlist } from '../../src/core/memoryStores.js';
import type { AppleAppPolicy, AppleKeyRecord } from '../../src/core/ports.js';
import { verifyToken } from '../../src/core/verify.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { createModeVerifiers } from '../../src/server/modeVerifiers.js';
import { sha256 } from '../support/appleFactory.js';
import { runCli } from '../support/cli.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import { it } from '../support/fixtures.js';

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });

const APP_ID = 'ABCDE12345.com.example.risk';

/** A live key's row, as a real device registered through a live API key would leave it. */
function liveRecord(receipt: Uint8Array): AppleKeyRecord {
  const key = createSimulatedKey();
  return {
    keyId: key.keyId,
    publicKey: new Uint8Array(32),
    appId: APP_ID,
    environment: 'Production',
    counter: 0,
    mode: 'live',
    receipt: {
      bytes: receipt,
      problem: null,
      type: 'ATTEST',
      creationTime: new Date(),
      notBefore: null,
      expirationTime: null,
      riskMetric: null,
    },
  };
}

for (const backend of backends()) {
  describe(`dev receipts refresh (${backend.name})`, () => {
    const db = useDatabase(backend);

    async function setup() {
      await createDevCaRepository(db.db, TEST_SECRETS).put(await createDevCa(new Date()), {
        replace: false,
      });
      const ca = (await createDevCaRepository(db.db, TEST_SECRETS).get())!;
      const app: AppleAppPolicy = {
        appId: APP_ID,
        env: 'any',
        requireReceipt: true,
        maxRiskMetric: 5,
      };
      const keys = createAppleKeyRepository(db.db);
      const verifiersFor = createModeVerifiers({
        allowlist: createMemoryAllowlist({ apple: [app] }),
        appleKeys: keys,
        appleRoots: defaultAppleRoots(),
        devRoot: () => createDevCaRepository(db.db).root(),
        ttlMs: 60_000,
        receipts: createReceiptVerifier(),
      });
      const ctx: OperationContext = { handle: db, secrets: async () => TEST_SECRETS };
      const verify = async (token: Uint8Array, nonce: Uint8Array) =>
        verifyToken(
          { token, expectedNonce: nonce },
          { now: () => new Date(), verifiers: await verifiersFor('test') },
        );
      const register = async (key: SimulatedKey) => {
        const nonce = new Uint8Array(32).fill(3);
        const attestation = await mintAttestation(ca, key, {
          appId: APP_ID,
          environment: 'Production',
          clientDataHash: sha256(nonce),
          now: new Date(),
          receipt: true,
        });
        return verify(encodeAppleToken({ nonce, keyId: key.keyId, attestation }), nonce);
      };
      const assert = async (key: SimulatedKey, counter: number) => {
        const nonce = new Uint8Array(32).fill(counter);
        const assertion = mintAssertion(key, {
          appId: APP_ID,
          counter,
          clientDataHash: sha256(nonce),
        });
        return verify(encodeAppleToken({ nonce, keyId: key.keyId, assertion }), nonce);
      };
      return { app, keys, ctx, register, assert };
    }

    it('stores a refreshed receipt with the risk metric: --max-risk-metric 5 rejects the next assertion, 10 passes it', async () => {
      const { app, keys, ctx, register, assert } = await setup();
      const key = createSimulatedKey();
      expect(await register(key)).toMatchObject({ ok: true });
      // the verifier now holds the key's row (risk metric unknown) for its one-statement path
      expect(await assert(key, 1)).toMatchObject({ ok: true });

      const refreshed = await runOperation(
        'dev.refreshReceipt',
        { keyId: key.keyId, riskMetric: 9 },
        ctx,
      );
      expect(refreshed).toMatchObject({ riskMetric: 9 });
      const view = (await keys.receipt(key.keyId))!;
      expect(view).toMatchObject({
        type: 'RECEIPT',
        riskMetric: 9,
        problem: null,
        refreshable: false,
        lastOutcome: 'dev-refreshed',
      });

      expect(await assert(key, 2)).toMatchObject({
        ok: false,
        reason: 'apple_risk_exceeded',
      });
      app.maxRiskMetric = 10;
      expect(await assert(key, 3)).toMatchObject({
        ok: true,
        details: { appleTokenDetails: { riskMetric: 9, assertionCounter: 3 } },
      });
    });

    it('refuses a live key (usage) and leaves its row alone; an unknown key is negative (exit 1)', async () => {
      const { keys, ctx, register } = await setup();
      const key = createSimulatedKey();
      expect(await register(key)).toMatchObject({ ok: true });
      const receipt = (await keys.receipt(key.keyId))!.receipt!;
      const live = liveRecord(receipt);
      expect(await keys.register(live)).toBe(true);
      const refused = await runOperation(
        'dev.refreshReceipt',
        { keyId: live.keyId, riskMetric: 9 },
        ctx,
      ).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(AdminError);
      expect((refused as AdminError).kind).toBe('usage');
      expect((refused as AdminError).message).toMatch(/live API key.*test API keys only/);
      expect((refused as AdminError).message).not.toContain('\n');
      expect(await keys.receipt(live.keyId)).toMatchObject({ riskMetric: null, type: 'ATTEST' });

      const unknown = await runOperation(
        'dev.refreshReceipt',
        { keyId: new Uint8Array(32).fill(9), riskMetric: 1 },
        ctx,
      ).catch((err: unknown) => err);
      expect((unknown as AdminError).kind).toBe('negative');
    });
  });
}

describe('attest dev receipts refresh (CLI)', () => {
  let dir: string;
  let liveKeyId: string;
  const withDb = async (work: (handle: DatabaseHandle) => Promise<void>) => {
    const handle = await openDatabase({ dataDir: process.env.ATTEST_DATA_DIR!, role: 'cli' });
    try {
      await work(handle);
    } finally {
      await handle.close();
    }
  };
  it.beforeAll(async ({ cliDataDir, tempDir }) => {
    void cliDataDir;
    dir = tempDir;
    expect((await runCli('dev', 'init')).code).toBe(0);
    const live = liveRecord(new Uint8Array([0x30, 0x00]));
    liveKeyId = encodeBase64(live.keyId);
    await withDb(async (h) => {
      expect(await createAppleKeyRepository(h.db).register(live)).toBe(true);
    });
  }, 60_000);

  it('dev mint apple --receipt --validation-category --bundle-version: verify-file --dev-roots passes it, a live verification finds the receipt invalid', async () => {
    const add = await runCli(
      'allowlist',
      'add',
      'apple',
      APP_ID,
      '--require-receipt',
      '--validation-category',
      'appstore',
    );
    expect(add.code, add.stderr).toBe(0);
    const nonce = encodeBase64(new Uint8Array(32).fill(5));
    const mint = await runCli(
      'dev',
      'mint',
      'apple',
      '--app-id',
      APP_ID,
      '--device',
      join(dir, 'ios27.json'),
      '--nonce',
      nonce,
      '--receipt',
      '--validation-category',
      'appstore',
      '--bundle-version',
      '4.2',
      '--json',
    );
    expect(mint.code, mint.stderr).toBe(0);
    const tokenFile = join(dir, 'token.b64');
    writeFileSync(tokenFile, (JSON.parse(mint.stdout) as { token: string }).token);
    const asTest = await runCli(
      'verify-file',
      tokenFile,
      '--nonce',
      nonce,
      '--dev-roots',
      '--json',
    );
    expect(asTest.code, asTest.stderr).toBe(0);
    expect(JSON.parse(asTest.stdout)).toMatchObject({
      valid: true,
      mode: 'test',
      details: { appleTokenDetails: { validationCategory: 'appstore', bundleVersion: '4.2' } },
      receipt: { valid: true, type: 'ATTEST' },
    });
    const asLive = JSON.parse(
      (await runCli('verify-file', tokenFile, '--nonce', nonce, '--json')).stdout,
    );
    expect(asLive).toMatchObject({ valid: false, receipt: { valid: false } });
    expect(asLive.receipt.problem).toContain('not issued by a configured root');
    // --receipt without an attestation is a usage error
    const noAttestation = await runCli(
      'dev',
      'mint',
      'apple',
      '--device',
      join(dir, 'ios27.json'),
      '--nonce',
      nonce,
      '--receipt',
    );
    expect(noAttestation.code).toBe(2);
  });

  it('a live key is a one-line error, exit 2; so are a bad key id and risk metric', async () => {
    const live = await runCli('dev', 'receipts', 'refresh', liveKeyId, '--risk-metric', '9');
    expect(live.code).toBe(2);
    expect(live.stderr.trim().split('\n')).toHaveLength(1);
    expect(live.stderr).toContain('test API keys only');
    expect(live.stdout).toBe('');
    const badId = await runCli('dev', 'receipts', 'refresh', 'nope', '--risk-metric', '9');
    expect(badId.code).toBe(2);
    const badMetric = await runCli('dev', 'receipts', 'refresh', liveKeyId, '--risk-metric', '-1');
    expect(badMetric.code).toBe(2);
    expect(badMetric.stderr).toContain('--risk-metric');
  });
});
