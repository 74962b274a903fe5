/**
 * The App Attest platform verifier: reads the `apple` evidence map, picks one of the three token
 * shapes of docs/token-format.md section 5 from what the token carries and whether its key is
 * registered, runs the attestation and/or assertion checks, and records the outcome in the key
 * store with its compare-and-set operations (so two racing requests cannot both win).
 */
import { createHash, createPublicKey, type KeyObject, type X509Certificate } from 'node:crypto';
import { decodeBase64, encodeBase64 } from '../base64.js';
import { checkDeviceVelocity } from '../deviceVelocity.js';
import { ownBytes } from '../ownBytes.js';
import { isBytes, isMap } from '../cbor.js';
import type { AppScope } from '../appScope.js';
import { Rejection } from '../reasons.js';
import type { CheckId } from '../checkTitles.js';
import type {
  AllowlistReader,
  AppleKeyRecord,
  AppleKeyStore,
  DeviceVelocityStore,
  KeyMode,
  PlatformContext,
  PlatformVerifier,
} from '../ports.js';
import type { ApplePlatform, AppleTokenDetails } from './appleTokenDetails.js';
import type { PlatformDetails } from '../kinds.js';
import type { VerifyFacts } from '../outcome.js';
import { createCertificateChainVerifier } from './certificateChain.js';
import { LruCache } from '../lruCache.js';
import { StoredKeyCache } from '../storedKeyCache.js';
import { ASSERTION_CHECKS, verifyAssertion } from './verifyAssertion.js';
import {
  ATTESTATION_CHECKS,
  checkAttestationReceipt,
  verifyAttestation,
} from './verifyAttestation.js';
import type { Distribution } from './appleDistribution.js';
import { createReceiptVerifier, type ReceiptVerifier } from './verifyReceipt.js';

export type AppleTokenShape = NonNullable<VerifyFacts['shape']>;

/** The ordered check ids of each shape (stable: `verify-file` prints them, the README lists them). */
export const APPLE_CHECKS: Readonly<Record<AppleTokenShape, readonly CheckId[]>> = {
  registration: ['apple.shape', ...ATTESTATION_CHECKS, 'apple.register', 'apple.deviceVelocity'],
  assertion: ['apple.shape', ...ASSERTION_CHECKS, 'apple.deviceVelocity'],
  // the receipt (covered by no signature) is checked last, once the assertion has verified
  'attestation+assertion': [
    'apple.shape',
    ...ATTESTATION_CHECKS.filter((id) => id !== 'apple.attestation.receipt'),
    ...ASSERTION_CHECKS,
    'apple.attestation.receipt',
    'apple.register',
    'apple.deviceVelocity',
  ],
};

const KEY_ID_LENGTH = 32;

/**
 * Keys a verifier keeps for assertions. A P-256 KeyObject holds about 2.9 KB of OpenSSL memory
 * and its row about 1-2.5 KB more: 10 000 of each cost ~45 MB per verifier (one per API key
 * mode), most of it for keys that registered and never asserted again. A miss costs one
 * createPublicKey (about two signature checks) and a row read; keys that assert often stay.
 */
export const APPLE_KEY_CACHE_SIZE = 2000;

export interface AppleVerifierDeps {
  /** trust roots for attestation chains: `defaultAppleRoots()` unless a deployment replaces them */
  roots: readonly X509Certificate[];
  allowlist: AllowlistReader;
  keys: AppleKeyStore;
  /**
   * the mode of the API key verifying (default live): keys registered under a test key are
   * refused to live keys, and keys this verifier registers are recorded with its mode
   */
  mode?: KeyMode;
  /**
   * keys kept in memory for assertions (their KeyObject and their row), most recently used;
   * default APPLE_KEY_CACHE_SIZE
   */
  keyCacheSize?: number;
  /** verified intermediate certificates kept; default 64 */
  intermediateCacheSize?: number;
  /** called before every signature check of an attestation chain (tests count them) */
  onSignatureCheck?: () => void;
  /**
   * checks attestation receipts (default: against the built-in Apple Root CA - G3); null keeps
   * them unchecked (the benchmark's baseline)
   */
  receipts?: ReceiptVerifier | null;
  /**
   * how long a key row read from the store is trusted for the one-statement assertion path; its
   * risk metric changes when the receipt is refreshed (default 60 s)
   */
  knownRowTtlMs?: number;
  /** per-device verify counts, shared by every instance; needed once an app sets a limit */
  velocity?: DeviceVelocityStore;
}

