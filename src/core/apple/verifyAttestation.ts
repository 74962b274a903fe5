/**
 * App Attest attestation verification: Apple's "Validating apps that connect to your server",
 * steps 1 to 9, grouped into the seven checks of docs/token-format.md section 5. The step comments
 * below use Apple's numbering so the code can be held against Apple's page.
 */
import type { KeyObject, X509Certificate } from 'node:crypto';
import { CborError, decodeStrictCbor, isBytes, isMap } from '../cbor.js';
import { checkAppScope, type AppScope } from '../appScope.js';
import { Rejection } from '../reasons.js';
import type { AllowlistReader, AppleAppPolicy } from '../ports.js';
import type { AppleEnvironment, ApplePlatform } from './appleTokenDetails.js';
import type { Trace } from '../outcome.js';
import { keyPlatform, platformProblem } from './keyPlatform.js';
import { appAttestKeyIdOfPoint, p256Point, p256PointOfSpki, p256Spki } from './appAttestKeyId.js';
import { environmentAllowed, environmentFromAaguid } from './appleEnvironment.js';
import { appIdHash } from './appIdHash.js';
import { type AttestationAuthenticatorData, parseAuthenticatorData } from './authenticatorData.js';
import type { CertificateChainVerifier } from './certificateChain.js';
import {
  appAttestNonce,
  type LeafNonceAndKey,
  nonceExtensionValue,
  readLeafNonceAndKey,
} from './nonceExtension.js';
import { silentTrace } from './silentTrace.js';
import { type Distribution, distributionProblem, readDistribution } from './appleDistribution.js';
import type { AppleKeyReceipt } from '../ports.js';
import type { ReceiptVerifier } from './verifyReceipt.js';

export const APPLE_ATTESTATION_FORMAT = 'apple-appattest';

/** Check ids of an attestation, in order (stable: `verify-file` prints them, the README lists them). */
export const ATTESTATION_CHECKS = [
  'apple.attestation.format',
  'apple.attestation.chain',
  'apple.attestation.nonce',
  'apple.attestation.keyId',
  'apple.attestation.appId',
  'apple.attestation.counter',
  'apple.attestation.platform',
  'apple.attestation.environment',
  'apple.attestation.distribution',
  'apple.attestation.receipt',
] as const;

// An attestation object nests three levels (map, attStmt, x5c); Apple's are about 5 KiB.
const ATTESTATION_CBOR_LIMITS = { maxDepth: 8, maxBytes: 64 * 1024 };

/** A structurally valid App Attest attestation object (nothing verified yet). */
export interface AttestationObject {
  /** certificates, leaf first, as DER */
  x5c: Uint8Array[];
  /** Apple's receipt for later fraud checks, when present */
  receipt: Uint8Array | null;
  authData: AttestationAuthenticatorData;
}

/**
 * Decodes an attestation object strictly (check 1). Throws `Rejection('apple_attestation_malformed')`.
 * @param bytes the attestation object from `attestKey`
 */
export function parseAttestationObject(bytes: Uint8Array): AttestationObject {
  let root: unknown;
  try {
    root = decodeStrictCbor(bytes, ATTESTATION_CBOR_LIMITS);
  } catch (err) {
    if (err instanceof CborError) throw malformed(`CBOR: ${err.message}`);
    throw err;
  }
  if (!isMap(root)) throw malformed('not a CBOR map');
  const fmt = root.get('fmt');
  if (fmt !== APPLE_ATTESTATION_FORMAT) {
    throw malformed(
      typeof fmt === 'string'
        ? `fmt is "${fmt.slice(0, 32)}", not "${APPLE_ATTESTATION_FORMAT}"`
        : 'fmt is missing',
    );
  }
  const attStmt = root.get('attStmt');
  if (!isMap(attStmt)) throw malformed('attStmt is missing or not a map');
  const x5c = attStmt.get('x5c');
  if (!Array.isArray(x5c) || x5c.length === 0 || !x5c.every(isBytes)) {
    throw malformed('attStmt.x5c is missing or not a list of certificates');
  }
  const receipt = attStmt.get('receipt');
  if (receipt !== undefined && !isBytes(receipt))
    throw malformed('attStmt.receipt is not a byte string');
  const authData = root.get('authData');
  if (!isBytes(authData)) throw malformed('authData is missing or not a byte string');
  return {
    x5c,
    receipt: receipt ?? null,
    authData: parseAuthenticatorData(authData, 'attestation'),
  };
}

