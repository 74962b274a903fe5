import { defineKind, type KindPorts } from '../kind.js';
import type { PlatformVerifier } from '../ports.js';
import type { AppleTokenDetails } from './appleTokenDetails.js';
import { appleDetailsSchema } from './appleDetailsSchema.js';
import { APPLE_CHECK_TITLES } from './appleCheckTitles.js';
import { createAppleVerifier } from './appleVerifier.js';
import { appleHints } from './appleHints.js';

/** App Attest (iOS, iPadOS, macOS): a key attested once, then its assertions. */
export const appleKind = defineKind<AppleTokenDetails>()({
  service: 'apple',
  aliases: [],
  entry: 'apple',
  detailsField: 'appleTokenDetails',
  detailsSchema: appleDetailsSchema,
  checkTitles: APPLE_CHECK_TITLES,
  reasons: [
    'apple_attestation_malformed',
    'apple_chain_invalid',
    'apple_nonce_mismatch',
    'apple_key_id_mismatch',
    'apple_app_not_allowed',
    'apple_counter_invalid',
    'apple_environment_not_allowed',
    'apple_assertion_malformed',
    'apple_signature_invalid',
    'apple_counter_replay',
    'apple_key_registered',
    'apple_key_unknown',
    'apple_receipt_invalid',
    'apple_risk_exceeded',
    'apple_distribution_not_allowed',
    'apple_platform_not_allowed',
  ],
  observable: [
    'apple_environment_not_allowed',
    'apple_receipt_invalid',
    'apple_risk_exceeded',
    'apple_distribution_not_allowed',
    'apple_platform_not_allowed',
    'device_rate_exceeded',
  ],
  subject: 'keyIdentifier',
  deviceKey: true,
  hints: appleHints,
  verifier: (p: KindPorts): PlatformVerifier | undefined =>
    createAppleVerifier({
      roots: p.appleRoots,
      allowlist: p.allowlist,
      keys: p.appleKeys,
      mode: p.mode,
      ...(p.receipts ? { receipts: p.receipts } : {}),
      ...(p.velocity ? { velocity: p.velocity } : {}),
    }),
});
