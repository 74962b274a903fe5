/** The real Android key attestation chains of test/fixtures/android-key, and what a test needs of them. */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeAndroidKeyToken } from '../../src/core/androidKey/androidKeyToken.js';
import { DEFAULT_ANDROID_POLICY } from '../../src/core/gms/defaultAndroidPolicy.js';
import type { AndroidPackagePolicy } from '../../src/core/ports.js';

const DIR = join(import.meta.dirname, '../fixtures/android-key');

export interface AndroidVector {
  id: string;
  chain: string[];
  verifyAt: string;
  challenge: { base64: string };
  leafPublicKey: string;
  /** the independent decoding of the provisioning information extension, when the chain has one */
  provisioningInfo?: { cert: number; decoded: Record<string, number | string | boolean> }[];
  keyDescription: {
    attestationVersion: number;
    attestationSecurityLevel: string;
    softwareEnforced: AuthorizationExtras & {
      attestationApplicationId?: { packages: { name: string }[] };
    };
    hardwareEnforced: AuthorizationExtras & {
      osPatchLevel?: number;
      rootOfTrust?: { deviceLocked: boolean; verifiedBootState: string };
      attestationApplicationId?: { packages: { name: string }[] };
    };
  };
  expected: { verdictAttestationRules: 'accept' | 'reject'; bootStatePolicy: string };
}

/** Tags of the independent decoding the details show (moduleHash as hex). */
interface AuthorizationExtras {
  mlDsaVariant?: number;
  usageCountLimit?: number;
  trustedConfirmationRequired?: true;
  moduleHash?: string;
}

/** The real chains of test/fixtures/android-key. */
export function loadAndroidVectors(): AndroidVector[] {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(DIR, f), 'utf8')) as AndroidVector);
}

export const vectorPackage = (v: AndroidVector) =>
  (v.keyDescription.softwareEnforced.attestationApplicationId ??
    v.keyDescription.hardwareEnforced.attestationApplicationId)!.packages[0]!.name;

export const lockedAndVerified = (v: AndroidVector) =>
  v.expected.bootStatePolicy === 'locked + Verified';

/** The allowlist entry a vector needs: key attestation, unlocked devices allowed when it is one. */
export function vectorPolicy(v: AndroidVector): AndroidPackagePolicy {
  return {
    ...DEFAULT_ANDROID_POLICY,
    packageName: vectorPackage(v),
    keys: [],
    keyAttestation: true,
    allowUnlocked: !lockedAndVerified(v),
  };
}

/** The token a device would send for the vector's chain, over `nonce`. */
export function vectorToken(v: AndroidVector, nonce: Uint8Array): Uint8Array {
  return encodeAndroidKeyToken({
    nonce,
    packageName: vectorPackage(v),
    keyId: createHash('sha256').update(Buffer.from(v.leafPublicKey, 'base64')).digest(),
    certificateChain: v.chain.map((c) => Buffer.from(c, 'base64')),
  });
}
