/**
 * App Attest assertion verification: Apple's "Verify the assertion" steps, grouped into the four
 * checks of docs/token-format.md section 5. The counter is raised through the key store only after
 * the signature verified, so a forged assertion with a huge counter cannot lock a key out.
 */
import { type KeyObject, verify } from 'node:crypto';
import { CborError, decodeStrictCbor, isBytes, isMap } from '../cbor.js';
import { checkAppScope, type AppScope } from '../appScope.js';
import { Rejection } from '../reasons.js';
import type { AllowlistReader } from '../ports.js';
import type { AppleEnvironment, ApplePlatform } from './appleTokenDetails.js';
import type { Trace } from '../outcome.js';
import { platformProblem } from './keyPlatform.js';
import { environmentAllowed } from './appleEnvironment.js';
import { appIdHash } from './appIdHash.js';
import { type AssertionAuthenticatorData, parseAuthenticatorData } from './authenticatorData.js';
import { appAttestNonce } from './nonceExtension.js';
import { silentTrace } from './silentTrace.js';
import { type Distribution, distributionProblem, readDistribution } from './appleDistribution.js';

/** Check ids of an assertion, in order (stable: `verify-file` prints them, the README lists them). */
export const ASSERTION_CHECKS = [
  'apple.assertion.format',
  'apple.assertion.signature',
  'apple.assertion.appId',
  'apple.assertion.policy',
  'apple.assertion.counter',
] as const;

const ASSERTION_CBOR_LIMITS = { maxDepth: 8, maxBytes: 64 * 1024 };

/** A structurally valid assertion object (nothing verified yet). */
export interface AssertionObject {
  /** DER-encoded ECDSA signature */
  signature: Uint8Array;
  authenticatorData: AssertionAuthenticatorData;
}

/**
 * Decodes an assertion object strictly (check 1). Throws `Rejection('apple_assertion_malformed')`.
 * @param bytes the assertion object from `generateAssertion`
 */
export function parseAssertionObject(bytes: Uint8Array): AssertionObject {
  let root: unknown;
  try {
    root = decodeStrictCbor(bytes, ASSERTION_CBOR_LIMITS);
  } catch (err) {
    if (err instanceof CborError) throw malformed(`CBOR: ${err.message}`);
    throw err;
  }
  if (!isMap(root)) throw malformed('not a CBOR map');
  const signature = root.get('signature');
  if (!isBytes(signature) || signature.length === 0)
    throw malformed('signature is missing or not a byte string');
  const authenticatorData = root.get('authenticatorData');
  if (!isBytes(authenticatorData))
    throw malformed('authenticatorData is missing or not a byte string');
  return { signature, authenticatorData: parseAuthenticatorData(authenticatorData, 'assertion') };
}

/** The registered key an assertion is checked against. */
export interface AssertionKey {
  publicKey: KeyObject;
  appId: string;
  environment: AppleEnvironment;
  /** the highest counter accepted so far; 0 for a key that has not asserted yet */
  counter: number;
  /** the latest risk metric from a refreshed receipt, when one is known */
  riskMetric?: number | null;
  /** what the key's attestation said about distribution (iOS 27+) */
  distribution?: Distribution;
  /** where the key was made, stored at registration; absent = iOS */
  platform?: ApplePlatform;
}

export interface AssertionInput {
  /** the assertion object from `generateAssertion` */
  assertion: Uint8Array;
  /** what the device passed to `generateAssertion` (SHA-256 of the final nonce from this service's SDKs) */
  clientDataHash: Uint8Array;
  key: AssertionKey;
}

export interface AssertionDeps {
  allowlist: AllowlistReader;
  /** the API key's apps: checked once the signature proved the app ID, before the counter moves */
  appScope?: AppScope;
  trace?: Trace;
  /**
   * The key store's atomic compare-and-set (`raiseCounter`), run after every other check
   * passed; `false` means another request already used this counter or a higher one.
   * Without it the counter is only compared with `key.counter`.
   */
  raiseCounter?: (counter: number) => Promise<boolean>;
}

export interface VerifiedAssertion {
  counter: number;
  authenticatorData: AssertionAuthenticatorData;
  /** the assertion's own distribution extensions when it carries them, else the key's */
  distribution: Distribution;
}

/**
 * Runs the four assertion checks in order; the first failure throws its `Rejection`.
 * @param input the assertion, clientDataHash and the key it must be signed with
 * @param deps allowlist, trace, and the store's counter compare-and-set
 */