export interface AttestationInput {
  /** the attestation object from `attestKey` */
  attestation: Uint8Array;
  /** the key id the token names (32 bytes) */
  keyId: Uint8Array;
  /**
   * the bytes the device appended to authData for the nonce: SHA-256(final nonce) from this
   * service's SDKs, any length from other integrations; `null` skips the nonce check (an
   * attestation sent with an assertion was made at key creation, not for this request)
   */
  clientDataHash: Uint8Array | null;
  /** the verification instant (certificate validity) */
  now: Date;
  /**
   * leave the receipt to `checkAttestationReceipt`: the attestation-plus-assertion shape checks it
   * only after the assertion verified (the receipt is covered by no signature; the cheap checks
   * that can reject a replayed attestation come first)
   */
  receiptLater?: boolean;
}

export interface AttestationDeps {
  chain: CertificateChainVerifier;
  allowlist: AllowlistReader;
  /**
   * the API key's apps. Checked here only when the nonce check bound authData to Apple's
   * certificate (registration); with an assertion, the assertion's own app ID check does it
   */
  appScope?: AppScope;
  trace?: Trace;
  /** checks the attestation's receipt; absent = the receipt is kept unchecked */
  receipts?: ReceiptVerifier;
}

/** What a verified attestation establishes about its key. */
export interface VerifiedAttestation {
  keyId: Uint8Array;
  /** the attested public key as DER SubjectPublicKeyInfo (what the key store keeps) */
  publicKey: Uint8Array;
  publicKeyObject: KeyObject;
  appId: string;
  environment: AppleEnvironment;
  authData: AttestationAuthenticatorData;
  leaf: X509Certificate;
  /** iOS 27+: how the app was distributed, from authData's extensions */
  distribution: Distribution;
  /** where the key was made: macOS by the leaf's key access-control extension */
  platform: ApplePlatform;
  /** the attestation's receipt with what its check found, or null when it carries none */
  receipt: AppleKeyReceipt | null;
  /** the receipt's bytes, unchecked (for `checkAttestationReceipt`) */
  receiptBytes: Uint8Array | null;
  /** whether the app entry rejects a key without a valid receipt */
  requireReceipt: boolean;
}

/**
 * Runs the seven attestation checks in order; the first failure throws its `Rejection`.
 * @param input the attestation, key id, clientDataHash and instant
 * @param deps chain verifier (trust roots), allowlist, and the trace to record steps in
 */
