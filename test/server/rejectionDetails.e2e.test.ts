// Rejection details end to end (PGlite and PostgreSQL): an API key made with --rejection-details
// gets `rejection: {reason, remediation?}` on every rejection of every kind, the Play dialog for a
// cause the user can fix on the device; a plain key's rejection stays exactly the contract's body;
// a valid answer never carries one; and the flag, turned on or off, applies at the key's next read.
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { REMEDIATION_DIALOGS } from '../../src/core/gms/remediation.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { AndroidPolicyInput } from '../../src/db/androidPackageRows.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
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
import { createPlatformService, issueKey, verify, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const NOW = new Date('2026-11-22T12:00:00Z');
type Mint = Partial<Omit<MintOptions, 'nonce' | 'keys'>>;
type Payload = Record<string, unknown>;
const dialog = (name: keyof typeof REMEDIATION_DIALOGS) => ({
  dialog: name,
  typeCode: REMEDIATION_DIALOGS[name],
});

/** Rejections of each kind, the policy that makes them, and the rejection a detailed key reads. */
const CASES: { name: string; policy: AndroidPolicyInput; mint: Mint; rejection: unknown }[] = [
  {
    name: 'device integrity below the minimum',
    policy: {},
    mint: { deviceVerdicts: ['MEETS_BASIC_INTEGRITY'] },
    rejection: { reason: 'gms_integrity_insufficient', remediation: dialog('GET_INTEGRITY') },
  },
  {
    name: 'device integrity below STRONG',
    policy: { minVerdict: 'MEETS_STRONG_INTEGRITY' },
    mint: {},
    rejection: {
      reason: 'gms_integrity_insufficient',
      remediation: dialog('GET_STRONG_INTEGRITY'),
    },
  },
  {
    name: 'an unlicensed copy',
    policy: { requireLicensed: true },
    mint: { editPayload: (p) => ({ ...p, accountDetails: { appLicensingVerdict: 'UNLICENSED' } }) },
    rejection: { reason: 'gms_not_licensed', remediation: dialog('GET_LICENSED') },
  },
  {
    name: 'an unknown app capturing the screen',
    policy: { denyAppAccessRisk: ['UNKNOWN_CAPTURING', 'KNOWN_CAPTURING'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        environmentDetails: { appAccessRiskVerdict: { appsDetected: ['UNKNOWN_CAPTURING'] } },
      }),
    },
    rejection: { reason: 'gms_app_access_risk', remediation: dialog('CLOSE_UNKNOWN_ACCESS_RISK') },
  },
  {
    name: 'a known app capturing the screen',
    policy: { denyAppAccessRisk: ['UNKNOWN_CAPTURING', 'KNOWN_CAPTURING'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        environmentDetails: { appAccessRiskVerdict: { appsDetected: ['KNOWN_CAPTURING'] } },
      }),
    },
    rejection: { reason: 'gms_app_access_risk', remediation: dialog('CLOSE_ALL_ACCESS_RISK') },
  },
  {
    name: 'unusual account activity (no dialog fixes it)',
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
    rejection: { reason: 'gms_account_activity' },
  },
  {
    name: 'a denied location spoofing risk (no dialog fixes it)',
    policy: { denyLocationSpoofing: ['HIGH_RISK_DEVICE'] },
    mint: {
      editPayload: (p) => ({
        ...p,
        environmentDetails: { locationSpoofingRiskVerdict: ['HIGH_RISK_DEVICE'] },
      }),
    },
    rejection: { reason: 'gms_location_spoofing' },
  },
  {
    name: 'an identity failure (the certificate)',
    policy: {},
    mint: { certificateDigests: [new Uint8Array(32).fill(1)] },
    rejection: { reason: 'gms_certificate_mismatch' },
  },
];

let pair: GoogleTestKeys;
beforeAll(async () => {
  pair = await createGoogleTestKeys('pair-rejection');
});

