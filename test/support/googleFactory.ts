/**
 * Play Integrity tokens minted at test time with throwaway keys: a JWE (A256KW, A256GCM) around a
 * JWS (ES256) of a classic-request verdict, the way Google builds them. No real Google keys or
 * tokens exist in public (see the shared gms vectors README), so every test token comes from here.
 * Options break one thing at a time: a payload field, an algorithm, a header, the compact form.
 */
import { CompactEncrypt, CompactSign, generateKeyPair } from 'jose';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { Rejection, type RejectReason } from '../../src/core/reasons.js';
import { TraceRecorder } from '../../src/core/trace.js';
import type {
  AndroidKeyPair,
  AndroidPackagePolicy,
  PlatformVerifier,
} from '../../src/core/ports.js';
import type { CheckRecord, VerifyFacts } from '../../src/core/outcome.js';
import type { PlatformDetails } from '../../src/core/kinds.js';

type CryptoKey = webcrypto.CryptoKey;

/** The package the tests allowlist unless they say otherwise. */
export const TEST_PACKAGE = 'com.example.attest';

/** SHA-256 of a made-up signing certificate: the digest tokens carry and policies allow by default. */
export const TEST_CERT_DIGEST: Uint8Array = new Uint8Array(
  createHash('sha256').update('attest test signing certificate').digest(),
);

/** One throwaway Play Integrity key pair, plus the signing half that Google would hold. */
export interface GoogleTestKeys {
  id: string;
  /** 32 raw bytes (AES-256) */
  decryptionKey: Uint8Array;
  /** DER SPKI of the EC P-256 public key */
  verificationKey: Uint8Array;
  /** EC P-256 private key (Google's side) */
  signingKey: CryptoKey;
}

let pairCounter = 0;

/**
 * Makes a fresh key pair.
 * @param id the pair id the policy will carry
 */
export async function createGoogleTestKeys(id = `pair-${++pairCounter}`): Promise<GoogleTestKeys> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const verificationKey = new Uint8Array(
    await webcrypto.subtle.exportKey('spki', publicKey as CryptoKey),
  );
  return {
    id,
    decryptionKey: new Uint8Array(randomBytes(32)),
    verificationKey,
    signingKey: privateKey as CryptoKey,
  };
}

/** The allowlist form of test keys. */
export function keyPairOf(keys: GoogleTestKeys): AndroidKeyPair {
  return { id: keys.id, decryptionKey: keys.decryptionKey, verificationKey: keys.verificationKey };
}

/**
 * An allowlist entry for `TEST_PACKAGE` holding the given pairs, the test certificate digest and
 * the service defaults (DEVICE integrity, recognized builds only, 600 s).
 * @param keys the pairs, in allowlist order
 * @param overrides any field to change
 */
export function googlePolicy(
  keys: GoogleTestKeys | readonly GoogleTestKeys[],
  overrides: Partial<AndroidPackagePolicy> = {},
): AndroidPackagePolicy {
  const list = Array.isArray(keys) ? (keys as readonly GoogleTestKeys[]) : [keys as GoogleTestKeys];
  return {
    packageName: TEST_PACKAGE,
    keys: list.map(keyPairOf),
    certificateDigests: [TEST_CERT_DIGEST],
    minVerdict: 'MEETS_DEVICE_INTEGRITY',
    allowUnrecognized: false,
    maxAgeSeconds: 600,
    ...overrides,
  };
}

/** What goes into the verdict. `null` leaves a field out. */
export interface PayloadOptions {
  /** the final nonce; encoded base64url without padding, as the device does */
  nonce: Uint8Array;
  /** the issue time (`timestampMillis`) */
  now: Date;
  packageName?: string;
  /** defaults to `packageName` */
  requestPackageName?: string;
  /** defaults to `packageName`; `null` = absent */
  appPackageName?: string | null;
  appRecognitionVerdict?: string;
  /** `null` = absent */
  certificateDigests?: readonly Uint8Array[] | null;
  /** `null` = absent (Google sends `deviceIntegrity: {}` when nothing is met) */
  deviceVerdicts?: readonly string[] | null;
  /** replaces the string form of `now` */
  timestampMillis?: string | number;
  /** replaces the encoded nonce text */
  nonceText?: string;
}

