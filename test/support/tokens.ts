/**
 * Format-1 tokens for the service tests, and a fake App Attest verifier that really checks
 * something: it accepts only evidence whose `keyId` is 32 bytes and whose `assertion` equals
 * `FAKE_GOOD_ASSERTION`, so a test that expects isValid true can fail.
 */
import { Rejection } from '../../src/core/reasons.js';
import type { PlatformVerifier } from '../../src/core/ports.js';
import { verifyToken, type VerifyInput } from '../../src/core/verify.js';
import { bstr, tmap, tstr, uint, type Bytes } from './cborBytes.js';

export const FAKE_GOOD_ASSERTION = Buffer.from('good assertion');
export const FAKE_APP_ID = 'ABCDE12345.com.example.bank';

/** A valid format-1 token for `service` over `nonce`. */
export function token(
  nonce: Bytes,
  options: { service?: string; evidence?: Bytes | null; v?: Bytes } = {},
): Bytes {
  const service = options.service ?? 'apple';
  const entries: [string, Bytes][] = [
    ['v', options.v ?? uint(1)],
    ['nonce', bstr(nonce)],
    ['device', tmap({ service: tstr(service), model: tstr('iPhone15,2') })],
  ];
  const evidence = options.evidence === undefined ? appleEvidence() : options.evidence;
  if (evidence) entries.push([service, evidence]);
  return tmap(entries);
}

/** Evidence the fake verifier accepts (or not, with `assertion` changed). */
export function appleEvidence(
  keyId: Bytes = new Uint8Array(32).fill(7),
  assertion: Bytes = FAKE_GOOD_ASSERTION,
): Bytes {
  return tmap({ keyId: bstr(keyId), assertion: bstr(assertion) });
}

/** A fake `apple` verifier with a call counter; see the file comment for what it accepts. */
export function fakeAppleVerifier(): PlatformVerifier & { calls: number; nonces: Uint8Array[] } {
  const fake = {
    service: 'apple' as const,
    calls: 0,
    nonces: [] as Uint8Array[],
    async verify(evidence: unknown, ctx: Parameters<PlatformVerifier['verify']>[1]) {
      fake.calls++;
      fake.nonces.push(ctx.nonce);
      ctx.trace.plan(['apple.shape']);
      ctx.trace.current('apple.shape');
      const map = evidence as Map<string, unknown>;
      const keyId = map.get('keyId');
      const assertion = map.get('assertion');
      if (!(keyId instanceof Uint8Array) || keyId.length !== 32)
        throw new Rejection('apple_assertion_malformed', 'keyId must be 32 bytes');
      if (
        !(assertion instanceof Uint8Array) ||
        !Buffer.from(assertion).equals(FAKE_GOOD_ASSERTION)
      ) {
        throw new Rejection('apple_signature_invalid', 'not the good assertion');
      }
      ctx.trace.facts.keyId = Buffer.from(keyId).toString('base64');
      ctx.trace.facts.appId = FAKE_APP_ID;
      ctx.trace.pass('apple.shape', 'fake assertion accepted');
      return {
        service: 'apple' as const,
        appleTokenDetails: {
          keyIdentifier: Buffer.from(keyId).toString('base64'),
          appId: FAKE_APP_ID,
          environment: 'Production' as const,
          assertionCounter: 1,
          platform: 'iOS' as const,
        },
      };
    },
  };
  return fake;
}

/** `verifyToken` with the fake apple verifier, as the app's `verify` dependency. */
export function fakeVerify(fake = fakeAppleVerifier(), now = () => new Date()) {
  return (input: VerifyInput) => verifyToken(input, { now, verifiers: { apple: fake } });
}

export const b64 = (b: Bytes) => Buffer.from(b).toString('base64');
