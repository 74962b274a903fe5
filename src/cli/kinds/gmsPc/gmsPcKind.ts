import type { CliKind } from '../cliKind.js';
import { gmsPcMintCommand } from './gmsPcMint.js';
import { gmsPcVerifyFile } from './gmsPcVerifyFile.js';
import { gmsPcWrapCommand } from './gmsPcWrap.js';

/**
 * Play Integrity for PC (`device.service` gms-pc); its policy is the Android package entry's
 * (its service account and maximum age), which the Play Integrity kind owns.
 */
export const gmsPcKind: CliKind = {
  service: 'gms-pc',
  wrapCommand: gmsPcWrapCommand,
  mintCommand: gmsPcMintCommand,
  verifyFile: gmsPcVerifyFile,
  examples: {
    dev: '$ attest dev mint gms-pc --package com.example.game --nonce <b64>',
    token:
      '$ attest token wrap gms-pc --package com.example.game --integrity-token pc.txt --nonce <b64>',
  },
};