/** A classic-request Play Integrity verdict, laid out as Google documents it. */
export function playIntegrityPayload(o: PayloadOptions): Record<string, unknown> {
  const packageName = o.packageName ?? TEST_PACKAGE;
  const appIntegrity: Record<string, unknown> = {
    appRecognitionVerdict: o.appRecognitionVerdict ?? 'PLAY_RECOGNIZED',
  };
  const appPackageName = o.appPackageName === undefined ? packageName : o.appPackageName;
  if (appPackageName !== null) appIntegrity.packageName = appPackageName;
  const digests = o.certificateDigests === undefined ? [TEST_CERT_DIGEST] : o.certificateDigests;
  if (digests !== null)
    appIntegrity.certificateSha256Digest = digests.map((d) => Buffer.from(d).toString('base64url'));
  appIntegrity.versionCode = '42';
  const verdicts = o.deviceVerdicts === undefined ? ['MEETS_DEVICE_INTEGRITY'] : o.deviceVerdicts;
  return {
    requestDetails: {
      requestPackageName: o.requestPackageName ?? packageName,
      timestampMillis: o.timestampMillis ?? String(o.now.getTime()),
      nonce: o.nonceText ?? Buffer.from(o.nonce).toString('base64url'),
    },
    appIntegrity,
    deviceIntegrity: verdicts === null ? {} : { deviceRecognitionVerdict: [...verdicts] },
    accountDetails: { appLicensingVerdict: 'LICENSED' },
  };
}

export type JweAlg =
  'A256KW' | 'A128KW' | 'dir' | 'RSA-OAEP' | 'RSA-OAEP-256' | 'PBES2-HS256+A128KW';
export type JweEnc = 'A256GCM' | 'A128GCM' | 'A256CBC-HS512';
export type JwsAlg = 'ES256' | 'ES384' | 'RS256' | 'HS256' | 'none';

export interface MintOptions extends PayloadOptions {
  /** the pair that seals and signs (Google's side) */
  keys: GoogleTestKeys;
  /** edits or replaces the payload object before signing */
  editPayload?: (payload: Record<string, unknown>) => unknown;
  /** signs this exact text (or these bytes) instead of a JSON payload */
  payloadText?: string | Uint8Array;
  jws?: {
    alg?: JwsAlg;
    /** signs with another pair's key */
    signWith?: GoogleTestKeys;
    /** adds a critical extension header the verifier does not know */
    crit?: boolean;
    /** the compact JWS is cut or padded with junk to this many segments */
    segments?: number;
  };
  jwe?: {
    alg?: JweAlg;
    enc?: JweEnc;
    /** seals with another pair's key */
    encryptWith?: GoogleTestKeys;
    crit?: boolean;
    /** `zip: "DEF"` (jose compresses) */
    zip?: boolean;
    /** flips a bit of the GCM authentication tag */
    tamperTag?: boolean;
    /** the compact JWE is cut or padded with junk to this many segments */
    segments?: number;
  };
}

const CRIT_NAME = 'urn:example:unknown';

/** Mints a compact JWE integrity token. */
export async function mintIntegrityToken(o: MintOptions): Promise<string> {
  const payload =
    o.payloadText !== undefined
      ? typeof o.payloadText === 'string'
        ? new TextEncoder().encode(o.payloadText)
        : o.payloadText
      : new TextEncoder().encode(JSON.stringify(applyEdit(playIntegrityPayload(o), o.editPayload)));
  let jws = await signJws(payload, o.jws?.signWith ?? o.keys, o.jws ?? {});
  if (o.jws?.segments !== undefined) jws = resegment(jws, o.jws.segments);
  let jwe = await sealJwe(jws, o.jwe?.encryptWith ?? o.keys, o.jwe ?? {});
  if (o.jwe?.tamperTag) jwe = tamperTag(jwe);
  if (o.jwe?.segments !== undefined) jwe = resegment(jwe, o.jwe.segments);
  return jwe;
}

function applyEdit(payload: Record<string, unknown>, edit: MintOptions['editPayload']): unknown {
  if (!edit) return payload;
  const replaced = edit(payload);
  return replaced === undefined ? payload : replaced;
}

async function signJws(
  payload: Uint8Array,
  keys: GoogleTestKeys,
  o: NonNullable<MintOptions['jws']>,
): Promise<string> {
  const alg = o.alg ?? 'ES256';
  const extra = o.crit ? { crit: [CRIT_NAME], [CRIT_NAME]: true } : {};
  if (alg === 'none') {
    // jose will not produce an unsecured JWS; a test may build one by hand
    const header = Buffer.from(JSON.stringify({ alg: 'none', ...extra })).toString('base64url');
    return `${header}.${Buffer.from(payload).toString('base64url')}.`;
  }
  const key =
    alg === 'ES256'
      ? keys.signingKey
      : alg === 'HS256'
        ? keys.verificationKey // the classic confusion: HMAC keyed with the public key bytes
        : alg === 'ES384'
          ? (await generateKeyPair('ES384')).privateKey
          : (await rsaKeys('RS256')).privateKey;
  return new CompactSign(payload)
    .setProtectedHeader({ alg, ...extra })
    .sign(key, o.crit ? { crit: { [CRIT_NAME]: true } } : undefined);
}

