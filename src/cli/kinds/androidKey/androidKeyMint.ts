import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Command, Option } from 'commander';
import { encodeCbor } from '../../../core/envelope.js';
import { encodeBase64 } from '../../../core/base64.js';
import { encodeAndroidKeyToken } from '../../../core/androidKey/androidKeyToken.js';
import {
  androidChallenge,
  androidDeviceKeyOf,
  createAndroidDeviceKey,
  encodeKeyDescription,
  mintAttestationCertificate,
  mintAttestationLeaf,
  signAndroidAssertion,
  type AndroidDeviceKey,
} from '../../../core/dev/androidKeyMint.js';
import { REVOCATION_SNAPSHOT } from '../../../core/androidKey/revocationSnapshot.js';
import { parseCertificateDigest } from '../../../core/gms/certificateDigest.js';
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
    .option(
      '--self-signed-boot <hex>',
      'a locked device booting an OS signed with its own key: verifiedBootState SelfSigned with this 32-byte verifiedBootKey (what allowlist --boot-key trusts)',
    )
    .option(
      '--patch-level <yyyymm>',
      'the osPatchLevel the key description states, e.g. 202503 (what --max-patch-age reads; default this month)',
    )
    .addOption(
      new Option(
        '--security-level <level>',
        'the level the key description and the attestation certificate subject state (default tee: no attestation certificate)',
      ).choices(['tee', 'strongbox']),
    )
    .option(
      '--claim-strongbox',
      'deny path: the key description says StrongBox under a TEE attestation certificate (android_security_level_mismatch)',
    )
    .option(
      '--attestation-version <n>',
      'KeyDescription attestation and KeyMint version (default 300; 400, 500, or a later one)',
    )
    .option('--ml-dsa-variant <n>', 'tag 11 ML_DSA_VARIANT (shown in androidKeyDetails)')
    .option('--usage-count-limit <n>', 'tag 405 USAGE_COUNT_LIMIT (shown in androidKeyDetails)')
    .option('--trusted-confirmation', 'tag 508 TRUSTED_CONFIRMATION_REQUIRED (shown)')
    .option('--module-hash <hex>', 'tag 724 MODULE_HASH, 1 to 64 bytes of hex (shown)')
    .option(
      '--unknown-tag <n>',
      'a tag of a later schema, carried as data (unknownTags); repeatable',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--provisioning-info <n>',
      'an attestation certificate with the provisioning information extension, certificatesIssued n',
    )
    .option(
      '--future-patch',
      'deny path: patch levels three months ahead of today (android_patch_level_future)',
    )
    .option('--imported', 'deny path: origin IMPORTED (android_key_not_generated)')
    .option(
      '--subject-revoked',
      'deny path: an attestation certificate whose subject serialNumber is on the status list (android_chain_revoked)',
    )
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
      const registrationOnly = (
        [
          'unlocked',
          'software',
          'stalePatch',
          'revoked',
          'securityLevel',
          'claimStrongbox',
          'attestationVersion',
          'mlDsaVariant',
          'usageCountLimit',
          'trustedConfirmation',
          'moduleHash',
          'unknownTag',
          'provisioningInfo',
          'futurePatch',
          'selfSignedBoot',
          'patchLevel',
          'imported',
          'subjectRevoked',
        ] as const
      ).find((k) => opts[k] !== undefined && opts[k] !== false);
      const number = (flag: string, text: string | undefined, max: number) => {
        if (text === undefined) return undefined;
        if (!/^\d{1,10}$/.test(text) || Number(text) > max)
          throw usageError(`${flag} takes a whole number from 0 to ${max}, got "${text}"`);
        return Number(text);
      };
      const version = number('--attestation-version', opts.attestationVersion, 100_000);
      const mlDsaVariant = number('--ml-dsa-variant', opts.mlDsaVariant, 2 ** 31 - 1);
      const usageCountLimit = number('--usage-count-limit', opts.usageCountLimit, 2 ** 31 - 1);
      const certificatesIssued = number('--provisioning-info', opts.provisioningInfo, 2 ** 31 - 1);
      const unknownTags = (opts.unknownTag ?? []).map((t) => {
        const n = number('--unknown-tag', t, 2 ** 28)!;
        if (KNOWN_TAGS.has(n)) throw usageError(`--unknown-tag ${n} is a tag this service knows`);
        return n;
      });
      if (opts.moduleHash !== undefined && !/^([0-9a-fA-F]{2}){1,64}$/.test(opts.moduleHash))
        throw usageError(`--module-hash takes 1 to 64 bytes of hex, got "${opts.moduleHash}"`);
      if (opts.selfSignedBoot !== undefined && !/^[0-9a-fA-F]{64}$/.test(opts.selfSignedBoot))
        throw usageError(
          `--self-signed-boot takes a 32-byte verifiedBootKey in hex, got "${opts.selfSignedBoot}"`,
        );
      if (opts.patchLevel !== undefined && !/^(19|20)\d\d(0[1-9]|1[0-2])$/.test(opts.patchLevel))
        throw usageError(`--patch-level takes a month as YYYYMM, got "${opts.patchLevel}"`);
      const given = ['unlocked', 'selfSignedBoot'].filter(
        (k) => opts[k as keyof AndroidMintOptions],
      );
      if (given.length > 1) throw usageError('give --unlocked or --self-signed-boot, not both');
      if (
        [opts.stalePatch, opts.futurePatch, opts.patchLevel !== undefined].filter(Boolean).length >
        1
      )
        throw usageError('give one of --stale-patch, --future-patch and --patch-level');
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
          ...(opts.selfSignedBoot
            ? {
                rootOfTrust: {
                  verifiedBootKey: new Uint8Array(Buffer.from(opts.selfSignedBoot, 'hex')),
                  deviceLocked: true,
                  verifiedBootState: 'SelfSigned' as const,
                },
              }
            : {}),
          ...(opts.securityLevel === 'strongbox' || opts.claimStrongbox
            ? {
                attestationSecurityLevel: 'StrongBox' as const,
                keyMintSecurityLevel: 'StrongBox' as const,
              }
            : {}),
          ...(version !== undefined
            ? { attestationVersion: version, keyMintVersion: version }
            : {}),
          ...(mlDsaVariant !== undefined ? { mlDsaVariant } : {}),
          ...(usageCountLimit !== undefined ? { usageCountLimit } : {}),
          ...(opts.trustedConfirmation ? { trustedConfirmationRequired: true } : {}),
          ...(opts.moduleHash ? { moduleHash: Buffer.from(opts.moduleHash, 'hex') } : {}),
          ...(unknownTags.length ? { unknownTags } : {}),
          ...(opts.imported ? { origin: 2 } : {}),
          // three calendar months ahead: one more than a preview build may be
          osPatchLevel: opts.stalePatch
            ? month - 500
            : opts.futurePatch
              ? monthsAhead(now, 3)
              : opts.patchLevel !== undefined
                ? Number(opts.patchLevel)
                : month,
          ...(opts.futurePatch ? { vendorPatchLevel: monthsAhead(now, 3) * 100 + 5 } : {}),
        });
        // an attestation certificate between the leaf and the development intermediate, whose
        // subject says the level (as factory ones do) and which may carry the provisioning info
        const level =
          opts.securityLevel === 'strongbox' ? 'StrongBox' : opts.claimStrongbox ? 'TEE' : null;
        const withAttestationCertificate =
          level !== null || certificatesIssued !== undefined || opts.subjectRevoked === true;
        const issuer = withAttestationCertificate
          ? await mintAttestationCertificate(
              { cert: ca.intermediateCert, key: ca.intermediateKey },
              {
                subject: `2.5.4.5=${opts.subjectRevoked ? revokedSerial() : randomSerial()}, 2.5.4.12=${level ?? 'TEE'}`,
                serialHex: randomSerial(),
                now,
                ...(certificatesIssued !== undefined
                  ? {
                      provisioningInfo: encodeCbor(
                        new Map<number, unknown>([
                          [1, certificatesIssued],
                          [3, 'attest dev'],
                        ]),
                      ),
                    }
                  : {}),
              },
            )
          : { cert: ca.intermediateCert, key: ca.intermediateKey };
        const leaf = await mintAttestationLeaf(issuer, key, {
          now,
          keyDescriptions: [description],
          serialHex: opts.revoked ? revokedSerial() : randomSerial(),
        });
        token = encodeAndroidKeyToken({
          nonce,
          packageName: device.packageName,
          keyId: key.keyId,
          certificateChain: withAttestationCertificate
            ? [leaf, issuer.cert, ca.intermediateCert]
            : [leaf, ca.intermediateCert],
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
  securityLevel?: 'tee' | 'strongbox';
  claimStrongbox?: boolean;
  attestationVersion?: string;
  mlDsaVariant?: string;
  usageCountLimit?: string;
  trustedConfirmation?: boolean;
  moduleHash?: string;
  unknownTag?: string[];
  provisioningInfo?: string;
  futurePatch?: boolean;
  selfSignedBoot?: string;
  patchLevel?: string;
  imported?: boolean;
  subjectRevoked?: boolean;
  json?: boolean;
}

/** Tags the KeyDescription schema this service reads knows (not "unknown"). */
const KNOWN_TAGS = new Set([
  1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 200, 203, 303, 305, 400, 401, 402, 405, 503, 504, 505, 506, 507,
  508, 509, 600, 601, 701, 702, 703, 704, 705, 706, 709, 710, 711, 712, 713, 714, 715, 716, 717,
  718, 719, 720, 723, 724,
]);

/** YYYYMM `months` calendar months after `now` (UTC). */
function monthsAhead(now: Date, months: number): number {
  const index = now.getUTCFullYear() * 12 + now.getUTCMonth() + months;
  return Math.floor(index / 12) * 100 + (index % 12) + 1;
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
