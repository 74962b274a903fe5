/** Every rejection reason of docs/token-format.md section 7 and the platform sections: a closed union. */
export const REJECT_REASONS = [
  'token_malformed',
  'token_version_unsupported',
  'service_unsupported',
  'session_unknown',
  'session_consumed',
  'session_expired',
  'nonce_mismatch',
  'gms_package_not_allowed',
  'gms_decrypt_failed',
  'gms_signature_invalid',
  'gms_payload_malformed',
  'gms_nonce_mismatch',
  'gms_package_mismatch',
  'gms_app_not_recognized',
  'gms_certificate_mismatch',
  'gms_integrity_insufficient',
  'gms_token_stale',
  'gms_standard_not_configured',
  'gms_decode_rejected',
  'gms_not_licensed',
  'gms_play_protect',
  'gms_app_access_risk',
  'gms_device_activity',
  'gms_device_recalled',
  'gms_account_activity',
  'gms_location_spoofing',
  // Play Integrity for PC (gms-pc)
  'gms_pc_not_configured',
  'gms_pc_decode_rejected',
  'gms_pc_payload_malformed',
  'gms_pc_nonce_mismatch',
  'gms_pc_package_mismatch',
  'gms_pc_integrity_insufficient',
  'gms_pc_token_stale',
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
  // an android-key assertion (key and final nonce) that was accepted before: a replay
  'android_assertion_replayed',
  // the token's app is allowlisted but outside the API key's scope (`keys create --apps`)
  'app_not_in_key_scope',
  'device_rate_exceeded',
  // android-key: the issuing certificate attested too many new keys for the package (a leaked keybox)
  'android_issuer_overused',
] as const;

export type RejectReason = (typeof REJECT_REASONS)[number];

/**
 * An expected rejection. Thrown inside core checks and turned into `{ ok: false }` by the
 * top-level verifier only; anything else that is thrown is a fault (HTTP 500).
 */
export class Rejection extends Error {
  override readonly name = 'Rejection';
  constructor(
    readonly reason: RejectReason,
    readonly detail: string,
  ) {
    // an expected outcome, turned into a value and never logged with a stack: capturing one was
    // most of the CPU a garbage token costs (~7 us per error at a request's call depth)
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`${reason}: ${detail}`);
    Error.stackTraceLimit = limit;
  }
}
