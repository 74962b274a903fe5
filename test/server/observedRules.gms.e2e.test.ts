// Observed rules for Play Integrity end to end: the observe set stored on the package row (PGlite
// and PostgreSQL), minted tokens failing each observable rule, the HTTP answer and the log line.
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { OBSERVABLE_REASONS } from '../../src/core/observedRules.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { AndroidPolicyInput } from '../../src/db/androidPackageRows.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, useDatabase } from '../support/databases.js';
import {
  createGoogleTestKeys,
  keyPairOf,
  mintIntegrityToken,
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  type GoogleTestKeys,
  type MintOptions,
} from '../support/googleFactory.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const NOW = new Date('2026-11-22T12:00:00Z');
type Mint = Partial<Omit<MintOptions, 'nonce' | 'keys'>>;
type Payload = Record<string, unknown>;

/** Each observable gms rule: a policy that sets it and a verdict that fails it (and nothing else). */
const CASES: { code: string; policy: AndroidPolicyInput; mint: Mint }[] = [
  {
    code: 'gms_integrity_insufficient',
    policy: { minVerdict: 'MEETS_STRONG_INTEGRITY' },
    mint: {},
  },
  {
    code: 'gms_app_not_recognized',
    policy: {},
    mint: { appRecognitionVerdict: 'UNRECOGNIZED_VERSION' },
  },
  {
    code: 'gms_not_licensed',
    policy: { requireLicensed: true },
    mint: { editPayload: (p) => ({ ...p, accountDetails: { appLicensingVerdict: 'UNLICENSED' } }) },
  },
  {
    code: 'gms_play_protect',
    policy: { playProtectVerdicts: ['NO_ISSUES'] },
    mint: {
      editPayload: (p) => ({ ...p, environmentDetails: { playProtectVerdict: 'HIGH_RISK' } }),
    },
  },
  {
    code: 'gms_app_access_risk',
    policy: { denyAppAccessRisk: ['UNKNOWN_CAPTURING'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        environmentDetails: { appAccessRiskVerdict: { appsDetected: ['UNKNOWN_CAPTURING'] } },
      }),
    },
  },
  {
    code: 'gms_device_activity',
    policy: { maxDeviceActivity: 'LEVEL_1' },
    mint: {
      editPayload: (p) => ({
        ...p,
        deviceIntegrity: {
          ...(p.deviceIntegrity as Payload),
          recentDeviceActivity: { deviceActivityLevel: 'LEVEL_3' },
        },
      }),
    },
  },
  {
    code: 'gms_device_recalled',
    policy: { denyRecallBits: ['first'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        deviceIntegrity: {
          ...(p.deviceIntegrity as Payload),
          deviceRecall: { values: { bitFirst: true }, writeDates: { yyyymmFirst: 202610 } },
        },
      }),
    },
  },
  {
    code: 'gms_account_activity',
    policy: { minAccountActivity: 'TYPICAL_BASIC' },
    mint: {
      editPayload: (p) => ({
        ...p,
        accountDetails: {
          appLicensingVerdict: 'LICENSED',
          accountActivity: { activityLevel: 'UNUSUAL' },
        },
      }),
    },
  },
  {
    code: 'gms_location_spoofing',
    policy: { denyLocationSpoofing: ['HIGH_RISK_DEVICE'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        environmentDetails: { locationSpoofingRiskVerdict: ['HIGH_RISK_DEVICE'] },
      }),
    },
  },
];

let pair: GoogleTestKeys;
beforeAll(async () => {
  pair = await createGoogleTestKeys('pair-observe');
});