async function sealJwe(
  jws: string,
  keys: GoogleTestKeys,
  o: NonNullable<MintOptions['jwe']>,
): Promise<string> {
  const alg = o.alg ?? 'A256KW';
  const enc = o.enc ?? 'A256GCM';
  const header = {
    alg,
    enc,
    ...(o.zip ? { zip: 'DEF' } : {}),
    ...(o.crit ? { crit: [CRIT_NAME], [CRIT_NAME]: true } : {}),
  };
  const key =
    alg === 'A256KW' || alg === 'dir' || alg === 'PBES2-HS256+A128KW'
      ? keys.decryptionKey // `dir` with the AES key itself: what a confused verifier would accept
      : alg === 'A128KW'
        ? keys.decryptionKey.slice(0, 16)
        : (await rsaKeys(alg)).publicKey;
  return new CompactEncrypt(new TextEncoder().encode(jws))
    .setProtectedHeader(header)
    .encrypt(key, o.crit ? { crit: { [CRIT_NAME]: true } } : undefined);
}

const rsaCache = new Map<string, Promise<{ publicKey: CryptoKey; privateKey: CryptoKey }>>();

/** RSA keys are slow to make: one per algorithm per test file. */
export function rsaKeys(
  alg: 'RS256' | 'RSA-OAEP' | 'RSA-OAEP-256',
): Promise<{ publicKey: CryptoKey; privateKey: CryptoKey }> {
  let keys = rsaCache.get(alg);
  if (!keys) {
    keys = generateKeyPair(alg, { modulusLength: 2048 }) as Promise<{
      publicKey: CryptoKey;
      privateKey: CryptoKey;
    }>;
    rsaCache.set(alg, keys);
  }
  return keys;
}

/** Flips one bit of the JWE authentication tag (fifth segment). */
export function tamperTag(jwe: string): string {
  const parts = jwe.split('.');
  const tag = Buffer.from(parts[4] ?? '', 'base64url');
  tag[0] = (tag[0] ?? 0) ^ 0x01;
  parts[4] = tag.toString('base64url');
  return parts.join('.');
}

/** Cuts a compact serialization to `count` segments, or pads it with junk segments up to `count`. */
export function resegment(compact: string, count: number): string {
  const parts = compact.split('.');
  while (parts.length > count) parts.pop();
  while (parts.length < count) parts.push('AAAA');
  return parts.join('.');
}

/** A random 32-byte final nonce. */
export function randomNonce(bytes = 32): Uint8Array {
  return new Uint8Array(randomBytes(bytes));
}

/** The `gms` evidence map as the strict CBOR decoder hands it to the verifier. */
export function googleEvidence(
  integrityToken: string,
  packageName = TEST_PACKAGE,
): Map<string, unknown> {
  return new Map<string, unknown>([
    ['packageName', packageName],
    ['integrityToken', integrityToken],
  ]);
}

/** What one verifier call came to, with the trace as `verify-file` would print it. */
export type GoogleRun =
  | { ok: true; details: PlatformDetails; checks: CheckRecord[]; facts: VerifyFacts }
  | { ok: false; reason: RejectReason; detail: string; checks: CheckRecord[]; facts: VerifyFacts };

/**
 * Runs a platform verifier the way `verifyToken` does: a `Rejection` becomes `{ ok: false }`,
 * anything else is thrown.
 */
export async function runVerifier(
  verifier: PlatformVerifier,
  evidence: unknown,
  ctx: { nonce: Uint8Array; now: Date },
): Promise<GoogleRun> {
  const trace = new TraceRecorder();
  try {
    const details = await verifier.verify(evidence, { ...ctx, trace });
    return { ok: true, details, checks: trace.finish(), facts: trace.facts };
  } catch (err) {
    if (!(err instanceof Rejection)) throw err;
    return {
      ok: false,
      reason: err.reason,
      detail: err.detail,
      checks: trace.finish(err),
      facts: trace.facts,
    };
  }
}
