// Play Integrity end to end: HTTP app + real verifiers + the allowlist in the database (key
// rotation included), on PGlite and PostgreSQL.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
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
import {
  createPlatformService,
  init,
  issueKey,
  verify,
  verifyInSession,
  verifySessionless,
} from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const NOW = new Date('2026-11-22T12:00:00Z');
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** a format-1 `gms` token */
function gmsToken(nonce: Uint8Array, integrityToken: string, packageName = TEST_PACKAGE): string {
  return b64(
    encodeEnvelope({
      nonce,
      service: 'gms',
      evidence: new Map<string, unknown>([
        ['packageName', packageName],
        ['integrityToken', integrityToken],
      ]),
      device: { model: 'Pixel 9', os: 'Android 16' },
    }),
  );
}

let pair1: GoogleTestKeys;
let pair2: GoogleTestKeys;
beforeAll(async () => {
  [pair1, pair2] = await Promise.all([
    createGoogleTestKeys('pair-2025'),
    createGoogleTestKeys('pair-2026'),
  ]);
});

describe.each(backends())('Play Integrity over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(
      TEST_PACKAGE,
      keyPairOf(pair1),
      { certificateDigests: [TEST_CERT_DIGEST] },
    );
    service = createPlatformService(db, { now: NOW, appleRoots: defaultAppleRoots() });
  });

  type Mint = Partial<Omit<MintOptions, 'nonce'>>;

  /** session approach: init, mint over serverNonce (|| deviceNonce), verify */
  async function sessionVerify(
    mint: Mint = {},
    options: {
      deviceNonce?: Buffer;
      packageName?: string;
      tokenNonce?: (n: Buffer) => Buffer;
    } = {},
  ) {
    const { res, sessionReference } = await verifyInSession(
      service.app,
      key,
      (finalNonce) => mintedToken(finalNonce, mint, options),
      options.deviceNonce,
    );
    expect(res.status).toBe(200);
    return {
      body: (await res.json()) as Record<string, unknown>,
      log: service.logs.last(),
      sessionReference,
    };
  }

  async function sessionlessVerify(
    mint: Mint = {},
    options: { packageName?: string; tokenNonce?: (n: Buffer) => Buffer } = {},
  ) {
    const res = await verifySessionless(service.app, key, (nonce) =>
      mintedToken(nonce, mint, options),
    );
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Record<string, unknown>, log: service.logs.last() };
  }

  /** a token over `finalNonce` (or what `tokenNonce` makes of it) with a verdict minted for it */
  async function mintedToken(
    finalNonce: Buffer,
    mint: Mint,
    options: { packageName?: string; tokenNonce?: (n: Buffer) => Buffer },
  ) {
    const integrityToken = await mintIntegrityToken({
      keys: pair1,
      now: new Date(NOW.getTime() - 20_000),
      ...mint,
      nonce: finalNonce,
    });
    return gmsToken(
      options.tokenNonce?.(finalNonce) ?? finalNonce,
      integrityToken,
      options.packageName,
    );
  }

  const approaches = [
    [
      'session',
      (mint?: Mint, o?: { packageName?: string; tokenNonce?: (n: Buffer) => Buffer }) =>
        sessionVerify(mint, o),
    ],
    ['sessionless', sessionlessVerify],
  ] as const;

  it.each(approaches)(
    'accepts a valid token with exactly the documented body (%s)',
    async (approach, run) => {
      const issued = new Date(NOW.getTime() - 20_000);
      const { body, log } = await run({
        now: issued,
        deviceVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
      });
      expect(body).toEqual({
        isValid: true,
        statusCode: 0,
        googleTokenDetails: {
          packageName: TEST_PACKAGE,
          deviceIntegrityVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
          timestampMillis: issued.getTime(),
          // extensions: the factory's verdict carries a licensing verdict and a version code
          appLicensingVerdict: 'LICENSED',
          versionCode: '42',
        },
      });
      expect(typeof (body.googleTokenDetails as { timestampMillis: unknown }).timestampMillis).toBe(
        'number',
      );
      expect(log).toMatchObject({
        route: '/api/v1/attestation/verify',
        status: 200,
        approach,
        service: 'gms',
        isValid: true,
        packageName: TEST_PACKAGE,
      });
      expect(log.reason).toBeUndefined();
    },
  );

  it('a 44 KB claimed packageName (a 60 KB request) is refused, and its request log line stays under 4 KiB', async () => {
    service.logs.clear();
    const claimed = `com.${'a'.repeat(44_000)}`;
    const { body, log } = await sessionlessVerify({}, { packageName: claimed });
    expect(body).toEqual({ isValid: false, statusCode: 0 });
    expect(log).toMatchObject({ isValid: false, service: 'gms' });
    // the raw NDJSON line as it was written, not the parsed object
    const line = service.logs.raw.findLast((l) => l.includes('"msg":"request"'))!;
    expect(line.length).toBeLessThan(4096);
    expect(line).not.toContain('a'.repeat(300));
    expect(line).toContain('(44004 chars)');
  });

  it('binds the device nonce: the integrity token must carry serverNonce || deviceNonce', async () => {
    const deviceNonce = randomBytes(24);
    const ok = await sessionVerify({}, { deviceNonce });
    expect(ok.body).toMatchObject({
      isValid: true,
      googleTokenDetails: { packageName: TEST_PACKAGE },
    });

    // the device asked Google for a nonce over the server nonce alone, but put the right final nonce in the token
    const { body } = await init(service.app, key);
    const serverNonce = Buffer.from(body.serverNonce, 'base64');
    const integrityToken = await mintIntegrityToken({ keys: pair1, now: NOW, nonce: serverNonce });
    const res = await verify(service.app, key, {
      attestationToken: gmsToken(Buffer.concat([serverNonce, deviceNonce]), integrityToken),
      sessionReference: body.sessionReference,
      deviceNonce: b64(deviceNonce),
    });
    expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(service.logs.last()).toMatchObject({
      approach: 'session',
      service: 'gms',
      isValid: false,
      reason: 'gms_nonce_mismatch',
      packageName: TEST_PACKAGE,
    });
  });

  it('consumes the session: the same session again is session_consumed', async () => {
    const first = await sessionVerify();
    expect(first.body).toMatchObject({ isValid: true });
    const res = await verify(service.app, key, {
      attestationToken: gmsToken(randomBytes(32), 'x.y.z.w.v'),
      sessionReference: first.sessionReference,
    });
    expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(service.logs.last()).toMatchObject({ reason: 'session_consumed' });
  });

  describe.each(approaches)('rejections, each with its logged reason (%s)', (approach, run) => {
    it.each([
      [
        'token nonce differs from the final nonce',
        () => ({}),
        { tokenNonce: () => randomBytes(32) },
        'nonce_mismatch',
      ],
      [
        'package not on the allowlist',
        () => ({ packageName: 'com.example.unknown' }),
        { packageName: 'com.example.unknown' },
        'gms_package_not_allowed',
      ],
      [
        'sealed with a key pair not on the allowlist',
        (stranger: GoogleTestKeys) => ({ jwe: { encryptWith: stranger } }),
        {},
        'gms_decrypt_failed',
      ],
      [
        'signed with a key pair not on the allowlist',
        (stranger: GoogleTestKeys) => ({ jws: { signWith: stranger } }),
        {},
        'gms_signature_invalid',
      ],
      [
        'requestDetails.nonce of another request',
        () => ({ nonceText: randomBytes(32).toString('base64url') }),
        {},
        'gms_nonce_mismatch',
      ],
      [
        'unrecognized app version',
        () => ({ appRecognitionVerdict: 'UNRECOGNIZED_VERSION' }),
        {},
        'gms_app_not_recognized',
      ],
      [
        'unknown signing certificate',
        () => ({ certificateDigests: [randomBytes(32)] }),
        {},
        'gms_certificate_mismatch',
      ],
      [
        'basic integrity only',
        () => ({ deviceVerdicts: ['MEETS_BASIC_INTEGRITY'] }),
        {},
        'gms_integrity_insufficient',
      ],
      [
        'issued 601 s ago',
        () => ({ now: new Date(NOW.getTime() - 601_000) }),
        {},
        'gms_token_stale',
      ],
      [
        'issued 61 s ahead',
        () => ({ now: new Date(NOW.getTime() + 61_000) }),
        {},
        'gms_token_stale',
      ],
    ] as const)('%s', async (_name, mint, options, reason) => {
      const { body, log } = await run(mint(await createGoogleTestKeys()), options);
      expect(body).toEqual({ isValid: false, statusCode: 0 });
      expect(log).toMatchObject({ approach, service: 'gms', isValid: false, reason });
      if (reason !== 'nonce_mismatch')
        expect(log.packageName).toBe('packageName' in options ? options.packageName : TEST_PACKAGE);
      // the reason is logged, never sent
      expect(JSON.stringify(body)).not.toContain(reason);
    });
  });

  it('rotates keys: both pairs accepted, then the retired pair is gms_decrypt_failed', async () => {
    const allowlist = createAllowlistRepository(db.db, TEST_SECRETS);
    expect(await allowlist.addAndroid(TEST_PACKAGE, keyPairOf(pair2), {})).toEqual({
      package: 'updated',
      pair: 'added',
      observe: [],
    });
    // adding a pair keeps the policy: the certificate digest still applies
    const [entry] = await allowlist.listAndroid();
    expect(entry!.keys.map((k) => k.id)).toEqual(['pair-2025', 'pair-2026']);
    expect(entry!.certificateDigests.map((d) => Buffer.from(d).toString('hex'))).toEqual([
      Buffer.from(TEST_CERT_DIGEST).toString('hex'),
    ]);

    for (const [, run] of approaches) {
      expect((await run({ keys: pair1 })).body).toMatchObject({ isValid: true });
      expect((await run({ keys: pair2 })).body).toMatchObject({
        isValid: true,
        googleTokenDetails: { packageName: TEST_PACKAGE },
      });
    }

    expect(await allowlist.removeAndroid(TEST_PACKAGE, 'pair-2025')).toBe(true);
    for (const [approach, run] of approaches) {
      const old = await run({ keys: pair1 });
      expect(old.body).toEqual({ isValid: false, statusCode: 0 });
      expect(old.log).toMatchObject({
        approach,
        reason: 'gms_decrypt_failed',
        packageName: TEST_PACKAGE,
      });
      expect((await run({ keys: pair2 })).body).toMatchObject({ isValid: true });
    }

    // removing the package removes its keys: nothing is accepted for it any more
    expect(await allowlist.removeAndroid(TEST_PACKAGE)).toBe(true);
    const gone = await sessionlessVerify({ keys: pair2 });
    expect(gone.log).toMatchObject({ isValid: false, reason: 'gms_package_not_allowed' });
  });

  it('applies a policy change to the next request (minimum verdict raised to strong)', async () => {
    expect((await sessionlessVerify()).body).toMatchObject({ isValid: true });
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(
      TEST_PACKAGE,
      keyPairOf(pair1),
      { minVerdict: 'MEETS_STRONG_INTEGRITY' },
    );
    expect((await sessionlessVerify()).log).toMatchObject({
      isValid: false,
      reason: 'gms_integrity_insufficient',
    });
    const strong = await sessionlessVerify({
      deviceVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY', 'MEETS_STRONG_INTEGRITY'],
    });
    expect(strong.body).toMatchObject({
      isValid: true,
      googleTokenDetails: {
        deviceIntegrityVerdicts: [
          'MEETS_BASIC_INTEGRITY',
          'MEETS_DEVICE_INTEGRITY',
          'MEETS_STRONG_INTEGRITY',
        ],
      },
    });
  });
});
