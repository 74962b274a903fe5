import { createHash, X509Certificate } from 'node:crypto';
import { Command } from 'commander';
import { readAttestationCertificate } from '../../core/android/attestationCertificate.js';
import { decodeBase64 } from '../../core/base64.js';
import {
  encodeAndroidKeyToken,
  encodeAppleToken,
  encodeGmsToken,
} from '../../core/dev/encodeToken.js';
import { INTEGRITY_TOKEN_MAX_BYTES } from '../../core/google/googleVerifier.js';
import { usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFile } from '../inputFiles.js';
import { finalNonceOf, printToken, type NonceFlags } from '../tokenOutput.js';
import { ANDROID_PACKAGE } from './allowlist.js';

const KEY_ID_BYTES = 32;

export function tokenCommand(): Command {
  const examples = `
Examples:
  $ attest token wrap apple --key-id <b64> --attestation attestation.cbor --nonce <b64>
  $ attest token wrap gms --package com.example.bank --integrity-token token.jwe --nonce <b64>
  $ attest token wrap android-key --package com.example.bank --chain chain.pem --nonce <b64>`;
  const token = new Command('token')
    .description('build format-1 tokens from evidence an app captured')
    .addHelpText('after', examples);
  const wrap = token
    .command('wrap')
    .description('wrap raw platform evidence into a format-1 token (base64 on stdout)')
    .addHelpText('after', examples);

  wrap
    .command('apple')
    .description('wrap an App Attest attestation and/or assertion object')
    .requiredOption(
      '--key-id <b64>',
      'the App Attest key identifier (32 bytes, base64 as attestKey returns it)',
    )
    .option(
      '--attestation <file>',
      'the attestation object from attestKey (raw CBOR or base64 text)',
    )
    .option(
      '--assertion <file>',
      'the assertion object from generateAssertion (raw CBOR or base64 text)',
    )
    .option('--nonce <b64>', 'the final nonce the app hashed into clientDataHash (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token","keyId"}')
    .addHelpText(
      'after',
      `
The app must have used clientDataHash = SHA-256(final nonce).

Examples:
  $ attest token wrap apple --key-id "$KEY_ID" --attestation attestation.cbor --nonce "$NONCE"
  $ attest token wrap apple --key-id "$KEY_ID" --assertion assertion.b64 --server-nonce "$SERVER_NONCE"`,
    )
    .action(
      async (
        opts: NonceFlags & {
          keyId: string;
          attestation?: string;
          assertion?: string;
          json?: boolean;
        },
      ) => {
        const keyId = decodeBase64(opts.keyId);
        if (!keyId || keyId.length !== KEY_ID_BYTES)
          throw usageError(
            `--key-id must be base64 of ${KEY_ID_BYTES} bytes (the key identifier attestKey returned)`,
          );
        if (opts.attestation === undefined && opts.assertion === undefined)
          throw usageError('give --attestation <file>, --assertion <file>, or both');
        const nonce = finalNonceOf(opts);
        const attestation =
          opts.attestation === undefined
            ? undefined
            : await readObject(opts.attestation, '--attestation');
        const assertion =
          opts.assertion === undefined
            ? undefined
            : await readObject(opts.assertion, '--assertion');
        printToken(
          encodeAppleToken({
            nonce,
            keyId,
            ...(attestation ? { attestation } : {}),
            ...(assertion ? { assertion } : {}),
          }),
          opts.json,
          { keyId },
        );
      },
    );

  wrap
    .command('gms')
    .description('wrap a Play Integrity integrity token (the compact JWE the app received)')
    .requiredOption('--package <name>', 'the Android package that requested it')
    .requiredOption('--integrity-token <file>', 'file holding the integrity token text')
    .option('--nonce <b64>', 'the final nonce the app requested the token with (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
The app must have requested the token with nonce = base64url(final nonce), no padding.

Example:
  $ attest token wrap gms --package com.example.app --integrity-token play.jwe --nonce "$NONCE"`,
    )
    .action(
      async (opts: NonceFlags & { package: string; integrityToken: string; json?: boolean }) => {
        if (!ANDROID_PACKAGE.test(opts.package))
          throw usageError(
            `"${opts.package}" is not an Android package name such as com.example.app`,
          );
        const nonce = finalNonceOf(opts);
        const text = (await readText(opts.integrityToken, '--integrity-token')).trim();
        if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*){4}$/.test(text)) {
          throw usageError(
            `${opts.integrityToken} does not hold a compact JWE (five base64url parts joined by dots), which is what the Play Integrity API returns`,
          );
        }
        if (Buffer.byteLength(text) > INTEGRITY_TOKEN_MAX_BYTES)
          throw usageError(`the integrity token is over ${INTEGRITY_TOKEN_MAX_BYTES} bytes`);
        printToken(
          encodeGmsToken({ nonce, packageName: opts.package, integrityToken: text }),
          opts.json,
        );
      },
    );

  wrap
    .command('android-key')
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

  return token;
}

/** The DER certificates of a file: one DER certificate, or PEM text holding one or more. */
async function readCertificates(path: string): Promise<Uint8Array[]> {
  const raw = await readRaw(path, '--chain');
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

function readRaw(path: string, flag: string): Promise<Buffer> {
  return readCliFile(path, { maxBytes: CLI_INPUT_MAX_BYTES, what: flag, stdin: true });
}

async function readText(path: string, flag: string): Promise<string> {
  return (await readRaw(path, flag)).toString('utf8');
}

/** An App Attest object: raw CBOR (a map) or its base64 text, as apps often log it. */
async function readObject(path: string, flag: string): Promise<Uint8Array> {
  const raw = await readRaw(path, flag);
  if (raw.length === 0) throw usageError(`${flag}: ${path} is empty`);
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw[0]! >> 5 === 5) return new Uint8Array(raw);
  const bytes = decodeBase64(raw.toString('latin1').replace(/\s+/g, ''));
  if (!bytes || bytes.length === 0 || bytes[0]! >> 5 !== 5)
    throw usageError(`${flag}: ${path} is neither a CBOR object nor its base64 text`);
  return bytes;
}
