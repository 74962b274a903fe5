/**
 * The Play verdict tests' one runner: Google's standard example verdict with an edit applied,
 * verified by the real verifier as a classic token (the same verdict with a nonce, sealed with
 * the package keys) or a standard one (answered by a stub decoder), under a package policy.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll } from 'vitest';
import { createGoogleVerifier } from '../../src/core/gms/googleVerifier.js';
import { createMemoryAllowlist } from '../../src/core/memoryStores.js';
import type { AndroidPackagePolicy } from '../../src/core/ports.js';
import { createTestServiceAccount, type TestServiceAccount } from './fakeGoogle.js';
import {
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  mintIntegrityToken,
  runVerifier,
  TEST_PACKAGE,
  type GoogleRun,
  type GoogleTestKeys,
} from './googleFactory.js';
import { standardPayload, type StandardPayload } from './standardPayload.js';

export type VerdictEdit = (p: StandardPayload) => void;
export type TokenKind = 'classic' | 'standard';

/**
 * Makes the package keys and service account once per file (beforeAll) and returns the runner.
 * @param now the verification time (the verdict is issued then)
 * @param nonce the final nonce every token is made over
 */
export function verdictOutcome(now: Date, nonce: Uint8Array) {
  let keys: GoogleTestKeys;
  let sa: TestServiceAccount;
  beforeAll(async () => {
    keys = await createGoogleTestKeys('classic');
    sa = createTestServiceAccount();
  });
  return async function outcome(
    kind: TokenKind,
    policy: Partial<AndroidPackagePolicy>,
    edit?: VerdictEdit,
  ) {
    const payload = standardPayload({ nonce, now, ...(edit ? { edit } : {}) });
    const issued = new Map<string, unknown>();
    const verifier = createGoogleVerifier({
      allowlist: createMemoryAllowlist({
        android: [googlePolicy(keys, { serviceAccount: sa.account, ...policy })],
      }),
      decoder: {
        decode: async ({ integrityToken }) => ({ ok: true, payload: issued.get(integrityToken) }),
      },
    });
    let evidence: Map<string, unknown>;
    if (kind === 'classic') {
      delete payload.requestDetails.requestHash;
      payload.requestDetails.nonce = Buffer.from(nonce).toString('base64url');
      evidence = googleEvidence(
        await mintIntegrityToken({ keys, nonce, now, editPayload: () => payload }),
      );
    } else {
      const token = `standard-${randomBytes(8).toString('hex')}`;
      issued.set(token, payload);
      evidence = new Map<string, unknown>([
        ['packageName', TEST_PACKAGE],
        ['integrityToken', token],
        ['request', 'standard'],
      ]);
    }
    return runVerifier(verifier, evidence, { nonce, now });
  };
}

/** A run as a word (accepted, or the reason), with the run behind it. */
export function withReason(run: GoogleRun): { reason: string; run: GoogleRun } {
  return { reason: run.ok ? 'accepted' : run.reason, run };
}