export async function verifyAttestation(
  input: AttestationInput,
  deps: AttestationDeps,
): Promise<VerifiedAttestation> {
  const trace = deps.trace ?? silentTrace();

  // Attestation step (format): the object decodes strictly, fmt apple-appattest, x5c and authData present
  trace.current('apple.attestation.format');
  const attestation = parseAttestationObject(input.attestation);
  const { authData } = attestation;
  trace.pass(
    'apple.attestation.format',
    `strict CBOR, fmt "${APPLE_ATTESTATION_FORMAT}", ${attestation.x5c.length} certificates, authData ${authData.bytes.length} bytes`,
  );

  // Attestation step 1: x5c chains to a configured root, every certificate valid at `now`
  trace.current('apple.attestation.chain');
  const leaf = deps.chain.verify(attestation.x5c, input.now);
  trace.pass(
    'apple.attestation.chain',
    `leaf, intermediate and configured root verified and valid at ${input.now.toISOString()}`,
  );

  // Attestation steps 2-4: nonce = SHA-256(authData || clientDataHash) is in the leaf's extension
  let leafFields: LeafNonceAndKey | null = null;
  if (input.clientDataHash === null) {
    trace.skip(
      'apple.attestation.nonce',
      'not checked: this attestation was made at key creation; the assertion carries the freshness',
    );
  } else {
    trace.current('apple.attestation.nonce');
    // the bytes OpenSSL verified (the chain check also refuses an x5c[0] that differs from them)
    leafFields = readLeafNonceAndKey(leaf.raw);
    const actual = leafFields.nonceExtension;
    if (!actual)
      throw new Rejection(
        'apple_nonce_mismatch',
        'the leaf certificate has no App Attest nonce extension',
      );
    const expected = nonceExtensionValue(appAttestNonce(authData.bytes, input.clientDataHash));
    if (!actual.equals(expected)) {
      throw new Rejection(
        'apple_nonce_mismatch',
        `the leaf's nonce is not SHA-256(authData || clientDataHash) for this ${input.clientDataHash.length}-byte clientDataHash`,
      );
    }
    trace.pass(
      'apple.attestation.nonce',
      `the leaf's nonce equals SHA-256(authData || clientDataHash), clientDataHash ${input.clientDataHash.length} bytes`,
    );
  }

  // Attestation step 5: SHA-256 of the leaf's public key (uncompressed point) is the key id
  // Attestation step 9: credentialId is the key id too
  trace.current('apple.attestation.keyId');
  const publicKeyObject = leaf.publicKey;
  // the SPKI the nonce step decoded is the key's own DER (OpenSSL read the same bytes)
  const point =
    (leafFields?.spki && p256PointOfSpki(leafFields.spki)) ?? p256Point(publicKeyObject);
  if (!point) throw new Rejection('apple_key_id_mismatch', 'the leaf key is not an EC P-256 key');
  if (!appAttestKeyIdOfPoint(point).equals(input.keyId))
    throw new Rejection(
      'apple_key_id_mismatch',
      "the token's keyId is not the hash of the leaf certificate's key",
    );
  if (!Buffer.from(authData.credentialId).equals(input.keyId)) {
    throw new Rejection(
      'apple_key_id_mismatch',
      `authData credentialId (${authData.credentialId.length} bytes) differs from keyId`,
    );
  }
  trace.pass('apple.attestation.keyId', 'keyId is SHA-256 of the leaf key and equals credentialId');

  // Attestation step 6: rpIdHash is SHA-256 of an allowlisted App ID
  trace.current('apple.attestation.appId');
  const app = await findAppByRpIdHash(deps.allowlist, authData.rpIdHash);
  if (!app) throw new Rejection('apple_app_not_allowed', 'rpIdHash matches no allowlisted App ID');
  trace.facts.appId = app.appId;
  if (input.clientDataHash !== null) checkAppScope(deps.appScope, app.appId, 'app ID');
  trace.pass('apple.attestation.appId', `rpIdHash is SHA-256 of allowlisted "${app.appId}"`);
  trace.observe(app.observe ?? []);

  // Attestation step 7: a new key has never signed, so its counter is 0
  trace.current('apple.attestation.counter');
  if (authData.counter !== 0)
    throw new Rejection('apple_counter_invalid', `signCount is ${authData.counter}, not 0`);
  trace.pass('apple.attestation.counter', 'signCount is 0');

  // macOS 27: a Mac key's leaf carries its access-control blob; its presence names the platform
  trace.current('apple.attestation.platform');
  const platformRead = keyPlatform(leafFields ?? readLeafNonceAndKey(leaf.raw));
  if (!platformRead.ok) throw malformed(platformRead.problem);
  const { platform } = platformRead;
  trace.facts.platform = platform;
  const platformRefusal = platformProblem(app, platform);
  if (platformRefusal)
    trace.policyFailed('apple.attestation.platform', 'apple_platform_not_allowed', platformRefusal);
  else
    trace.pass(
      'apple.attestation.platform',
      platform === 'macOS'
        ? `macOS key (key access-control extension, ${platformRead.bytes} bytes)${app.platforms?.length ? `; "${app.appId}" allows ${app.platforms.join(', ')}` : ''}`
        : `iOS key (no key access-control extension)${app.platforms?.length ? `; "${app.appId}" allows ${app.platforms.join(', ')}` : ''}`,
    );

  // Attestation step 8: aaguid names the environment, which the App ID must allow
  trace.current('apple.attestation.environment');
  const environment = environmentFromAaguid(authData.aaguid);
  if (!environment)
    throw new Rejection(
      'apple_environment_not_allowed',
      'aaguid is neither "appattestdevelop" nor "appattest" + 7 zero bytes',
    );
  trace.facts.environment = environment;
  if (!environmentAllowed(app.env, environment)) {
    trace.policyFailed(
      'apple.attestation.environment',
      'apple_environment_not_allowed',
      `"${app.appId}" is allowlisted for ${app.env} keys; this key is ${environment}`,
    );
  } else
    trace.pass(
      'apple.attestation.environment',
      `${environment} key; "${app.appId}" allows ${app.env}`,
    );

  // iOS 27: the distribution the device reports (authData is covered by the nonce) fits the app entry
  trace.current('apple.attestation.distribution');
  const distribution = readDistribution(authData.extensions);
  trace.facts.validationCategory = distribution.validationCategory ?? undefined;
  const distributionRejection = distributionProblem(app, distribution);
  if (distributionRejection)
    trace.policyFailed(
      'apple.attestation.distribution',
      'apple_distribution_not_allowed',
      distribution.problem
        ? `${distributionRejection} (${distribution.problem})`
        : distributionRejection,
    );
  else trace.pass('apple.attestation.distribution', describeDistribution(distribution));

  const attested: VerifiedAttestation = {
    keyId: input.keyId,
    publicKey: new Uint8Array(p256Spki(point)),
    publicKeyObject,
    appId: app.appId,
    environment,
    authData,
    leaf,
    distribution: {
      validationCategory: distribution.validationCategory,
      bundleVersion: distribution.bundleVersion,
    },
    platform,
    receipt: null,
    receiptBytes: attestation.receipt,
    requireReceipt: app.requireReceipt === true,
  };
  if (!input.receiptLater)
    attested.receipt = await checkAttestationReceipt(attested, deps, input.now);
  return attested;
}

