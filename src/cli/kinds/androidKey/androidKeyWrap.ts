import { createHash, X509Certificate } from 'node:crypto';
import { Command } from 'commander';
import { readAttestationCertificate } from '../../../core/androidKey/attestationCertificate.js';
import { decodeBase64 } from '../../../core/base64.js';
import { encodeAndroidKeyToken } from '../../../core/androidKey/androidKeyToken.js';
import { usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';
import { readWrapInput } from '../wrapInput.js';

/** `attest token wrap android-key`: a captured key attestation chain, as a format-1 token. */
export function androidKeyWrapCommand(): Command {
  return new Command('android-key')
    .description('wrap a captured Android key attestation certificate chain (registration)')
    .requiredOption('--package <name>', 'the Android package that made the key')
    .requiredOption(
      '--chain <file...>',
      'the certificates, leaf first: one DER or PEM file each, or one PEM file holding them all',
    )
    .option('--nonce <b64>', 'the final nonce the app hashed into the challenge (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token","keyId"}')
    .addHelpText(
      'after',
      `
The app must have created the key with setAttestationChallenge(SHA-256(final nonce)). keyId is
computed from the leaf (SHA-256 of its SubjectPublicKeyInfo).

Examples:
  $ attest token wrap android-key --package com.example.app --chain chain.pem --nonce "$NONCE"
  $ attest token wrap android-key --package com.example.app --chain leaf.der ca.der --nonce "$NONCE"`,
    )
    .action(async (opts: NonceFlags & { package: string; chain: string[]; json?: boolean }) => {
      if (!ANDROID_PACKAGE.test(opts.package))
        throw usageError(
          `"${opts.package}" is not an Android package name such as com.example.app`,
        );
      const nonce = finalNonceOf(opts);
      const chain: Uint8Array[] = [];
      for (const path of opts.chain) chain.push(...(await readCertificates(path)));
      if (chain.length > 10)
        throw usageError(`--chain holds ${chain.length} certificates; at most 10`);
      let spki: Uint8Array;
      try {
        // read as the service reads it: the exact SubjectPublicKeyInfo bytes of the leaf
        spki = readAttestationCertificate(chain[0]!, 'the leaf').spki;
      } catch (err) {
        throw usageError(`--chain: ${(err as Error).message}`);
      }
      const keyId = createHash('sha256').update(spki).digest();
      printToken(
        encodeAndroidKeyToken({
          nonce,
          packageName: opts.package,
          keyId,
          certificateChain: chain,
        }),
        opts.json,
        { keyId },
      );
    });
}

/** The DER certificates of a file: one DER certificate, or PEM text holding one or more. */
async function readCertificates(path: string): Promise<Uint8Array[]> {
  const raw = await readWrapInput(path, '--chain');
  const text = raw.toString('latin1');
  if (text.includes('-----BEGIN')) {
    const blocks = [
      ...text.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g),
    ];
    if (blocks.length === 0) throw usageError(`--chain: ${path} has no PEM certificate`);
    return blocks.map((m) => {
      const der = decodeBase64(m[1]!.replace(/\s+/g, ''));
      if (!der) throw usageError(`--chain: ${path} has a PEM block that is not base64`);
      return checkCertificate(der, path);
    });
  }
  return [checkCertificate(new Uint8Array(raw), path)];
}

function checkCertificate(der: Uint8Array, path: string): Uint8Array {
  try {
    if (!new X509Certificate(der).raw.equals(der)) throw new Error('bytes around it');
  } catch {
    throw usageError(`--chain: ${path} is not a DER or PEM certificate`);
  }
  return der;
}
