import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Command } from 'commander';
import { encodeBase64 } from '../../../core/base64.js';
import { encodeAndroidKeyToken } from '../../../core/dev/encodeToken.js';
import {
  androidChallenge,
  androidDeviceKeyOf,
  createAndroidDeviceKey,
  encodeKeyDescription,
  mintAttestationLeaf,
  signAndroidAssertion,
  type AndroidDeviceKey,
} from '../../../core/dev/androidKeyMint.js';
import { REVOCATION_SNAPSHOT } from '../../../core/android/revocationSnapshot.js';
import { parseCertificateDigest } from '../../../core/google/certificateDigest.js';
import { withAdmin } from '../../context.js';
import { runtimeError, usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';
import { deviceKeyFields, readDeviceFile, writeDevice } from '../deviceFile.js';

/** `attest dev mint android-key`: key attestation tokens from a simulated device, for test API keys. */
export function androidKeyMintCommand(): Command {
  return new Command('android-key')
    .description(
      'mint an Android key attestation token from a simulated device: a registration first, then assertions',
    )
    .option(
      '--package <name>',
      'an allowlisted Android package (required when the device file is new)',
    )
    .requiredOption(
      '--device <file>',
      'the simulated device (its attested P-256 key, kept 0600); created on first use',
    )
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce you will send to verify')
    .option(
      '--attest',
      'mint a registration even though the device has one (android_key_registered)',
    )
    .option('--unlocked', 'deny path: an unlocked device (android_boot_state_insufficient)')
    .option(
      '--software',
      'deny path: a software-attested key (android_security_level_insufficient)',
    )
    .option(
      '--wrong-challenge',
      'deny path: the challenge (or the assertion signature) binds another nonce (android_challenge_mismatch / android_signature_invalid)',
    )
    .option(
      '--stale-patch',
      'deny path: a patch level five years old (android_patch_level_stale when the package sets --max-patch-age)',
    )
    .option('--revoked', 'deny path: a leaf serial on the status list (android_chain_revoked)')
    .option('--json', 'print {"token","keyId"}')
    .addHelpText(
      'after',
      `
The first run creates the device file and mints a registration (a chain from the development CA,
"attest dev init"); later runs mint assertions. Test API keys accept them, live keys never do.

Examples:
  $ attest dev mint android-key --package com.example.app --device droid.json --nonce "$NONCE"
  $ attest dev mint android-key --device droid.json --server-nonce "$SERVER_NONCE" --json
  $ attest dev mint android-key --package com.example.app --device d2.json --nonce "$NONCE" --unlocked`,
    )
    .action(async (opts: AndroidMintOptions) => {
      const nonce = finalNonceOf(opts);
      const existing = existsSync(opts.device)
        ? readDeviceFile(opts.device, ANDROID_DEVICE_KIND, 'android-key', androidDeviceFields)
        : null;
      if (opts.package !== undefined && !ANDROID_PACKAGE.test(opts.package))
        throw usageError(
          `"${opts.package}" is not an Android package name such as com.example.app`,
        );
      if (existing && opts.package !== undefined && opts.package !== existing.packageName)
        throw usageError(
          `${opts.device} is a device of ${existing.packageName}; use another --device file for ${opts.package}`,
        );
      if (!existing && opts.package === undefined)
        throw usageError(`${opts.device} does not exist yet: give --package to create the device`);
      const device: AndroidDeviceFile = existing ?? newAndroidDevice(opts.package!);
      let key: AndroidDeviceKey;
      try {
        key = androidDeviceKeyOf(createPrivateKey(device.privateKey));
      } catch {
        throw usageError(`${opts.device}: the device key is not readable`);
      }
      if (encodeBase64(key.keyId) !== device.keyId)
        throw usageError(`${opts.device}: the key id does not match the device key`);
      const registration = !device.registered || opts.attest === true;
      const registrationOnly = (['unlocked', 'software', 'stalePatch', 'revoked'] as const).find(
        (k) => opts[k],
      );
      if (registrationOnly && !registration)
        throw usageError(
          `--${registrationOnly.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to registrations: add --attest, or use a new --device file`,
        );

      let token: Uint8Array;
      if (registration) {
        const { ca, digest } = await withAdmin(async (admin) => {
          const ca = await admin.run('dev.ca', {});
          const { android } = await admin.run('allowlist.list', {});
          const first = android.find((p) => p.packageName === device.packageName)
            ?.certificateDigests[0];
          return { ca, digest: first === undefined ? undefined : parseCertificateDigest(first) };
        });
        if (!ca)
          throw runtimeError(
            'this deployment has no development CA yet: run "attest dev init" first',
          );
        const now = new Date();
        const month = now.getUTCFullYear() * 100 + now.getUTCMonth() + 1;
        const description = encodeKeyDescription({
          challenge: androidChallenge(
            opts.wrongChallenge ? Buffer.concat([nonce, Buffer.from('x')]) : nonce,
          ),
          packages: [{ name: device.packageName, version: 1 }],
          signatureDigests: [
            digest ?? new Uint8Array(createHash('sha256').update('attest dev').digest()),
          ],
          ...(opts.software
            ? {
                attestationSecurityLevel: 'Software' as const,
                keyMintSecurityLevel: 'Software' as const,
              }
            : {}),
          ...(opts.unlocked
            ? { rootOfTrust: { deviceLocked: false, verifiedBootState: 'Unverified' as const } }
            : {}),
          osPatchLevel: opts.stalePatch ? month - 500 : month,
        });
        const leaf = await mintAttestationLeaf(
          { cert: ca.intermediateCert, key: ca.intermediateKey },
          key,
          {
            now,
            keyDescriptions: [description],
            serialHex: opts.revoked ? revokedSerial() : randomSerial(),
          },
        );
        token = encodeAndroidKeyToken({
          nonce,
          packageName: device.packageName,
          keyId: key.keyId,
          certificateChain: [leaf, ca.intermediateCert],
        });
      } else {
        const signed = opts.wrongChallenge ? Buffer.concat([nonce, Buffer.from('x')]) : nonce;
        token = encodeAndroidKeyToken({
          nonce,
          packageName: device.packageName,
          keyId: key.keyId,
          signature: signAndroidAssertion(key, signed),
        });
      }
      const denyPath =
        opts.wrongChallenge === true || registrationOnly !== undefined || opts.attest === true;
      if (!denyPath) device.registered = true;
      if (!denyPath || existing === null) writeDevice(opts.device, device, existing === null);
      printToken(token, opts.json, { keyId: key.keyId });
    });
}

const ANDROID_DEVICE_KIND = 'attest-simulated-android-key-device';

interface AndroidMintOptions extends NonceFlags {
  package?: string;
  device: string;
  attest?: boolean;
  unlocked?: boolean;
  software?: boolean;
  wrongChallenge?: boolean;
  stalePatch?: boolean;
  revoked?: boolean;
  json?: boolean;
}

interface AndroidDeviceFile {
  kind: typeof ANDROID_DEVICE_KIND;
  version: 1;
  packageName: string;
  /** base64 SHA-256 of the key's SPKI */
  keyId: string;
  /** PKCS#8 PEM of the attested key */
  privateKey: string;
  /** a registration was minted */
  registered: boolean;
}

function newAndroidDevice(packageName: string): AndroidDeviceFile {
  const key = createAndroidDeviceKey();
  return {
    kind: ANDROID_DEVICE_KIND,
    version: 1,
    packageName,
    ...deviceKeyFields(key),
    registered: false,
  };
}

/** Whether a device file's own fields are those of this kind. */
const androidDeviceFields = (parsed: Partial<AndroidDeviceFile>): boolean =>
  typeof parsed.packageName === 'string' &&
  ANDROID_PACKAGE.test(parsed.packageName) &&
  typeof parsed.registered === 'boolean';

/** A serial on the shipped status list: the service refuses the leaf (android_chain_revoked). */
function revokedSerial(): string {
  const serial = Object.keys(REVOCATION_SNAPSHOT)[0]!;
  return serial.length % 2 ? `0${serial}` : serial;
}

function randomSerial(): string {
  return `1${randomBytes(8).toString('hex')}`;
}