/**
 * The attestation's receipt check (Apple's "Assessing fraud risk"): the receipt is Apple's, for
 * this key and App ID, type ATTEST. Missing or invalid, it is reported (facts) and throws
 * `Rejection('apple_receipt_invalid')` only under the app's requireReceipt (unless the app observes
 * that rule: the key then registers with its receipt's problem kept). Runs last, after every
 * check that costs less, just before the key is registered.
 * @param attested what the attestation's other checks established
 * @param deps the receipt verifier and the trace
 * @param now the verification instant
 */
export async function checkAttestationReceipt(
  attested: VerifiedAttestation,
  deps: Pick<AttestationDeps, 'receipts' | 'trace'>,
  now: Date,
): Promise<AppleKeyReceipt | null> {
  const trace = deps.trace ?? silentTrace();
  const { appId } = attested;
  trace.current('apple.attestation.receipt');
  const receipt = await checkReceipt(
    attested.receiptBytes,
    appId,
    attested.leaf.raw,
    now,
    deps.receipts,
  );
  trace.facts.receipt = receipt.outcome;
  if (receipt.problem) trace.facts.receiptProblem = receipt.problem;
  if (receipt.outcome !== 'valid') {
    const what =
      receipt.outcome === 'missing' ? 'no receipt' : `receipt invalid: ${receipt.problem}`;
    if (attested.requireReceipt)
      trace.policyFailed(
        'apple.attestation.receipt',
        'apple_receipt_invalid',
        `${what} ("${appId}" requires a valid receipt)`,
      );
    else trace.skip('apple.attestation.receipt', `${what} (kept; "${appId}" does not require one)`);
  } else {
    trace.pass(
      'apple.attestation.receipt',
      `ATTEST receipt for this key, created ${receipt.record!.creationTime!.toISOString()}, chains to Apple Root CA - G3`,
    );
  }
  return receipt.record;
}

async function checkReceipt(
  receiptBytes: Uint8Array | null,
  appId: string,
  leafDer: Uint8Array,
  now: Date,
  receipts: ReceiptVerifier | undefined,
): Promise<{
  outcome: 'valid' | 'missing' | 'invalid';
  problem?: string;
  record: AppleKeyReceipt | null;
}> {
  if (!receiptBytes || receiptBytes.length === 0)
    return { outcome: 'missing', problem: 'the attestation carries no receipt', record: null };
  const bytes = new Uint8Array(receiptBytes);
  if (!receipts)
    return {
      outcome: 'invalid',
      problem: 'receipt validation is off',
      record: {
        bytes,
        problem: 'not checked',
        type: null,
        creationTime: null,
        notBefore: null,
        expirationTime: null,
        riskMetric: null,
      },
    };
  const verdict = await receipts.verify(
    bytes,
    { type: 'ATTEST', appId, attestedCertificate: leafDer },
    now,
  );
  const f = verdict.facts;
  const record: AppleKeyReceipt = {
    bytes,
    problem: verdict.valid ? null : verdict.problem,
    type: f?.type ?? null,
    creationTime: f?.creationTime ?? null,
    notBefore: f?.notBefore ?? null,
    expirationTime: f?.expirationTime ?? null,
    riskMetric: f?.riskMetric ?? null,
  };
  return verdict.valid
    ? { outcome: 'valid', record }
    : { outcome: 'invalid', problem: verdict.problem, record };
}

function describeDistribution(d: Distribution & { problem: string | null }): string {
  if (d.validationCategory === null && d.bundleVersion === null)
    return d.problem
      ? `extensions unreadable (${d.problem}); the app does not restrict distribution`
      : 'no iOS 27 distribution extensions; the app does not restrict them, or accepts their absence';
  return `validation category ${d.validationCategory ?? 'absent'}, bundle version ${d.bundleVersion ?? 'absent'}: allowed`;
}

/**
 * The allowlisted app whose App ID hashes to `rpIdHash`, or `null`.
 * @param allowlist where the Apple apps are listed
 * @param rpIdHash the 32 bytes at the start of authData
 */
export async function findAppByRpIdHash(
  allowlist: AllowlistReader,
  rpIdHash: Uint8Array,
): Promise<AppleAppPolicy | null> {
  const apps = await allowlist.appleApps();
  return apps.find((app) => appIdHash(app.appId).equals(rpIdHash)) ?? null;
}

function malformed(detail: string): Rejection {
  return new Rejection('apple_attestation_malformed', detail);
}
