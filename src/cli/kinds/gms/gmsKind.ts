import type { CliKind } from '../cliKind.js';
import { androidAllowlist } from './androidAllowlist.js';
import { gmsMintCommand } from './gmsMint.js';
import { gmsVerifyFile } from './gmsVerifyFile.js';
import { gmsWrapCommand } from './gmsWrap.js';

/** Google Play Integrity (`device.service` gms); it owns the Android package entry of the allowlist. */
export const gmsKind: CliKind = {
  service: 'gms',
  wrapCommand: gmsWrapCommand,
  mintCommand: gmsMintCommand,
  allowlist: androidAllowlist,
  verifyFile: gmsVerifyFile,
  examples: {
    dev: '$ attest dev mint gms --package com.example.bank --nonce <b64>',
    devMint:
      '$ attest dev mint gms --package com.example.bank --nonce <b64> --verdict strong --json',
    token:
      '$ attest token wrap gms --package com.example.bank --integrity-token token.jwe --nonce <b64>',
  },
};
