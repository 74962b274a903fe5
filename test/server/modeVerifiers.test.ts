/**
 * Test-mode verifiers re-read a package cached without a test-only pair (so a token `dev mint gms`
 * just made verifies at once), at most once a second per package: the reload empties the cache
 * live requests share, and before the limit every test-key request for such a package was one.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { createMemoryAllowlist } from '../../src/core/memoryStores.js';
import type { AllowlistReader } from '../../src/core/ports.js';
import { verifyToken } from '../../src/core/verify.js';
import { createModeVerifiers } from '../../src/server/modeVerifiers.js';
import {
  createGoogleTestKeys,
  googlePolicy,
  randomNonce,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { gmsToken } from '../support/verifyFileTokens.js';

let keys: GoogleTestKeys;
beforeAll(async () => {
  keys = await createGoogleTestKeys();
});

/** an allowlist whose package has live pairs only, counting forced reloads */
function countingAllowlist(): AllowlistReader & { invalidate(): void; reloads: number } {
  const inner = createMemoryAllowlist({ android: [googlePolicy(keys)] });
  return Object.assign(inner, {
    reloads: 0,
    invalidate() {
      this.reloads++;
    },
  });
}

async function verifyGms(
  verifiersFor: ReturnType<typeof createModeVerifiers>,
  mode: 'live' | 'test',
) {
  const nonce = randomNonce();
  const token = gmsToken({
    nonce,
    packageName: TEST_PACKAGE,
    integrityToken: 'not.a.real.token.at-all',
  });
  const outcome = await verifyToken(
    { token, expectedNonce: nonce },
    { now: () => new Date(), verifiers: await verifiersFor(mode) },
  );
  return outcome.ok ? 'accepted' : outcome.reason;
}

describe('test-mode allowlist re-reads', () => {
  it('re-read a package without a test pair at most once a second, and never for live keys', async () => {
    const allowlist = countingAllowlist();
    let clock = 1_000_000;
    const verifiersFor = createModeVerifiers({
      allowlist,
      appleKeys: {
        find: async () => null,
        register: async () => false,
        raiseCounter: async () => false,
      },
      appleRoots: defaultAppleRoots(),
      devRoot: async () => null,
      ttlMs: 5_000,
      now: () => clock,
    });
    for (let i = 0; i < 50; i++) expect(await verifyGms(verifiersFor, 'live')).not.toBe('accepted');
    expect(allowlist.reloads).toBe(0);

    for (let i = 0; i < 50; i++) expect(await verifyGms(verifiersFor, 'test')).not.toBe('accepted');
    expect(allowlist.reloads).toBe(1);
    clock += 999;
    await verifyGms(verifiersFor, 'test');
    expect(allowlist.reloads).toBe(1);
    clock += 1;
    await verifyGms(verifiersFor, 'test');
    expect(allowlist.reloads).toBe(2);
  });
});
