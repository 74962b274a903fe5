// Play Integrity for PC (`gms-pc`) end to end: HTTP app + real verifiers + the allowlist (with its
// service account) in the database + the real Google client against the local fake Google, whose
// decodePcIntegrityToken answers as Google's discovery document shapes it; on PGlite and
// PostgreSQL, in both approaches.
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { mintPcPayload, type PcMintOptions } from '../../src/core/gmsPc/pcMint.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createPlayIntegrityClient } from '../../src/upstream/playIntegrityClient.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, useDatabase } from '../support/databases.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from '../support/fakeGoogle.js';
import { TEST_PACKAGE } from '../support/googleFactory.js';
import {
  createPlatformService,
  issueKey,
  verifyInSession,
  verifySessionless,
} from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const NOW = new Date('2026-11-22T12:00:00Z');
const REQUESTED = new Date(NOW.getTime() - 20_000);
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** a format-1 `gms-pc` token */
function pcToken(nonce: Uint8Array, integrityToken: string, packageName = TEST_PACKAGE): string {
  return b64(
    encodeEnvelope({
      nonce,
      service: 'gms-pc',
      evidence: new Map<string, unknown>([
        ['packageName', packageName],
        ['integrityToken', integrityToken],
      ]),
    }),
  );
}

let sa: TestServiceAccount;
beforeAll(() => {
  sa = createTestServiceAccount();
});

type Mint = {
  edit?: (p: Record<string, any>) => void;
  options?: Partial<PcMintOptions>;
  integrityToken?: string;
};

