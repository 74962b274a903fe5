import type { CliKind } from '../cliKind.js';
import { androidKeyMintCommand } from './androidKeyMint.js';
import { androidKeyVerifyFile } from './androidKeyVerifyFile.js';
import { androidKeyWrapCommand } from './androidKeyWrap.js';

/** Android hardware key attestation (`device.service` android-key); its policy lives on the package entry. */
export const androidKeyKind: CliKind = {
  service: 'android-key',
  wrapCommand: androidKeyWrapCommand,
  mintCommand: androidKeyMintCommand,
  verifyFile: androidKeyVerifyFile,
  unrecordedUse:
    'not recorded (android-key keys record use only while their package counts verifies)',
  examples: {
    dev: '$ attest dev mint android-key --package com.example.bank --device droid.json --nonce <b64>',
    token:
      '$ attest token wrap android-key --package com.example.bank --chain chain.pem --nonce <b64>',
  },
};
