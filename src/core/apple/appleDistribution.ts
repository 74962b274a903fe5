/**
 * The iOS 27 authenticator data extensions: how the app was distributed and its bundle version.
 *
 * From iOS 27 the authData of attestations (and assertions) ends with a CBOR map whose
 * `apple_validation_category_01` is a 4-byte byte string, a little-endian unsigned integer (Apple's
 * 2026 "Attestation Object Validation Guide" sample carries h'01000000'), and whose
 * `apple_bundle_version_01` is a text string (the sample's "1"). The numbers are the validation
 * categories of Apple's code signing (LightweightCodeRequirements `ValidationCategory`). The bytes
 * are covered by the nonce (attestation) or the signature (assertion), so they are the device's word.
 */
import type { AppleAppPolicy } from '../ports.js';

export const VALIDATION_CATEGORY_KEY = 'apple_validation_category_01';
export const BUNDLE_VERSION_KEY = 'apple_bundle_version_01';

/** Category names by Apple's number; another number reads as `category-N`. */
export const VALIDATION_CATEGORIES: Readonly<Record<number, string>> = {
  1: 'platform',
  2: 'testflight',
  3: 'development',
  4: 'appstore',
  5: 'enterprise',
  6: 'developerid',
};

/** The names `--validation-category` accepts. */
export const VALIDATION_CATEGORY_NAMES: readonly string[] = Object.values(VALIDATION_CATEGORIES);

/** What a token said about its app's distribution; both null before iOS 27. */
export interface Distribution {
  validationCategory: string | null;
  bundleVersion: string | null;
}

const MAX_BUNDLE_VERSION_LENGTH = 64;

/**
 * Reads the two extensions from an authData extensions map. A value of another shape than
 * Apple's reads as absent, and `problem` says so (a policy then refuses it; no policy ignores it).
 * @param extensions the CBOR map after the fixed part of authData, or null
 */
export function readDistribution(
  extensions: Map<unknown, unknown> | null,
): Distribution & { problem: string | null } {
  const out: Distribution & { problem: string | null } = {
    validationCategory: null,
    bundleVersion: null,
    problem: null,
  };
  if (!extensions) return out;
  const category = extensions.get(VALIDATION_CATEGORY_KEY);
  if (category !== undefined) {
    let n: number | null = null;
    if (category instanceof Uint8Array && category.length === 4)
      n = Buffer.from(category.buffer, category.byteOffset, 4).readUInt32LE(0);
    else if (typeof category === 'number' && Number.isSafeInteger(category) && category >= 0)
      n = category; // an integer is read too: the number is the same fact
    if (n === null) out.problem = `${VALIDATION_CATEGORY_KEY} is not a 4-byte little-endian number`;
    else out.validationCategory = VALIDATION_CATEGORIES[n] ?? `category-${n}`;
  }
  const version = extensions.get(BUNDLE_VERSION_KEY);
  if (version !== undefined) {
    if (
      typeof version === 'string' &&
      version.length > 0 &&
      version.length <= MAX_BUNDLE_VERSION_LENGTH &&
      /^[\x21-\x7e]+$/.test(version)
    )
      out.bundleVersion = version;
    else out.problem ??= `${BUNDLE_VERSION_KEY} is not a short printable text string`;
  }
  return out;
}

/** Whether the app entry restricts distribution at all. */
export function restrictsDistribution(policy: AppleAppPolicy): boolean {
  return (policy.validationCategories?.length ?? 0) > 0 || !!policy.minBundleVersion;
}

/**
 * Why a token's distribution breaks the app entry's rules, or null when it does not.
 * @param policy the app entry
 * @param facts what the token (or the stored key) said
 */
export function distributionProblem(policy: AppleAppPolicy, facts: Distribution): string | null {
  if (!restrictsDistribution(policy)) return null;
  const categories = policy.validationCategories ?? [];
  if (facts.validationCategory === null && facts.bundleVersion === null) {
    return policy.allowMissingValidationCategory
      ? null
      : `"${policy.appId}" restricts distribution and this token carries no validation category (iOS 26 or earlier; --allow-missing-validation-category accepts those)`;
  }
  if (categories.length > 0) {
    if (facts.validationCategory === null)
      return `"${policy.appId}" accepts ${categories.join(', ')}; this token carries no validation category`;
    if (!categories.includes(facts.validationCategory))
      return `"${policy.appId}" accepts ${categories.join(', ')}; this app was distributed as ${facts.validationCategory}`;
  }
  if (policy.minBundleVersion) {
    if (facts.bundleVersion === null)
      return `"${policy.appId}" requires bundle version ${policy.minBundleVersion} or later; this token carries none`;
    const order = compareBundleVersions(facts.bundleVersion, policy.minBundleVersion);
    if (order === null)
      return `bundle version "${facts.bundleVersion}" is not dotted numbers, so it cannot be held against ${policy.minBundleVersion}`;
    if (order < 0)
      return `"${policy.appId}" requires bundle version ${policy.minBundleVersion} or later; this app is ${facts.bundleVersion}`;
  }
  return null;
}

const DOTTED = /^\d{1,9}(\.\d{1,9}){0,3}$/;

/** Whether `text` is a bundle version `--min-bundle-version` accepts (1 to 4 dotted numbers). */
export function isBundleVersion(text: string): boolean {
  return DOTTED.test(text);
}

/**
 * Compares CFBundleVersion-style dotted numbers ("1.10" after "1.9"; missing parts are 0).
 * Null when either is not dotted numbers.
 */
export function compareBundleVersions(a: string, b: string): number | null {
  if (!DOTTED.test(a) || !DOTTED.test(b)) return null;
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}
