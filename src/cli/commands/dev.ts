import { createHash, createPrivateKey, randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { decodeBase64, encodeBase64 } from '../../core/base64.js';
import { VALIDATION_CATEGORY_NAMES } from '../../core/apple/appleDistribution.js';
import {
  createSimulatedKey,
  loadSimulatedKey,
  mintAssertion,
  mintAttestation,
  type SimulatedKey,
} from '../../core/dev/devCa.js';
import { encodeAndroidKeyToken, encodeAppleToken } from '../../core/dev/encodeToken.js';
import type { Recognition } from '../../core/dev/playIntegrityMint.js';
import {
  androidChallenge,
  androidDeviceKeyOf,
  createAndroidDeviceKey,
  encodeKeyDescription,
  mintAttestationLeaf,
  signAndroidAssertion,
  type AndroidDeviceKey,
} from '../../core/dev/androidKeyMint.js';
import { REVOCATION_SNAPSHOT } from '../../core/android/revocationSnapshot.js';
import { parseCertificateDigest } from '../../core/google/certificateDigest.js';
import {
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  type MinVerdictLevel,
} from '../../core/google/deviceVerdict.js';
import type { AppleEnvironment } from '../../core/types.js';
import { auditorFor, withAdmin } from '../context.js';
import { parseDuration } from '../../duration.js';
import { writePrivateFile } from '../../writePrivateFile.js';
import { CliError, runtimeError, usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../inputFiles.js';
import { printJson } from '../output.js';
import { finalNonceOf, printToken, type NonceFlags } from '../tokenOutput.js';
import { ANDROID_PACKAGE, APPLE_APP_ID } from './allowlist.js';
import { devUpCommand } from './devUp.js';

const UINT32_MAX = 0xffffffff;
const DEVICE_KIND = 'attest-simulated-app-attest-device';

export function devCommand(): Command {
  const dev = new Command('dev')
    .description('development roots and test tokens for test-mode API keys (no device needed)')
    .addHelpText(
      'after',
      `
Examples:
  $ attest dev up                  # the service, a test key and the development CA, in one command
  $ attest dev init
  $ attest dev mint apple --app-id ABCDE12345.com.example.bank --device dev.json --nonce <b64>
  $ attest dev mint gms --package com.example.bank --nonce <b64>
  $ attest dev mint android-key --package com.example.bank --device droid.json --nonce <b64>`,
    );

  dev.addCommand(devUpCommand());

  dev
    .command('init')
    .description(
      'create the development App Attest CA in the database (once; test API keys trust it)',
    )
    .option('--rotate', 'replace the existing CA: tokens minted under the old one stop verifying')
    .option('--json', 'print {"created","rotated","rootSha256","createdAt"}')
    .addHelpText('after', '\nExamples:\n  $ attest dev init\n  $ attest dev init --rotate')
    .action(async (opts: { rotate?: boolean; json?: boolean }, command: Command) => {
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const { stored, ...ca } = await admin.run('dev.init', { rotate: opts.rotate === true });
          const rootSha256 = createHash('sha256').update(ca.rootCert).digest('hex');
          if (opts.json) {
            printJson({
              created: stored,
              rotated: stored && opts.rotate === true,
              rootSha256,
              createdAt: ca.createdAt.toISOString(),
            });
            return;
          }
          const subject = new X509Certificate(ca.rootCert).subject.replace(/\n/g, ', ');
          process.stdout.write(
            stored
              ? `${opts.rotate ? 'replaced the' : 'created a'} development App Attest CA (${subject}; root SHA-256 ${rootSha256}); test API keys trust it, live keys never do\n`
              : `the development App Attest CA exists (created ${ca.createdAt.toISOString()}; root SHA-256 ${rootSha256}); "attest dev init --rotate" replaces it\n`,
          );
        },
        { auditor },
      );
    });

  dev
    .command('receipts')
    .description('App Attest receipts made with the development CA, for keys of test API keys')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest dev receipts refresh 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --risk-metric 9',
    )
    .command('refresh')
    .description(
      "store a refreshed receipt with this risk metric for a test-mode key: the key's next assertion sees it",
    )
    .argument('<key-id>', 'the key id, base64 (as appleTokenDetails.keyIdentifier shows it)')
    .requiredOption('--risk-metric <n>', "Apple's risk metric to report (0 to 999999999)")
    .option('--json', 'print {"keyId","riskMetric","creationTime","expirationTime"}')
    .addHelpText(
      'after',
      `
The key must have been registered with a test API key and with a receipt
(attest dev mint apple --receipt). Live keys are refused.

Example:
  $ attest dev receipts refresh 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --risk-metric 9`,
    )
    .action(async (keyIdText: string, opts: { riskMetric: string; json?: boolean }) => {
      const keyId = decodeBase64(keyIdText.trim());
      if (!keyId || keyId.length !== 32)
        throw usageError(`"${keyIdText}" is not a key id: base64 of 32 bytes`);
      if (!/^\d{1,9}$/.test(opts.riskMetric))
        throw usageError(
          `--risk-metric "${opts.riskMetric}" is not an integer from 0 to 999999999`,
        );
      const riskMetric = Number(opts.riskMetric);
      const result = await withAdmin((admin) =>
        admin.run('dev.refreshReceipt', { keyId, riskMetric }),
      );
      const doc = {
        keyId: keyIdText.trim(),
        riskMetric: result.riskMetric,
        creationTime: result.creationTime.toISOString(),
        expirationTime: result.expirationTime?.toISOString() ?? null,
      };
      if (opts.json) printJson(doc);
      else
        process.stdout.write(
          `stored a development receipt for ${doc.keyId}: risk metric ${doc.riskMetric}, expires ${doc.expirationTime}\n`,
        );
    });

  const mint = dev
    .command('mint')
    .description('mint a token as a device would, for test API keys')
    .addHelpText(
      'after',
      `
Examples:
  $ attest dev mint apple --app-id ABCDE12345.com.example.bank --device dev.json --server-nonce <b64>
  $ attest dev mint gms --package com.example.bank --nonce <b64> --verdict strong --json`,
    );

  mint
    .command('apple')
    .description(
      'mint an App Attest token from a simulated device: a registration first, then assertions',
    )
    .option('--app-id <id>', 'TEAMID.bundle.id (required when the device file is new)')
    .requiredOption(
      '--device <file>',
      'the simulated device (its P-256 key and key id, kept 0600); created on first use',
    )
    .addOption(
      new Option(
        '--env <env>',
        "App Attest environment of attestations (default: the device's, else production)",
      ).choices(['development', 'production']),
    )
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce you will send to verify')
    .option('--counter <n>', 'assertion counter (default: one more than the last minted)')
    .option('--attest', 'mint a registration (attestation) even though the device has one')
    .option('--both', 'mint attestation plus assertion (the third token shape)')
    .option(
      '--wrong-nonce',
      'deny path: the evidence binds another nonce (apple_nonce_mismatch / apple_signature_invalid)',
    )
    .option('--wrong-app-id', 'deny path: the evidence names another app (apple_app_not_allowed)')
    .option('--expired', 'deny path: the attestation leaf expired days ago (apple_chain_invalid)')
    .option(
      '--receipt',
      'attach a receipt signed through the development CA to the attestation (test keys only)',
    )
    .addOption(
      new Option(
        '--validation-category <name>',
        'iOS 27 authData extension apple_validation_category_01 (attestation and assertion)',
      ).choices(VALIDATION_CATEGORY_NAMES),
    )
    .option(
      '--bundle-version <v>',
      'iOS 27 authData extension apple_bundle_version_01 (attestation and assertion)',
    )
    .option('--json', 'print {"token","keyId","counter"}')
    .addHelpText(
      'after',
      `
The first run creates the device file and mints a registration; later runs mint assertions
with the next counter. The device file holds a private key: keep it out of source control.

Examples:
  $ attest dev mint apple --app-id ABCDE12345.com.example.app --device dev.json --nonce "$NONCE"
  $ attest dev mint apple --device dev.json --server-nonce "$SERVER_NONCE" --json
  $ attest dev mint apple --device dev.json --nonce "$NONCE" --counter 1   # a replay
  $ attest dev mint apple --app-id ABCDE12345.com.example.app --device ios27.json --nonce "$NONCE" --receipt --validation-category appstore --bundle-version 4.2`,
    )
    .action(async (opts: AppleMintOptions) => {
      const nonce = finalNonceOf(opts);
      const clientDataHash = createHash('sha256').update(nonce).digest();
      const existing = existsSync(opts.device) ? readDevice(opts.device) : null;
      if (opts.appId !== undefined && !APPLE_APP_ID.test(opts.appId))
        throw usageError(`--app-id "${opts.appId}" is not TEAMID.bundle.id`);
      if (existing && opts.appId !== undefined && opts.appId !== existing.appId) {
        throw usageError(
          `${opts.device} is a device of ${existing.appId}; use another --device file for ${opts.appId} (or --wrong-app-id for a deny test)`,
        );
      }
      if (!existing && opts.appId === undefined)
        throw usageError(`${opts.device} does not exist yet: give --app-id to create the device`);
      if (opts.attest && opts.both) throw usageError('give --attest or --both, not both');
      const device: DeviceFile =
        existing ??
        newDevice(opts.appId!, opts.env === 'development' ? 'Development' : 'Production');
      if (opts.env) device.environment = opts.env === 'development' ? 'Development' : 'Production';
      const key = loadKey(device, opts.device);

      const attestation =
        !existing || !device.attested || opts.attest === true || opts.both === true;
      const assertion = opts.both === true || !attestation;
      if (opts.expired && !attestation)
        throw usageError('--expired applies to attestations: add --attest or --both');
      if (opts.receipt && !attestation)
        throw usageError('--receipt applies to attestations: add --attest or --both');
      if (opts.bundleVersion !== undefined && !/^[\x21-\x7e]{1,64}$/.test(opts.bundleVersion))
        throw usageError('--bundle-version is 1 to 64 printable ASCII characters, no spaces');
      const distribution = {
        ...(opts.validationCategory ? { validationCategory: opts.validationCategory } : {}),
        ...(opts.bundleVersion !== undefined ? { bundleVersion: opts.bundleVersion } : {}),
      };
      let counter = 0;
      if (assertion) {
        counter = opts.counter === undefined ? device.counter + 1 : counterFlag(opts.counter);
        if (counter === 0) throw usageError('an assertion counter must be at least 1');
        if (counter > UINT32_MAX)
          throw usageError('the device counter is exhausted: create a new --device file');
      } else if (opts.counter !== undefined) {
        throw usageError(
          '--counter applies to assertions; a registration always has counter 0 (add --both for attestation plus assertion)',
        );
      }
      const appId = opts.wrongAppId ? wrongAppId(device.appId) : device.appId;

      let attestationObject: Uint8Array | undefined;
      if (attestation) {
        const ca = await withAdmin((admin) => admin.run('dev.ca', {}));
        if (!ca)
          throw runtimeError(
            'this deployment has no development CA yet: run "attest dev init" first',
          );
        attestationObject = await mintAttestation(ca, key, {
          appId,
          environment: device.environment,
          clientDataHash,
          now: new Date(),
          ...(opts.wrongNonce && !assertion ? { wrongNonce: true } : {}),
          ...(opts.expired ? { expired: true } : {}),
          ...(opts.receipt ? { receipt: true } : {}),
          distribution,
        });
      }
      const assertionObject = assertion
        ? mintAssertion(key, {
            appId,
            counter,
            clientDataHash,
            ...(opts.wrongNonce ? { wrongNonce: true } : {}),
            distribution,
          })
        : undefined;
      const token = encodeAppleToken({
        nonce,
        keyId: key.keyId,
        ...(attestationObject ? { attestation: attestationObject } : {}),
        ...(assertionObject ? { assertion: assertionObject } : {}),
      });

      // a deny-path token is refused by the service, so it changes nothing the device remembers
      const denyPath =
        opts.wrongNonce === true || opts.wrongAppId === true || opts.expired === true;
      if (!denyPath) {
        device.attested = true;
        device.counter = Math.max(device.counter, counter);
      }
      if (!denyPath || existing === null) writeDevice(opts.device, device, existing === null);
      printToken(token, opts.json, { keyId: key.keyId, counter });
    });

  mint
    .command('android-key')
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
      const existing = existsSync(opts.device) ? readAndroidDevice(opts.device) : null;
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
      if (!denyPath || existing === null)
        writeDevice(opts.device, device as never, existing === null);
      printToken(token, opts.json, { keyId: key.keyId });
    });

  mint
    .command('gms')
    .description(
      "mint a Play Integrity token sealed with the package's test-only key pair (made on first use)",
    )
    .requiredOption('--package <name>', 'an allowlisted Android package')
    .addOption(
      new Option('--verdict <level>', "device integrity (default: the package's minimum)").choices(
        MIN_VERDICT_LEVEL_NAMES,
      ),
    )
    .addOption(
      new Option('--recognition <verdict>', 'app recognition verdict')
        .choices(['PLAY_RECOGNIZED', 'UNRECOGNIZED_VERSION', 'UNEVALUATED'])
        .default('PLAY_RECOGNIZED'),
    )
    .option(
      '--cert-digest <digest>',
      "signing certificate SHA-256 (hex or base64; default: the package's first allowed one)",
    )
    .option('--issued-at <iso-time>', 'when Play issued the verdict (default now)')
    .option('--age <duration>', 'or: issued this long ago, e.g. 30s, 5m')
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce you will send to verify')
    .option('--wrong-nonce', 'deny path: the verdict binds another nonce (gms_nonce_mismatch)')
    .option(
      '--wrong-package',
      'deny path: the verdict names another requesting package (gms_package_mismatch)',
    )
    .option('--stale', "deny path: issued just beyond the package's maximum age (gms_token_stale)")
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist add android com.example.app --without-keys
  $ attest dev mint gms --package com.example.app --nonce "$NONCE"
  $ attest dev mint gms --package com.example.app --server-nonce "$SERVER_NONCE" --verdict basic --age 2m`,
    )
    .action(async (opts: GmsMintOptions, command: Command) => {
      const auditor = auditorFor(command);
      const nonce = finalNonceOf(opts);
      if (!ANDROID_PACKAGE.test(opts.package))
        throw usageError(
          `"${opts.package}" is not an Android package name such as com.example.app`,
        );
      const given = [
        opts.issuedAt !== undefined,
        opts.age !== undefined,
        opts.stale === true,
      ].filter(Boolean).length;
      if (given > 1) throw usageError('give one of --issued-at, --age and --stale');
      let digest: Uint8Array | undefined;
      if (opts.certDigest !== undefined) {
        digest = parseCertificateDigest(opts.certDigest) ?? undefined;
        if (!digest)
          throw usageError(
            `--cert-digest "${opts.certDigest}" is not a SHA-256 digest in hex or base64`,
          );
      }
      const now = new Date();
      let issuedAt = now;
      if (opts.issuedAt !== undefined) issuedAt = isoInstant(opts.issuedAt, '--issued-at');
      if (opts.age !== undefined) {
        const seconds = parseDuration(opts.age);
        if (seconds === null)
          throw usageError(`--age takes a duration such as 30s or 5m, got "${opts.age}"`);
        issuedAt = new Date(now.getTime() - seconds * 1000);
      }

      const { token, created } = await withAdmin(
        (admin) =>
          admin.run('dev.mintGms', {
            packageName: opts.package,
            nonce,
            issuedAt,
            stale: opts.stale === true,
            ...(opts.verdict ? { minVerdict: MIN_VERDICT_LEVELS[opts.verdict] } : {}),
            recognition: opts.recognition,
            ...(digest ? { certificateDigest: digest } : {}),
            wrongNonce: opts.wrongNonce === true,
            wrongPackage: opts.wrongPackage === true,
          }),
        { auditor },
      );
      if (created)
        process.stderr.write(
          `added test-only key pair ${created} to ${opts.package} (tried for test API keys only)\n`,
        );
      printToken(token, opts.json);
    });

  return dev;
}

interface AppleMintOptions extends NonceFlags {
  appId?: string;
  device: string;
  env?: 'development' | 'production';
  counter?: string;
  attest?: boolean;
  both?: boolean;
  wrongNonce?: boolean;
  wrongAppId?: boolean;
  expired?: boolean;
  receipt?: boolean;
  validationCategory?: string;
  bundleVersion?: string;
  json?: boolean;
}

interface GmsMintOptions extends NonceFlags {
  package: string;
  verdict?: MinVerdictLevel;
  recognition: Recognition;
  certDigest?: string;
  issuedAt?: string;
  age?: string;
  wrongNonce?: boolean;
  wrongPackage?: boolean;
  stale?: boolean;
  json?: boolean;
}

/** The simulated device file: what a phone's Secure Enclave and app would keep. */
interface DeviceFile {
  kind: typeof DEVICE_KIND;
  version: 1;
  appId: string;
  environment: AppleEnvironment;
  /** base64 of the key id (SHA-256 of the public point) */
  keyId: string;
  /** PKCS#8 PEM of the P-256 key */
  privateKey: string;
  /** highest assertion counter minted */
  counter: number;
  /** a registration was minted */
  attested: boolean;
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
    keyId: encodeBase64(key.keyId),
    privateKey: key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    registered: false,
  };
}

function readAndroidDevice(path: string): AndroidDeviceFile {
  let parsed: Partial<AndroidDeviceFile>;
  try {
    parsed = JSON.parse(
      readCliFileSync(path, { maxBytes: CLI_INPUT_MAX_BYTES, what: 'the device file' }).toString(
        'utf8',
      ),
    ) as Partial<AndroidDeviceFile>;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw usageError(
      `cannot read the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'not JSON'}); give a new path to create a device`,
    );
  }
  const ok =
    parsed?.kind === ANDROID_DEVICE_KIND &&
    parsed.version === 1 &&
    typeof parsed.packageName === 'string' &&
    ANDROID_PACKAGE.test(parsed.packageName) &&
    typeof parsed.privateKey === 'string' &&
    typeof parsed.keyId === 'string' &&
    typeof parsed.registered === 'boolean';
  if (!ok)
    throw usageError(
      `${path} is not a simulated device file made by "attest dev mint android-key"`,
    );
  return parsed as AndroidDeviceFile;
}

/** A serial on the shipped status list: the service refuses the leaf (android_chain_revoked). */
function revokedSerial(): string {
  const serial = Object.keys(REVOCATION_SNAPSHOT)[0]!;
  return serial.length % 2 ? `0${serial}` : serial;
}

function randomSerial(): string {
  return `1${randomBytes(8).toString('hex')}`;
}

function newDevice(appId: string, environment: AppleEnvironment): DeviceFile {
  const key = createSimulatedKey();
  return {
    kind: DEVICE_KIND,
    version: 1,
    appId,
    environment,
    keyId: encodeBase64(key.keyId),
    privateKey: key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    counter: 0,
    attested: false,
  };
}

function readDevice(path: string): DeviceFile {
  let parsed: Partial<DeviceFile>;
  try {
    parsed = JSON.parse(
      readCliFileSync(path, {
        maxBytes: CLI_INPUT_MAX_BYTES,
        what: 'the device file',
      }).toString('utf8'),
    ) as Partial<DeviceFile>;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw usageError(
      `cannot read the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'not JSON'}); give a new path to create a device`,
    );
  }
  const ok =
    parsed?.kind === DEVICE_KIND &&
    parsed.version === 1 &&
    typeof parsed.appId === 'string' &&
    APPLE_APP_ID.test(parsed.appId) &&
    (parsed.environment === 'Development' || parsed.environment === 'Production') &&
    typeof parsed.privateKey === 'string' &&
    typeof parsed.keyId === 'string' &&
    Number.isInteger(parsed.counter) &&
    parsed.counter! >= 0 &&
    parsed.counter! <= UINT32_MAX &&
    typeof parsed.attested === 'boolean';
  if (!ok)
    throw usageError(`${path} is not a simulated device file made by "attest dev mint apple"`);
  return parsed as DeviceFile;
}

function loadKey(device: DeviceFile, path: string): SimulatedKey {
  let key: SimulatedKey;
  try {
    key = loadSimulatedKey(device.privateKey);
  } catch {
    throw usageError(`${path}: the device key is not a P-256 private key`);
  }
  if (encodeBase64(key.keyId) !== device.keyId)
    throw usageError(`${path}: the key id does not match the device key`);
  return key;
}

/** Creates the file (O_EXCL), or replaces it through a temporary file of a random name (O_EXCL, see writePrivateFile): a crash never leaves half a device, a planted symlink is never followed; always 0600. */
function writeDevice(path: string, device: DeviceFile, create: boolean): void {
  const text = `${JSON.stringify(device, null, 2)}\n`;
  try {
    if (create) {
      writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
      return;
    }
    writePrivateFile(path, text);
  } catch (err) {
    throw runtimeError(
      `cannot write the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

function counterFlag(text: string): number {
  if (!/^\d{1,10}$/.test(text) || Number(text) > UINT32_MAX)
    throw usageError('--counter must be 1 to 4294967295');
  return Number(text);
}

/** Same team, a bundle no allowlist entry has. */
function wrongAppId(appId: string): string {
  return `${appId}.not-allowlisted`;
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

function isoInstant(text: string, flag: string): Date {
  const d = new Date(text);
  if (!ISO_INSTANT.test(text) || Number.isNaN(d.getTime()))
    throw usageError(
      `${flag} takes an ISO 8601 time with its offset, such as 2026-01-23T12:13:33Z, got "${text}"`,
    );
  return d;
}
