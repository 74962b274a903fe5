import { defineKind, type KindPorts } from '../kind.js';
import type { PlatformVerifier } from '../ports.js';
import type { GoogleTokenDetails } from './gmsTokenDetails.js';
import { gmsDetailsSchema } from './gmsDetailsSchema.js';
import { GMS_CHECK_TITLES } from './gmsCheckTitles.js';
import { createGoogleVerifier } from './googleVerifier.js';
import { gmsHints } from './gmsHints.js';

/** Play Integrity (classic and standard requests). */
export const gmsKind = defineKind<GoogleTokenDetails>()({
  service: 'gms',
  aliases: ['android', 'google'],
  entry: 'android',
  detailsField: 'googleTokenDetails',
  detailsSchema: gmsDetailsSchema,
  checkTitles: GMS_CHECK_TITLES,
  reasons: [
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
  ],
  observable: [
    'gms_integrity_insufficient',
    'gms_app_not_recognized',
    'gms_not_licensed',
    'gms_play_protect',
    'gms_app_access_risk',
    'gms_device_activity',
    'gms_device_recalled',
    'gms_account_activity',
    'gms_location_spoofing',
  ],
  subject: 'packageName',
  deviceKey: false,
  hints: gmsHints,
  verifier: (p: KindPorts): PlatformVerifier | undefined =>
    createGoogleVerifier({
      allowlist: p.allowlist,
      ...(p.googleDecoder ? { decoder: p.googleDecoder } : {}),
    }),
});
