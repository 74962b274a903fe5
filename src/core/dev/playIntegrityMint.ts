/**
 * Play Integrity tokens sealed with a deployment's test-only key pair: a compact JWE (A256KW,
 * A256GCM) around a JWS (ES256) of a classic-request verdict, laid out as Google documents it.
 * The pair's signing half plays Google's part; only test API keys try test-only pairs.
 */
import { createHash, createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { CompactEncrypt, CompactSign } from 'jose';
import type { MinVerdict } from '../ports.js';
import type { RecallBit } from '../gms/gmsTokenDetails.js';

/** A test-only pair with the signing key Google would hold. */
export interface TestPlayKeys {
  /** fingerprint, as `allowlist list` shows pairs */
  id: string;
  /** 32 raw bytes (AES-256) */
  decryptionKey: Uint8Array;
  /** DER SPKI of the EC P-256 public key */
  verificationKey: Uint8Array;
  /** PKCS#8 DER of the EC P-256 private key */
  signingKey: Uint8Array;
}

/** A new test-only pair; its id is the same fingerprint `allowlist add android` gives a pair. */
export function createTestPlayKeys(): TestPlayKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const decryptionKey = new Uint8Array(randomBytes(32));
  const verificationKey = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
  const id = createHash('sha256')
    .update(decryptionKey)
    .update(verificationKey)
    .digest('hex')
    .slice(0, 16);
  return {
    id,
    decryptionKey,
    verificationKey,
    signingKey: new Uint8Array(privateKey.export({ type: 'pkcs8', format: 'der' })),
  };
}

export type Recognition = 'PLAY_RECOGNIZED' | 'UNRECOGNIZED_VERSION' | 'UNEVALUATED';

/** Device verdict lists as Play gives them: a stronger level carries the weaker ones. */
export const DEVICE_VERDICTS: Readonly<Record<MinVerdict, readonly string[]>> = {
  MEETS_BASIC_INTEGRITY: ['MEETS_BASIC_INTEGRITY'],
  MEETS_DEVICE_INTEGRITY: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
  MEETS_STRONG_INTEGRITY: [
    'MEETS_BASIC_INTEGRITY',
    'MEETS_DEVICE_INTEGRITY',
    'MEETS_STRONG_INTEGRITY',
  ],
};

/** The signing-certificate digest minted tokens carry when the package lists none. */
export const DEVELOPMENT_CERT_DIGEST: Uint8Array = new Uint8Array(
  createHash('sha256').update('attest development signing certificate').digest(),
);

export interface VerdictRequest {
  packageName: string;
  /** the final nonce; written base64url without padding, as the device asks for it */
  nonce: Uint8Array;
  issuedAt: Date;
  deviceVerdicts: readonly string[];
  recognition: Recognition;
  /** SHA-256 digests of the signing certificate; none = a made-up one (Google always sends one) */
  certificateDigests: readonly Uint8Array[];
  /** deny-path switches: bind another nonce; name another package in the request */
  wrongNonce?: boolean;
  wrongPackage?: boolean;
  /** Play device recall bits set on the device (written in the month of issuedAt); absent = none */
  recallBits?: readonly RecallBit[];
  /** the newer verdicts, each carried only when given (the licensing verdict: LICENSED when not) */
  verdicts?: MintedVerdicts;
}

/**
 * The verdict fields the package rules read, as `dev mint gms` sets them: any value, a value
 * Google may add later included, so every rule (and an unknown value) can be tried without a
 * device.
 */
export interface MintedVerdicts {
  appLicensingVerdict?: string;
  playProtectVerdict?: string;
  appsDetected?: string[];
  deviceActivityLevel?: string;
  accountActivityLevel?: string;
  locationSpoofingRiskVerdict?: string[];
  legacyDeviceRecognitionVerdict?: string[];
}