describe.each(backends())('observed Play Integrity rules on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof createPlatformService>;
  const repo = () => createAllowlistRepository(db.db, TEST_SECRETS);
  const change = (policy: AndroidPolicyInput) => repo().addAndroid(TEST_PACKAGE, null, policy);

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await repo().addAndroid(TEST_PACKAGE, keyPairOf(pair), {
      certificateDigests: [TEST_CERT_DIGEST],
    });
    service = createPlatformService(db, { now: NOW, appleRoots: defaultAppleRoots() });
  });

  async function run(mint: Mint = {}) {
    const res = await verifySessionless(service.app, key, async (nonce) => {
      const integrityToken = await mintIntegrityToken({
        keys: pair,
        now: new Date(NOW.getTime() - 20_000),
        ...mint,
        nonce,
      });
      return encodeEnvelope({
        nonce,
        service: 'gms',
        evidence: new Map([
          ['packageName', TEST_PACKAGE],
          ['integrityToken', integrityToken],
        ]),
      });
    });
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Payload, log: service.logs.last() };
  }

  it('the cases cover every observable gms code', () => {
    expect(CASES.map((c) => c.code)).toEqual([...OBSERVABLE_REASONS.gms]);
  });

  it.each(CASES)(
    '$code: enforced it rejects; observed the token is valid, the log line names it, the answer does not; enforced again it rejects',
    async ({ code, policy, mint }) => {
      await change(policy);
      const enforced = await run(mint);
      expect(enforced.body).toEqual({ isValid: false, statusCode: 0 });
      expect(enforced.log).toMatchObject({ isValid: false, reason: code });
      expect(enforced.log.observed).toBeUndefined();

      await change({ observeChange: { observe: [code] } });
      const observed = await run(mint);
      expect(observed.body).toMatchObject({
        isValid: true,
        statusCode: 0,
        googleTokenDetails: { packageName: TEST_PACKAGE },
      });
      expect(Object.keys(observed.body).sort()).toEqual([
        'googleTokenDetails',
        'isValid',
        'statusCode',
      ]);
      expect(JSON.stringify(observed.body)).not.toContain(code);
      expect(observed.log).toMatchObject({ isValid: true, observed: [code] });
      expect(observed.log.reason).toBeUndefined();

      await change({ observeChange: { enforce: [code] } });
      expect((await run(mint)).log).toMatchObject({ isValid: false, reason: code });
    },
  );

  it('two observed rules failing in one verify are both recorded; a passing token records none', async () => {
    await change({
      minVerdict: 'MEETS_STRONG_INTEGRITY',
      playProtectVerdicts: ['NO_ISSUES'],
      observeChange: { observe: ['gms_play_protect', 'gms_integrity_insufficient'] },
    });
    const both = await run(CASES[3]!.mint);
    expect(both.body).toMatchObject({ isValid: true });
    // in the order the checks ran
    expect(both.log.observed).toEqual(['gms_integrity_insufficient', 'gms_play_protect']);

    const clean = await run({
      deviceVerdicts: ['MEETS_DEVICE_INTEGRITY', 'MEETS_STRONG_INTEGRITY'],
      editPayload: (p) => ({ ...p, environmentDetails: { playProtectVerdict: 'NO_ISSUES' } }),
    });
    expect(clean.log).toMatchObject({ isValid: true });
    expect(clean.log.observed).toBeUndefined();
  });

  it('an enforced rule after an observed one still rejects, with its own reason', async () => {
    await change({
      minVerdict: 'MEETS_STRONG_INTEGRITY',
      playProtectVerdicts: ['NO_ISSUES'],
      observeChange: { observe: ['gms_integrity_insufficient'] },
    });
    const { body, log } = await run(CASES[3]!.mint);
    expect(body).toEqual({ isValid: false, statusCode: 0 });
    expect(log).toMatchObject({ isValid: false, reason: 'gms_play_protect' });
    expect(log.observed).toBeUndefined();
  });

  it('observing every code never lets an identity failure through (certificate, freshness)', async () => {
    await change({ observeChange: { observe: [...OBSERVABLE_REASONS.gms] } });
    const otherCert = await run({ certificateDigests: [new Uint8Array(32).fill(1)] });
    expect(otherCert.log).toMatchObject({ isValid: false, reason: 'gms_certificate_mismatch' });
    const stale = await run({ now: new Date(NOW.getTime() - 3_600_000) });
    expect(stale.log).toMatchObject({ isValid: false, reason: 'gms_token_stale' });
  });
});
