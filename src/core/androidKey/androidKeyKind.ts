import { defineKind, type KindPorts } from '../kind.js';
import type { PlatformVerifier } from '../ports.js';
import type { AndroidKeyDetails } from './androidKeyTokenDetails.js';
import { androidKeyDetailsSchema } from './androidKeyDetailsSchema.js';
import { ANDROID_KEY_CHECK_TITLES } from './androidKeyCheckTitles.js';
import { createAndroidKeyVerifier } from './androidKeyVerifier.js';
import { androidKeyHints } from './androidKeyHints.js';

/** Android hardware key attestation: a key attested once, then its signatures. */
export const androidKeyKind = defineKind<AndroidKeyDetails>()({
  service: 'android-key',
  aliases: [],
  entry: 'android',
  detailsField: 'androidKeyDetails',
  detailsSchema: androidKeyDetailsSchema,
  checkTitles: ANDROID_KEY_CHECK_TITLES,
  reasons: [
    'android_key_malformed',
    'android_chain_invalid',
    'android_chain_revoked',
    'android_security_level_mismatch',
    'android_challenge_mismatch',
    'android_key_id_mismatch',
    'android_key_unsupported',
    'android_key_not_generated',
    'android_patch_level_future',
    'android_package_not_allowed',
    'android_app_signature_mismatch',
    'android_security_level_insufficient',
    'android_boot_state_insufficient',
    'android_patch_level_stale',
    'android_signature_invalid',
    'android_key_registered',
    'android_key_unknown',
    // an assertion (key and final nonce) that was accepted before: a replay
    'android_assertion_replayed',
    // the issuing certificate attested too many new keys for the package (a leaked keybox)
    'android_issuer_overused',
  ],
  observable: [
    'android_security_level_insufficient',
    'android_boot_state_insufficient',
    'android_patch_level_stale',
    'device_rate_exceeded',
    'android_issuer_overused',
  ],
  subject: 'keyIdentifier',
  deviceKey: true,
  hints: androidKeyHints,
  // without the Android deps (roots, key store, revocations) its tokens are service_unsupported
  verifier: (p: KindPorts): PlatformVerifier | undefined =>
    p.android
      ? createAndroidKeyVerifier({
          roots: p.android.roots,
          allowlist: p.allowlist,
          keys: p.android.keys,
          revocations: p.android.revocations,
          mode: p.mode,
          ...(p.velocity ? { velocity: p.velocity } : {}),
          ...(p.android.issuers ? { issuers: p.android.issuers } : {}),
          ...(p.android.blockedIssuers ? { blockedIssuers: p.android.blockedIssuers } : {}),
        })
      : undefined,
});