/** A classic-request verdict payload. */
export function verdictPayload(r: VerdictRequest): Record<string, unknown> {
  const nonce = r.wrongNonce
    ? createHash('sha256').update('not the final nonce').update(r.nonce).digest()
    : Buffer.from(r.nonce);
  // as Google lays it out: an UNEVALUATED verdict comes without the app's identity
  const digests =
    r.certificateDigests.length > 0 ? r.certificateDigests : [DEVELOPMENT_CERT_DIGEST];
  const appIntegrity: Record<string, unknown> =
    r.recognition === 'UNEVALUATED'
      ? { appRecognitionVerdict: r.recognition }
      : {
          appRecognitionVerdict: r.recognition,
          packageName: r.packageName,
          certificateSha256Digest: digests.map((d) => Buffer.from(d).toString('base64url')),
          versionCode: '1',
        };
  const v: MintedVerdicts = r.verdicts ?? {};
  const environmentDetails = {
    ...(v.playProtectVerdict !== undefined ? { playProtectVerdict: v.playProtectVerdict } : {}),
    ...(v.appsDetected ? { appAccessRiskVerdict: { appsDetected: [...v.appsDetected] } } : {}),
    ...(v.locationSpoofingRiskVerdict
      ? { locationSpoofingRiskVerdict: [...v.locationSpoofingRiskVerdict] }
      : {}),
  };
  return {
    requestDetails: {
      requestPackageName: r.wrongPackage ? `${r.packageName}.other` : r.packageName,
      timestampMillis: String(r.issuedAt.getTime()),
      nonce: nonce.toString('base64url'),
    },
    appIntegrity,
    deviceIntegrity: {
      ...(r.deviceVerdicts.length > 0 ? { deviceRecognitionVerdict: [...r.deviceVerdicts] } : {}),
      ...(r.recallBits ? { deviceRecall: deviceRecall(r.recallBits, r.issuedAt) } : {}),
      ...(v.deviceActivityLevel !== undefined
        ? { recentDeviceActivity: { deviceActivityLevel: v.deviceActivityLevel } }
        : {}),
      ...(v.legacyDeviceRecognitionVerdict
        ? { legacyDeviceRecognitionVerdict: [...v.legacyDeviceRecognitionVerdict] }
        : {}),
    },
    accountDetails: {
      appLicensingVerdict: v.appLicensingVerdict ?? 'LICENSED',
      ...(v.accountActivityLevel !== undefined
        ? { accountActivity: { activityLevel: v.accountActivityLevel } }
        : {}),
    },
    ...(Object.keys(environmentDetails).length > 0 ? { environmentDetails } : {}),
  };
}

/**
 * `deviceIntegrity.deviceRecall` as Google lays it out: the three values, and a write month
 * (YYYYMM, UTC) for each bit that is set only.
 */
function deviceRecall(bits: readonly RecallBit[], at: Date): Record<string, unknown> {
  const month = at.getUTCFullYear() * 100 + at.getUTCMonth() + 1;
  const names = { first: 'First', second: 'Second', third: 'Third' } as const;
  const values: Record<string, boolean> = {};
  const writeDates: Record<string, number> = {};
  for (const bit of ['first', 'second', 'third'] as const) {
    values[`bit${names[bit]}`] = bits.includes(bit);
    if (bits.includes(bit)) writeDates[`yyyymm${names[bit]}`] = month;
  }
  return { values, writeDates };
}

/** Seals a verdict as Google does: JWS ES256 with the signing key, inside JWE A256KW/A256GCM. */
export async function sealIntegrityToken(
  keys: Pick<TestPlayKeys, 'decryptionKey' | 'signingKey'>,
  payload: unknown,
): Promise<string> {
  const signingKey = createPrivateKey({
    key: Buffer.from(keys.signingKey),
    format: 'der',
    type: 'pkcs8',
  });
  const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg: 'ES256' })
    .sign(signingKey);
  return new CompactEncrypt(new TextEncoder().encode(jws))
    .setProtectedHeader({ alg: 'A256KW', enc: 'A256GCM' })
    .encrypt(keys.decryptionKey);
}
