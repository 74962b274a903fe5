import { KINDS } from './kinds.js';
import type { KindCheckId } from './kinds.js';

/** The envelope's checks, before any kind's. */
const ENVELOPE_CHECK_TITLES = {
  'token.decode': 'token is a strict CBOR map with v, nonce and device',
  'token.version': 'token format version is supported',
  'token.service': 'device.service has a verifier and its evidence map',
  'token.nonce': 'token nonce equals the final nonce',
} as const;

/** A check id: the envelope's, or one a kind declares. */
export type CheckId = keyof typeof ENVELOPE_CHECK_TITLES | KindCheckId;

/**
 * The registry of checks: each id with what passing it means, in plain words (verify-file prints
 * these; docs/checks.md lists them): the envelope's, then each kind's (its descriptor's
 * `checkTitles`). Verifiers name checks by `CheckId`, so a check without a title does not compile.
 */
export const CHECK_TITLES: Readonly<Record<CheckId, string>> = Object.assign(
  { ...ENVELOPE_CHECK_TITLES },
  ...KINDS.map((k) => k.checkTitles),
);

/** The title of a recorded check id (a failure outside any check records its reason instead). */
export function checkTitle(id: string): string | undefined {
  return Object.hasOwn(CHECK_TITLES, id) ? CHECK_TITLES[id as CheckId] : undefined;
}