describe.each(backends())('rejection details on $name', (backend) => {
  const db = useDatabase(backend);
  let plain: string;
  let detailed: { id: string; key: string };
  let service: ReturnType<typeof createPlatformService>;
  const repo = () => createAllowlistRepository(db.db, TEST_SECRETS);
  const change = (policy: AndroidPolicyInput) => repo().addAndroid(TEST_PACKAGE, null, policy);

  beforeEach(async () => {
    plain = (await issueKey(db)).key;
    detailed = await issueKey(db, { rejectionDetails: true });
    await repo().addAndroid(TEST_PACKAGE, keyPairOf(pair), {
      certificateDigests: [TEST_CERT_DIGEST],
    });
    // every verify reads the key's row again: a flag change applies at the next one
    service = createPlatformService(db, {
      now: NOW,
      appleRoots: defaultAppleRoots(),
      auth: { revalidateMs: 0 },
    });
  });

  async function run(key: string, mint: Mint = {}) {
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

  it.each(CASES)(
    '$name: the detailed key reads why, the plain key the contract body',
    async ({ policy, mint, rejection }) => {
      await change(policy);
      const told = await run(detailed.key, mint);
      expect(told.body).toEqual({ isValid: false, statusCode: 0, rejection });
      expect(told.log).toMatchObject({ isValid: false, reason: (rejection as Payload).reason });
      const plainRun = await run(plain, mint);
      expect(plainRun.body).toEqual({ isValid: false, statusCode: 0 });
    },
  );

  it('an observed rule that failed says nothing: the answer is valid, no rejection', async () => {
    await change({
      minVerdict: 'MEETS_STRONG_INTEGRITY',
      observeChange: { observe: ['gms_integrity_insufficient'] },
    });
    const { body } = await run(detailed.key);
    expect(body).toMatchObject({ isValid: true, statusCode: 0 });
    expect(body).not.toHaveProperty('rejection');
  });

  it('rejections that are not Play rules: the session, the token, the key scope', async () => {
    const badSession = await verify(service.app, detailed.key, {
      attestationToken: Buffer.from('x').toString('base64'),
      sessionReference: 'ses_unknown',
    });
    expect(await badSession.json()).toEqual({
      isValid: false,
      statusCode: 0,
      rejection: { reason: 'session_unknown' },
    });
    const garbage = await verify(service.app, detailed.key, {
      attestationToken: Buffer.from('not cbor').toString('base64'),
      expectedNonce: Buffer.alloc(32, 1).toString('base64'),
    });
    expect(await garbage.json()).toEqual({
      isValid: false,
      statusCode: 0,
      rejection: { reason: 'token_malformed' },
    });
    const scoped = await issueKey(db, { rejectionDetails: true, apps: ['com.example.other'] });
    expect((await run(scoped.key)).body).toEqual({
      isValid: false,
      statusCode: 0,
      rejection: { reason: 'app_not_in_key_scope' },
    });
  });

  it('turned on and off with the key repository: applies at the next verify', async () => {
    await change({ minVerdict: 'MEETS_STRONG_INTEGRITY' });
    const keys = createApiKeyRepository(db.db);
    expect(await keys.setRejectionDetails(detailed.id, false)).toEqual({
      found: true,
      changed: true,
    });
    expect((await run(detailed.key)).body).toEqual({ isValid: false, statusCode: 0 });
    expect(await keys.setRejectionDetails(detailed.id, true)).toEqual({
      found: true,
      changed: true,
    });
    expect(await keys.setRejectionDetails(detailed.id, true)).toEqual({
      found: true,
      changed: false,
    });
    expect((await run(detailed.key)).body).toMatchObject({
      rejection: { reason: 'gms_integrity_insufficient' },
    });
    expect(await keys.setRejectionDetails('0000000000000000', true)).toEqual({
      found: false,
      changed: false,
    });
    expect((await keys.find(detailed.id))?.rejectionDetails).toBe(true);
  });
});