/** The `apple` evidence map of a token, checked for shape only. */
export interface AppleEvidence {
  keyId: Uint8Array;
  attestation: Uint8Array | null;
  assertion: Uint8Array | null;
}

/**
 * Reads the `apple` map of a token. Throws `Rejection('token_malformed')` when `keyId` is not a
 * 32-byte byte string, `attestation` / `assertion` are not byte strings, or both are absent.
 * @param evidence the decoded value under the token's `apple` key
 */
export function readAppleEvidence(evidence: unknown): AppleEvidence {
  if (!isMap(evidence)) throw new Rejection('token_malformed', 'the "apple" evidence is not a map');
  const keyId = evidence.get('keyId');
  if (!isBytes(keyId) || keyId.length !== KEY_ID_LENGTH) {
    throw new Rejection(
      'token_malformed',
      `"apple.keyId" must be a byte string of ${KEY_ID_LENGTH} bytes`,
    );
  }
  const attestation = evidence.get('attestation');
  if (attestation !== undefined && !isBytes(attestation))
    throw new Rejection('token_malformed', '"apple.attestation" must be a byte string');
  const assertion = evidence.get('assertion');
  if (assertion !== undefined && !isBytes(assertion))
    throw new Rejection('token_malformed', '"apple.assertion" must be a byte string');
  if (attestation === undefined && assertion === undefined) {
    throw new Rejection(
      'token_malformed',
      '"apple" carries neither an attestation nor an assertion',
    );
  }
  return { keyId, attestation: attestation ?? null, assertion: assertion ?? null };
}

/**
 * Builds the App Attest verifier. Options are validated here, once (at least one CA root).
 * @param deps trust roots, allowlist, key store and cache sizes
 */
