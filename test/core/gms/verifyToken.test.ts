/** End to end: a CBOR token through `verifyToken`, the path the server and `verify-file` share. */
import { Encoder } from 'cbor-x';
import { beforeAll, describe, expect, it } from 'vitest';
import { GOOGLE_CHECKS, createGoogleVerifier } from '../../../src/core/gms/googleVerifier.js';
import { VERDICT_CHECKS } from '../../../src/core/gms/verdictResult.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { ENVELOPE_CHECKS, verifyToken, type VerifyDeps } from '../../../src/core/verify.js';
import {
  TEST_PACKAGE,
  createGoogleTestKeys,
  googlePolicy,
  mintIntegrityToken,
  randomNonce,
  type GoogleTestKeys,
} from '../../support/googleFactory.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
// Uint8Array as a plain byte string (not tag 64), maps with text keys: what a device SDK sends
const cbor = new Encoder({ useRecords: false, tagUint8Array: false });

let keys: GoogleTestKeys;
let deps: VerifyDeps;

beforeAll(async () => {
  keys = await createGoogleTestKeys();
  deps = {
    now: () => NOW,
    verifiers: {
      gms: createGoogleVerifier({
        allowlist: createMemoryAllowlist({ android: [googlePolicy(keys)] }),
      }),
    },
  };
});

function tokenBytes(fields: { nonce: Uint8Array; gms?: unknown }): Uint8Array {
  return new Uint8Array(
    cbor.encode({
      v: 1,
      nonce: fields.nonce,
      device: { service: 'gms', model: 'Pixel 9' },
      ...('gms' in fields ? { gms: fields.gms } : {}),
    }),
  );
}

const reason = (o: VerifyOutcome) => (o.ok ? 'accepted' : o.reason);

describe('verifyToken with the gms verifier', () => {
  it('accepts a valid token and reports every check', async () => {
    const nonce = randomNonce();
    const integrityToken = await mintIntegrityToken({
      keys,
      nonce,
      now: new Date(NOW.getTime() - 5_000),
    });
    const outcome = await verifyToken(
      {
        token: tokenBytes({ nonce, gms: { packageName: TEST_PACKAGE, integrityToken } }),
        expectedNonce: nonce,
      },
      deps,
    );
    expect(outcome).toMatchObject({
      ok: true,
      details: {
        service: 'gms',
        googleTokenDetails: {
          packageName: TEST_PACKAGE,
          deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
          timestampMillis: NOW.getTime() - 5_000,
        },
      },
      facts: { service: 'gms', packageName: TEST_PACKAGE },
    });
    const required = (id: string) => !(VERDICT_CHECKS as readonly string[]).includes(id);
    expect(outcome.checks.map((c) => `${c.id}:${c.status}`)).toEqual(
      [...ENVELOPE_CHECKS, ...GOOGLE_CHECKS].map((id) => `${id}:${required(id) ? 'pass' : 'skip'}`),
    );
  });

  it('accepts a sessionless nonce of 375 bytes, the most Play Integrity can carry', async () => {
    const nonce = randomNonce(375);
    const integrityToken = await mintIntegrityToken({ keys, nonce, now: NOW });
    expect(
      reason(
        await verifyToken(
          {
            token: tokenBytes({ nonce, gms: { packageName: TEST_PACKAGE, integrityToken } }),
            expectedNonce: nonce,
          },
          deps,
        ),
      ),
    ).toBe('accepted');
  });

  it('rejects a token whose Play nonce is not the envelope nonce', async () => {
    const nonce = randomNonce();
    const integrityToken = await mintIntegrityToken({ keys, nonce: randomNonce(), now: NOW });
    const outcome = await verifyToken(
      {
        token: tokenBytes({ nonce, gms: { packageName: TEST_PACKAGE, integrityToken } }),
        expectedNonce: nonce,
      },
      deps,
    );
    expect(reason(outcome)).toBe('gms_nonce_mismatch');
    expect(outcome.checks.find((c) => c.status === 'fail')?.id).toBe('gms.nonce');
  });

  it('checks the Play nonce even when verify-file has no expected nonce', async () => {
    const nonce = randomNonce();
    const integrityToken = await mintIntegrityToken({ keys, nonce: randomNonce(), now: NOW });
    expect(
      reason(
        await verifyToken(
          {
            token: tokenBytes({ nonce, gms: { packageName: TEST_PACKAGE, integrityToken } }),
            expectedNonce: null,
          },
          deps,
        ),
      ),
    ).toBe('gms_nonce_mismatch');
  });

  it('rejects an envelope nonce that is not the final nonce before opening the Play token', async () => {
    const nonce = randomNonce();
    const integrityToken = await mintIntegrityToken({ keys, nonce, now: NOW });
    const outcome = await verifyToken(
      {
        token: tokenBytes({ nonce, gms: { packageName: TEST_PACKAGE, integrityToken } }),
        expectedNonce: randomNonce(),
      },
      deps,
    );
    expect(reason(outcome)).toBe('nonce_mismatch');
  });

  it('rejects a package that is not allowlisted and names it in the facts', async () => {
    const nonce = randomNonce();
    const integrityToken = await mintIntegrityToken({
      keys,
      nonce,
      now: NOW,
      packageName: 'com.example.unknown',
    });
    const outcome = await verifyToken(
      {
        token: tokenBytes({ nonce, gms: { packageName: 'com.example.unknown', integrityToken } }),
        expectedNonce: nonce,
      },
      deps,
    );
    expect(reason(outcome)).toBe('gms_package_not_allowed');
    expect(outcome.facts.packageName).toBe('com.example.unknown');
  });

  it.each([
    ['no gms map', undefined],
    ['a gms map without the token', { packageName: TEST_PACKAGE }],
    [
      'an integrity token in bytes',
      { packageName: TEST_PACKAGE, integrityToken: new Uint8Array(8) },
    ],
    [
      'an integrity token over 16 KiB',
      { packageName: TEST_PACKAGE, integrityToken: 'x'.repeat(16 * 1024 + 1) },
    ],
  ])('rejects %s as token_malformed', async (_, gms) => {
    const nonce = randomNonce();
    const outcome = await verifyToken(
      { token: tokenBytes(gms === undefined ? { nonce } : { nonce, gms }), expectedNonce: nonce },
      deps,
    );
    expect(reason(outcome)).toBe('token_malformed');
  });
});