describe.each(backends())('Play Integrity for PC (gms-pc) over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let fake: FakeGoogle;
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
      serviceAccount: sa.account,
    });
    fake = await startFakeGoogle({ accounts: [sa] });
    service = createPlatformService(db, {
      now: NOW,
      appleRoots: defaultAppleRoots(),
      googleDecoder: createPlayIntegrityClient({
        oauthUrl: fake.oauthUrl,
        playIntegrityUrl: fake.playIntegrityUrl,
        timeoutMs: 2000,
        maxInFlight: 8,
      }),
    });
  });
  afterEach(async () => {
    await fake.close();
  });

  function pcIntegrityToken(finalNonce: Uint8Array, mint: Mint): string {
    if (mint.integrityToken) return mint.integrityToken;
    const payload = mintPcPayload({
      packageName: TEST_PACKAGE,
      nonce: finalNonce,
      requestTime: REQUESTED,
      ...mint.options,
    });
    mint.edit?.(payload);
    return fake.issuePc(TEST_PACKAGE, payload);
  }

  const approaches = [
    [
      'session',
      async (mint: Mint = {}) =>
        (
          await verifyInSession(
            service.app,
            key,
            (n) => pcToken(n, pcIntegrityToken(n, mint)),
            randomBytes(16),
          )
        ).res,
    ],
    [
      'sessionless',
      (mint: Mint = {}) =>
        verifySessionless(
          service.app,
          key,
          (n) => pcToken(n, pcIntegrityToken(n, mint)),
          randomBytes(32),
        ),
    ],
  ] as const;

  it.each(approaches)('accepts a minted PC token with its details (%s)', async (approach, run) => {
    const res = await run({ options: { isTestingResponse: false } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      isValid: true,
      statusCode: 0,
      googlePcTokenDetails: {
        packageName: TEST_PACKAGE,
        deviceRecognitionVerdict: ['MEETS_PC_INTEGRITY'],
        requestTimeMillis: REQUESTED.getTime(),
        appLicensingVerdict: 'LICENSED',
        isTestingResponse: false,
      },
    });
    expect(service.logs.last()).toMatchObject({
      status: 200,
      approach,
      service: 'gms-pc',
      packageName: TEST_PACKAGE,
      isValid: true,
    });
    expect(fake.counts).toEqual({ token: 1, decode: 1 });
  });

  it('carries unknown future labels and licensing values through as data', async () => {
    const [, run] = approaches[1];
    const res = await run({
      options: {
        verdicts: ['MEETS_PC_INTEGRITY', 'MEETS_FUTURE_PC_THING'],
        appLicensingVerdict: 'SOME_NEW_STATE',
      },
      edit: (p) => void (p.futureDetails = { anything: [1, 2, 3] }),
    });
    expect(await res.json()).toMatchObject({
      isValid: true,
      googlePcTokenDetails: {
        deviceRecognitionVerdict: ['MEETS_PC_INTEGRITY', 'MEETS_FUTURE_PC_THING'],
        appLicensingVerdict: 'SOME_NEW_STATE',
      },
    });
  });

  describe.each(approaches)('rejections, each with its reason code (%s)', (_approach, run) => {
    it.each([
      [
        'a request hash over another nonce',
        {
          edit: (p: Record<string, any>): void =>
            void (p.requestDetails.requestHash = randomBytes(32).toString('base64url')),
        },
        'gms_pc_nonce_mismatch',
      ],
      [
        'no request hash',
        { edit: (p: Record<string, any>): void => void delete p.requestDetails.requestHash },
        'gms_pc_nonce_mismatch',
      ],
      [
        'a token Google did not issue',
        { integrityToken: 'forged-pc-token' },
        'gms_pc_decode_rejected',
      ],
      ['no PC integrity', { options: { verdicts: [] } }, 'gms_pc_integrity_insufficient'],
      [
        'another requesting package',
        {
          edit: (p: Record<string, any>): void =>
            void (p.requestDetails.requestPackageName = 'com.example.other'),
        },
        'gms_pc_package_mismatch',
      ],
      [
        'a stale request',
        { options: { requestTime: new Date(NOW.getTime() - 601_000) } },
        'gms_pc_token_stale',
      ],
      [
        'a request from the future',
        { options: { requestTime: new Date(NOW.getTime() + 61_000) } },
        'gms_pc_token_stale',
      ],
      [
        'a verdict list past its bound',
        { options: { verdicts: Array.from({ length: 17 }, () => 'MEETS_PC_INTEGRITY') } },
        'gms_pc_payload_malformed',
      ],
      [
        'a label past its bound',
        { options: { verdicts: ['X'.repeat(65)] } },
        'gms_pc_payload_malformed',
      ],
      [
        'a nested list where labels belong',
        {
          edit: (p: Record<string, any>): void =>
            void (p.deviceIntegrity.deviceRecognitionVerdict = [['MEETS_PC_INTEGRITY']]),
        },
        'gms_pc_payload_malformed',
      ],
      [
        'a requestTime that is not RFC 3339',
        {
          edit: (p: Record<string, any>): void =>
            void (p.requestDetails.requestTime = String(REQUESTED.getTime())),
        },
        'gms_pc_payload_malformed',
      ],
      [
        'no deviceIntegrity',
        { edit: (p: Record<string, any>): void => void delete p.deviceIntegrity },
        'gms_pc_payload_malformed',
      ],
      [
        'isTestingResponse that is not a boolean',
        {
          edit: (p: Record<string, any>): void =>
            void (p.testingDetails = { isTestingResponse: 'yes' }),
        },
        'gms_pc_payload_malformed',
      ],
    ] as const)('%s', async (_name, mint, reason) => {
      const res = await run(mint as Mint);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({
        isValid: false,
        reason,
        service: 'gms-pc',
        packageName: TEST_PACKAGE,
      });
    });

    it('a package without a service account: gms_pc_not_configured, Google never asked', async () => {
      await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
        serviceAccount: null,
      });
      const res = await run();
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({ reason: 'gms_pc_not_configured' });
      expect(fake.counts).toEqual({ token: 0, decode: 0 });
    });

    it('a package off the allowlist: gms_package_not_allowed, Google never asked', async () => {
      const res = await verifySessionless(service.app, key, (n) =>
        pcToken(n, 'whatever', 'com.example.unlisted'),
      );
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({ reason: 'gms_package_not_allowed' });
      expect(fake.counts.decode).toBe(0);
    });

    it('a key scoped to other apps: app_not_in_key_scope, Google never asked', async () => {
      key = (await issueKey(db, { apps: ['com.example.other'] })).key;
      await run();
      expect(service.logs.last()).toMatchObject({ reason: 'app_not_in_key_scope' });
      expect(fake.counts.decode).toBe(0);
    });
  });

  it.each([
    ['not a map', 'text'],
    ['no integrityToken', new Map([['packageName', TEST_PACKAGE]])],
    [
      'an integrityToken past 16 KiB',
      new Map([
        ['packageName', TEST_PACKAGE],
        ['integrityToken', 'x'.repeat(16 * 1024 + 1)],
      ]),
    ],
    [
      'a package name past 255 characters',
      new Map([
        ['packageName', 'a'.repeat(256)],
        ['integrityToken', 't'],
      ]),
    ],
  ])('malformed evidence (%s) is token_malformed, never a 500', async (_name, evidence) => {
    const res = await verifySessionless(service.app, key, (n) =>
      b64(encodeEnvelope({ nonce: n, service: 'gms-pc', evidence })),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(service.logs.last()).toMatchObject({ reason: 'token_malformed' });
  });

  it('a Google fault is a 500, never a verdict', async () => {
    fake.faultNext('decode', { status: 503 });
    const res = await approaches[1][1]();
    expect(res.status).toBe(500);
  });
});