export function createAppleVerifier(deps: AppleVerifierDeps): PlatformVerifier {
  const chain = createCertificateChainVerifier(deps.roots, {
    intermediateCacheSize: deps.intermediateCacheSize,
    onSignatureCheck: deps.onSignatureCheck,
  });
  const { allowlist, keys } = deps;
  const receipts = deps.receipts === null ? undefined : (deps.receipts ?? createReceiptVerifier());
  const knownRowTtlMs = deps.knownRowTtlMs ?? 60_000;
  const mode = deps.mode ?? 'live';
  const storedKeys = new StoredKeyCache(deps.keyCacheSize ?? APPLE_KEY_CACHE_SIZE, 'App Attest');

  const publicKeyOf = (record: { keyId: Uint8Array; publicKey: Uint8Array }): KeyObject =>
    storedKeys.publicKeyOf(record);

  // Rows seen per key id, for stores that can check in the counter UPDATE that the row is still
  // the same: an assertion for a known key is then one statement, not a read and then an update.
  const knownRows = new LruCache<string, AppleKeyRecord & { cachedAt?: number }>(
    deps.keyCacheSize ?? APPLE_KEY_CACHE_SIZE,
  );
  const sameRow = (a: AppleKeyRecord, b: AppleKeyRecord) =>
    a.appId === b.appId &&
    (a.riskMetric ?? null) === (b.riskMetric ?? null) &&
    a.environment === b.environment &&
    (a.mode ?? 'live') === (b.mode ?? 'live') &&
    Buffer.from(a.publicKey).equals(Buffer.from(b.publicKey));

  const remember = (keyId: Uint8Array, spki: Uint8Array, key: KeyObject): void =>
    storedKeys.remember(keyId, spki, key);

  async function assertWith(
    record: AppleKeyRecord,
    assertion: Uint8Array,
    clientDataHash: Uint8Array,
    ctx: PlatformContext,
    raiseCounter: (n: number) => Promise<boolean>,
  ) {
    begin(ctx, 'assertion');
    ctx.trace.facts.appId = record.appId;
    ctx.trace.facts.environment = record.environment;
    ctx.trace.facts.devicePublicKey = encodeBase64(record.publicKey);
    const asserted = await verifyAssertion(
      {
        assertion,
        clientDataHash,
        key: {
          publicKey: publicKeyOf(record),
          appId: record.appId,
          environment: record.environment,
          counter: record.counter,
          riskMetric: record.riskMetric ?? null,
          distribution: distributionOf(record),
          platform: record.platform ?? 'iOS',
        },
      },
      { allowlist, trace: ctx.trace, raiseCounter, ...scopeOf(ctx) },
    );
    const { counter } = asserted;
    return {
      counter,
      result: details({
        keyId: record.keyId,
        appId: record.appId,
        environment: record.environment,
        counter,
        riskMetric: record.riskMetric ?? null,
        distribution: asserted.distribution,
        platform: record.platform ?? 'iOS',
      }),
    };
  }

  async function verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const result = await verifyKey(evidence, ctx);
    if (result.service !== 'apple') throw new Error('the App Attest verifier made other details');
    const verified = result.appleTokenDetails;
    // the policy step apple.deviceVelocity: last, once every other check has passed (the counter
    // raised, the key registered), so that only valid verifies count against
    // --max-verifies-per-device
    const velocity = await checkDeviceVelocity({
      check: 'apple.deviceVelocity',
      service: 'apple',
      keyId: decodeBase64(verified.keyIdentifier)!,
      owner: verified.appId,
      limit: (await allowlist.appleApp(verified.appId))?.maxVerifiesPerDevice,
      store: deps.velocity,
      mode,
      now: ctx.now,
      trace: ctx.trace,
    });
    if (!velocity.ok)
      ctx.trace.policyFailed('apple.deviceVelocity', velocity.reason, velocity.detail);
    return result;
  }

  async function verifyKey(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const { trace } = ctx;

    trace.current('apple.shape');
    const { keyId, attestation, assertion } = readAppleEvidence(evidence);
    trace.facts.keyId = encodeBase64(keyId);
    // Apple's last assertion step (the challenge in the client data is the one the server issued)
    // holds by construction: the device signs over SHA-256 of the final nonce the service rebuilt.
    const clientDataHash = ctx.clientDataHash ?? createHash('sha256').update(ctx.nonce).digest();
    const rowKey = Buffer.from(keyId).toString('hex');
    const raiseIfUnchanged = keys.raiseCounterIfUnchanged?.bind(keys);
    const cached = assertion && raiseIfUnchanged ? knownRows.get(rowKey) : undefined;
    // a row older than the TTL is read again: its risk metric may have been refreshed since
    const age = cached?.cachedAt === undefined ? Infinity : ctx.now.getTime() - cached.cachedAt;
    const seen = cached && age >= 0 && age < knownRowTtlMs ? cached : undefined;
    let record: AppleKeyRecord | null;
    if (seen && assertion && raiseIfUnchanged) {
      try {
        const { counter, result } = await assertWith(seen, assertion, clientDataHash, ctx, (n) =>
          raiseIfUnchanged(seen, n),
        );
        seen.counter = counter;
        return result;
      } catch (err) {
        if (!(err instanceof Rejection)) throw err;
        knownRows.delete(rowKey);
        record = await keys.find(keyId, mode);
        // the same row: the verdict stands. A row changed or removed underneath (by hand) is
        // verified again below as the store holds it now; the trace then shows both attempts.
        if (record && sameRow(record, seen)) {
          knownRows.set(rowKey, { ...record, cachedAt: ctx.now.getTime() });
          throw err;
        }
      }
    } else {
      record = await keys.find(keyId, mode);
    }

    if (record) {
      // An attestation sent along with an assertion for a registered key is ignored.
      if (!assertion)
        throw new Rejection(
          'apple_key_registered',
          'an attestation for a key that is already registered',
        );
      const { counter, result } = await assertWith(record, assertion, clientDataHash, ctx, (n) =>
        keys.raiseCounter(keyId, n, mode),
      );
      knownRows.set(rowKey, { ...record, counter, cachedAt: ctx.now.getTime() });
      return result;
    }

    if (!attestation)
      throw new Rejection(
        'apple_key_unknown',
        'an assertion for a key that is not registered, with no attestation',
      );
    const shape = assertion ? 'attestation+assertion' : 'registration';
    begin(ctx, shape);

    // Registration checks the nonce extension; with an assertion, the attestation is the one made
    // at key creation, and the assertion's signature over this request's nonce is the freshness.
    const attested = await verifyAttestation(
      {
        attestation,
        keyId,
        clientDataHash: assertion ? null : clientDataHash,
        now: ctx.now,
        receiptLater: assertion !== null,
      },
      { chain, allowlist, trace, ...scopeOf(ctx), ...(receipts ? { receipts } : {}) },
    );

    let counter = 0;
    let distribution: Distribution = attested.distribution;
    if (assertion) {
      const asserted = await verifyAssertion(
        {
          assertion,
          clientDataHash,
          // counter 0: "greater than 0 on the first assertion", so at least 1
          key: {
            publicKey: attested.publicKeyObject,
            appId: attested.appId,
            environment: attested.environment,
            counter: 0,
            distribution: attested.distribution,
            platform: attested.platform,
          },
        },
        { allowlist, trace, ...scopeOf(ctx) },
      );
      counter = asserted.counter;
      distribution = asserted.distribution;
      // only now, with the key's own signature over this request's nonce verified
      attested.receipt = await checkAttestationReceipt(
        attested,
        { trace, ...(receipts ? { receipts } : {}) },
        ctx.now,
      );
    }

    trace.current('apple.register');
    const registered = await keys.register({
      keyId,
      publicKey: attested.publicKey,
      appId: attested.appId,
      environment: attested.environment,
      counter,
      mode,
      validationCategory: attested.distribution.validationCategory,
      bundleVersion: attested.distribution.bundleVersion,
      platform: attested.platform,
      receipt: attested.receipt,
    });
    if (!registered)
      throw new Rejection('apple_key_registered', 'another request registered this key first');
    remember(keyId, attested.publicKey, attested.publicKeyObject);
    trace.facts.devicePublicKey = encodeBase64(attested.publicKey);
    knownRows.set(rowKey, {
      keyId: ownBytes(keyId),
      publicKey: attested.publicKey,
      appId: attested.appId,
      environment: attested.environment,
      counter,
      mode,
      riskMetric: null,
      validationCategory: attested.distribution.validationCategory,
      bundleVersion: attested.distribution.bundleVersion,
      platform: attested.platform,
      cachedAt: ctx.now.getTime(),
    });
    trace.pass(
      'apple.register',
      `key registered for "${attested.appId}" (${attested.environment}) with counter ${counter}${mode === 'test' ? ', for test API keys only' : ''}`,
    );
    return details({
      keyId,
      appId: attested.appId,
      environment: attested.environment,
      counter,
      riskMetric: null,
      distribution,
      platform: attested.platform,
    });
  }

  return { service: 'apple', verify };
}

