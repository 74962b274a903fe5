import { defineKind, type KindPorts } from '../kind.js';
import type { PlatformVerifier } from '../ports.js';
import type { GooglePcTokenDetails } from './googlePcTokenDetails.js';
import { gmsPcDetailsSchema } from './pcDetailsSchema.js';
import { PC_CHECK_TITLES } from './pcCheckTitles.js';
import { createGooglePcVerifier } from './pcVerifier.js';

/** Play Integrity for PC (Google Play Games on PC). */
export const gmsPcKind = defineKind<GooglePcTokenDetails>()({
  service: 'gms-pc',
  aliases: [],
  entry: 'android',
  detailsField: 'googlePcTokenDetails',
  detailsSchema: gmsPcDetailsSchema,
  checkTitles: PC_CHECK_TITLES,
  reasons: [
    'gms_pc_not_configured',
    'gms_pc_decode_rejected',
    'gms_pc_payload_malformed',
    'gms_pc_nonce_mismatch',
    'gms_pc_package_mismatch',
    'gms_pc_integrity_insufficient',
    'gms_pc_token_stale',
  ],
  observable: [],
  subject: 'packageName',
  deviceKey: false,

  verifier: (p: KindPorts): PlatformVerifier | undefined =>
    createGooglePcVerifier({
      allowlist: p.allowlist,
      ...(p.googleDecoder ? { decoder: p.googleDecoder } : {}),
    }),
});
