/**
 * Which platform made an App Attest key. From macOS 27 App Attest works on the Mac, and a Mac
 * key's leaf certificate carries the key's access-control blob (extension 1.2.840.113635.100.8.6;
 * the key policy needs Full Security boot and SIP). iPhone and iPad leaves have none. The blob is
 * Apple's encoding of the key's policy and is not documented: its presence, once, with a bounded
 * size, is all this service reads of it. Apple signed the leaf, so presence is Apple's word.
 */
import type { ApplePlatform } from '../types.js';
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
  leaf: Pick<LeafNonceAndKey, 'accessControl' | 'spki'>,
): { ok: true; platform: ApplePlatform; bytes: number } | { ok: false; problem: string } {
  if (leaf.spki === null) return { ok: false, problem: 'the leaf certificate cannot be read' };
  const values = leaf.accessControl;
  if (values === null)
    return {
      ok: false,
      problem: 'the key access-control extension (1.2.840.113635.100.8.6) is not an OCTET STRING',
    };
  if (values.length === 0) return { ok: true, platform: 'iOS', bytes: 0 };
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
  return { ok: true, platform: 'macOS', bytes: size };
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
