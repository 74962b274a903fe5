/**
 * Which platform made an App Attest key. From macOS 27 App Attest works on the Mac. The platform
 * is read from the OS name in Apple's OS information extension (1.2.840.113635.100.8.7, signed
 * with the leaf): `iphoneos` on an iPhone or iPad, a name starting `macos` on a Mac. It is NOT
 * read from the key access-control blob (1.2.840.113635.100.8.6): Mac keys carry one, but so does
 * Apple's own iOS 27 sample (OS name `iphoneos`, build 24A325b), so its presence proves nothing.
 * The blob is still bounded (once, 1 to 2,048 bytes) and otherwise opaque. A leaf without the OS
 * information (before iOS 27 and macOS 27, when App Attest did not run on the Mac) is iOS.
 */
import type { ApplePlatform } from './appleTokenDetails.js';
import type { LeafNonceAndKey } from './nonceExtension.js';

/** The largest access-control blob read: Apple's is 75 bytes; a leaf is at most 4 KiB in all. */
export const MAX_KEY_ACCESS_CONTROL_BYTES = 2048;

/** The platform names `--platforms` takes, by the platform they stand for. */
export const PLATFORM_NAMES: Readonly<Record<ApplePlatform, string>> = {
  iOS: 'ios',
  macOS: 'macos',
};

/**
 * The key's platform from what the leaf reading found, or why the extension is unusable.
 * @param leaf the leaf's fields, from `readLeafNonceAndKey`
 */
export function keyPlatform(
  leaf: Pick<LeafNonceAndKey, 'accessControl' | 'spki' | 'osName'>,
): { ok: true; platform: ApplePlatform; bytes: number } | { ok: false; problem: string } {
  const platform: ApplePlatform = leaf.osName?.startsWith('macos') ? 'macOS' : 'iOS';
  if (leaf.spki === null) return { ok: false, problem: 'the leaf certificate cannot be read' };
  const values = leaf.accessControl;
  if (values === null)
    return {
      ok: false,
      problem: 'the key access-control extension (1.2.840.113635.100.8.6) is not an OCTET STRING',
    };
  if (values.length === 0) return { ok: true, platform, bytes: 0 };
  if (values.length > 1)
    return {
      ok: false,
      problem: `the leaf carries the key access-control extension ${values.length} times`,
    };
  const size = values[0]!.length;
  if (size === 0) return { ok: false, problem: 'the key access-control extension is empty' };
  if (size > MAX_KEY_ACCESS_CONTROL_BYTES)
    return {
      ok: false,
      problem: `the key access-control extension is ${size} bytes: at most ${MAX_KEY_ACCESS_CONTROL_BYTES}`,
    };
  return { ok: true, platform, bytes: size };
}

/**
 * Why the app entry refuses a key of `platform`, or null when it accepts it (an entry without
 * `--platforms` accepts both).
 */
export function platformProblem(
  policy: { appId: string; platforms?: readonly string[] },
  platform: ApplePlatform,
): string | null {
  const allowed = policy.platforms ?? [];
  if (allowed.length === 0 || allowed.includes(PLATFORM_NAMES[platform])) return null;
  return `"${policy.appId}" accepts ${allowed.join(', ')} keys; this key was made on ${platform}`;
}