export async function verifyAssertion(
  input: AssertionInput,
  deps: AssertionDeps,
): Promise<VerifiedAssertion> {
  const trace = deps.trace ?? silentTrace();
  const { key } = input;

  // Assertion step (format): a strict CBOR map with signature and authenticatorData
  trace.current('apple.assertion.format');
  const { signature, authenticatorData } = parseAssertionObject(input.assertion);
  trace.pass(
    'apple.assertion.format',
    `strict CBOR, authenticatorData ${authenticatorData.bytes.length} bytes`,
  );

  // Assertion steps 1-3: the key signed nonce = SHA-256(authenticatorData || clientDataHash)
  // (ECDSA P-256 with SHA-256 over the nonce, so the nonce is hashed once more inside verify)
  trace.current('apple.assertion.signature');
  const nonce = appAttestNonce(authenticatorData.bytes, input.clientDataHash);
  if (!signatureValid(nonce, key.publicKey, signature)) {
    throw new Rejection(
      'apple_signature_invalid',
      `the signature does not verify with the registered key (clientDataHash ${input.clientDataHash.length} bytes)`,
    );
  }
  trace.pass(
    'apple.assertion.signature',
    'ECDSA P-256 signature over SHA-256(authenticatorData || clientDataHash) verifies',
  );

  // Assertion step 4: rpIdHash is the key's App ID, which (with its environment) is still allowlisted
  trace.current('apple.assertion.appId');
  if (!appIdHash(key.appId).equals(authenticatorData.rpIdHash)) {
    throw new Rejection(
      'apple_app_not_allowed',
      `rpIdHash is not SHA-256 of the key's App ID "${key.appId}"`,
    );
  }
  const app = await deps.allowlist.appleApp(key.appId);
  if (!app) throw new Rejection('apple_app_not_allowed', `"${key.appId}" is no longer allowlisted`);
  // the key's scope is identity, checked before any policy rule
  checkAppScope(deps.appScope, key.appId, 'app ID');
  trace.observe(app.observe ?? []);
  if (!environmentAllowed(app.env, key.environment)) {
    // the environment rule of the attestation, held against the key again: enforced, it keeps
    // its documented reason (the app no longer admits the key); observed, it is that rule's code
    trace.policyFailed(
      'apple.assertion.appId',
      'apple_environment_not_allowed',
      `"${key.appId}" is allowlisted for ${app.env} keys; this key is ${key.environment}`,
      'apple_app_not_allowed',
    );
  } else
    trace.pass(
      'apple.assertion.appId',
      `rpIdHash is SHA-256 of "${key.appId}", allowlisted for ${key.environment} keys`,
    );

  // The app's limits: Apple's risk metric for the key, and its distribution (the assertion's own
  // iOS 27 extensions, which the key signed, else what the attestation said)
  trace.current('apple.assertion.policy');
  const own = readDistribution(authenticatorData.extensions);
  const distribution: Distribution =
    own.validationCategory !== null || own.bundleVersion !== null
      ? { validationCategory: own.validationCategory, bundleVersion: own.bundleVersion }
      : (key.distribution ?? { validationCategory: null, bundleVersion: null });
  if (distribution.validationCategory)
    trace.facts.validationCategory = distribution.validationCategory;
  const limit = app.maxRiskMetric;
  const risk = key.riskMetric ?? null;
  const riskExceeded = limit !== undefined && limit !== null && risk !== null && risk > limit;
  if (riskExceeded)
    trace.policyFailed(
      'apple.assertion.policy',
      'apple_risk_exceeded',
      `Apple's risk metric for this key is ${risk}, above the ${limit} "${key.appId}" accepts`,
    );
  const notAllowed = distributionProblem(app, distribution);
  if (notAllowed)
    trace.policyFailed('apple.assertion.policy', 'apple_distribution_not_allowed', notAllowed);
  // the platform stored at registration, held against today's entry
  const platform = key.platform ?? 'iOS';
  trace.facts.platform = platform;
  const wrongPlatform = platformProblem(app, platform);
  if (wrongPlatform)
    trace.policyFailed('apple.assertion.policy', 'apple_platform_not_allowed', wrongPlatform);
  if (!riskExceeded && !notAllowed && !wrongPlatform)
    trace.pass(
      'apple.assertion.policy',
      `risk metric ${risk ?? 'unknown'}${limit != null ? ` (limit ${limit})` : ''}, distribution ${distribution.validationCategory ?? 'not reported'}, ${platform} key`,
    );

  // Assertion step 5: the counter is strictly above every counter accepted before
  trace.current('apple.assertion.counter');
  const { counter } = authenticatorData;
  trace.facts.counter = counter;
  trace.facts.storedCounter = key.counter;
  if (counter <= key.counter) {
    throw new Rejection(
      'apple_counter_replay',
      key.counter === 0 && counter === 0
        ? 'counter is 0; a first assertion counts from 1'
        : `counter ${counter} is not above the stored ${key.counter}`,
    );
  }
  if (deps.raiseCounter && !(await deps.raiseCounter(counter))) {
    throw new Rejection(
      'apple_counter_replay',
      `counter ${counter} was already reached by another request`,
    );
  }
  trace.pass('apple.assertion.counter', `counter ${counter} is above the stored ${key.counter}`);

  return { counter, authenticatorData, distribution };
}

function signatureValid(nonce: Uint8Array, publicKey: KeyObject, signature: Uint8Array): boolean {
  try {
    return verify('sha256', nonce, publicKey, signature);
  } catch {
    // a signature that is not DER, or a key of the wrong type, is simply not a valid signature
    return false;
  }
}

function malformed(detail: string): Rejection {
  return new Rejection('apple_assertion_malformed', detail);
}
