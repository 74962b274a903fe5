/**
 * Patch levels ahead of the verification time. A device cannot run a security patch from a month
 * that has not come: a key description that says so was forged, or comes from a broken build.
 * Preview builds run a month ahead (a Pixel on Android 17's preview said 2026-08 on 2026-07-01),
 * so a patch level may be up to one calendar month ahead of `now`; two is refused. Values that
 * are not YYYYMM or YYYYMMDD with a real month (vendor patch level 0 on emulators) say nothing and
 * are skipped, as Google's verifier skips them.
 */
import type { KeyDescription } from './keyDescription.js';

/** Calendar months a patch level may be ahead of the verification time. */
export const PATCH_MONTHS_AHEAD = 2;

/** The month index (year * 12 + month - 1) of a YYYYMM or YYYYMMDD value, or null. */
export function patchMonthIndex(value: number): number | null {
  const text = String(value);
  if (!/^\d{6}(\d{2})?$/.test(text)) return null;
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(4, 6));
  if (month < 1 || month > 12) return null;
  return year * 12 + month - 1;
}

/**
 * The hardware-enforced patch levels more than PATCH_MONTHS_AHEAD calendar months after `now`
 * (UTC), each named with its value; empty when none is.
 */
export function futurePatchLevels(
  description: Pick<KeyDescription, 'osPatchLevel' | 'vendorPatchLevel' | 'bootPatchLevel'>,
  now: Date,
): string[] {
  const current = now.getUTCFullYear() * 12 + now.getUTCMonth();
  const out: string[] = [];
  for (const [name, value] of [
    ['osPatchLevel', description.osPatchLevel],
    ['vendorPatchLevel', description.vendorPatchLevel],
    ['bootPatchLevel', description.bootPatchLevel],
  ] as const) {
    if (value === null) continue;
    const index = patchMonthIndex(value);
    if (index !== null && index - current > PATCH_MONTHS_AHEAD) out.push(`${name} ${value}`);
  }
  return out;
}
