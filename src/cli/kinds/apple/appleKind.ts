import type { CliKind } from '../cliKind.js';
import { appleAllowlist } from './appleAllowlist.js';
import { appleMintCommand } from './appleMint.js';
import { appleVerifyFile } from './appleVerifyFile.js';
import { appleWrapCommand } from './appleWrap.js';

/** Apple App Attest (`device.service` apple). */
export const appleKind: CliKind = {
  service: 'apple',
  wrapCommand: appleWrapCommand,
  mintCommand: appleMintCommand,
  allowlist: appleAllowlist,
  verifyFile: appleVerifyFile,
  examples: {
    dev: '$ attest dev mint apple --app-id ABCDE12345.com.example.bank --device dev.json --nonce <b64>',
    devMint:
      '$ attest dev mint apple --app-id ABCDE12345.com.example.bank --device dev.json --server-nonce <b64>',
    token: '$ attest token wrap apple --key-id <b64> --attestation attestation.cbor --nonce <b64>',
  },
};