/** The key's scope for the attestation and assertion checks (absent when the key has none). */
function scopeOf(ctx: PlatformContext): { appScope?: AppScope } {
  return ctx.appScope ? { appScope: ctx.appScope } : {};
}

function begin(ctx: PlatformContext, shape: AppleTokenShape): void {
  ctx.trace.facts.shape = shape;
  ctx.trace.plan(APPLE_CHECKS[shape]);
  ctx.trace.pass('apple.shape', describeShape(shape));
}

function describeShape(shape: AppleTokenShape): string {
  switch (shape) {
    case 'registration':
      return 'registration: an attestation for a key not yet registered';
    case 'assertion':
      return 'assertion for a registered key';
    case 'attestation+assertion':
      return 'attestation plus assertion for a key not yet registered';
  }
}

function distributionOf(record: AppleKeyRecord): Distribution {
  return {
    validationCategory: record.validationCategory ?? null,
    bundleVersion: record.bundleVersion ?? null,
  };
}

function details(fields: {
  keyId: Uint8Array;
  appId: string;
  environment: AppleTokenDetails['environment'];
  counter: number;
  riskMetric: number | null;
  distribution: Distribution;
  platform: ApplePlatform;
}): PlatformDetails {
  const out: AppleTokenDetails = {
    keyIdentifier: encodeBase64(fields.keyId),
    appId: fields.appId,
    environment: fields.environment,
    assertionCounter: fields.counter,
    platform: fields.platform,
  };
  if (fields.riskMetric !== null) out.riskMetric = fields.riskMetric;
  if (fields.distribution.validationCategory !== null)
    out.validationCategory = fields.distribution.validationCategory;
  if (fields.distribution.bundleVersion !== null)
    out.bundleVersion = fields.distribution.bundleVersion;
  return { service: 'apple', appleTokenDetails: out };
}
