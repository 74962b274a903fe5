import { timingSafeEqual } from 'node:crypto';

/** Constant-time byte comparison; lengths are not secret. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
