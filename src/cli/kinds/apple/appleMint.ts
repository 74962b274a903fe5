import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Command, Option } from 'commander';
import { VALIDATION_CATEGORY_NAMES } from '../../../core/apple/appleDistribution.js';
import { encodeBase64 } from '../../../core/base64.js';
import {
  createSimulatedKey,
  loadSimulatedKey,
  mintAssertion,
  mintAttestation,
  type SimulatedKey,
} from '../../../core/dev/devCa.js';
import { encodeAppleToken } from '../../../core/apple/appleToken.js';
import type { AppleEnvironment } from '../../../core/apple/appleTokenDetails.js';
import { withAdmin } from '../../context.js';
import { runtimeError, usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { deviceKeyFields, readDeviceFile, writeDevice } from '../deviceFile.js';
import { APPLE_APP_ID } from './appleAppId.js';

const UINT32_MAX = 0xffffffff;
const DEVICE_KIND = 'attest-simulated-app-attest-device';

/** `attest dev mint apple`: App Attest tokens from a simulated device, for test API keys. */
export function appleMintCommand(): Command {
  return new Command('apple')
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
    .addOption(
      new Option(
        '--platform <platform>',
        'the platform of attestations: macos adds the key access-control extension a Mac key carries (default ios)',
      ).choices(['ios', 'macos']),
    )
    .option('--json', 'print {"token","keyId","counter"}')
    .addHelpText(
      'after',
      `
The first run creates the device file and mints a registration; later runs mint assertions
with the next counter. The device file holds a private key: it is written 0600, and this
repository's .gitignore keeps dev-*.json (the name the docs use) out of source control.

Examples:
  $ attest dev mint apple --app-id ABCDE12345.com.example.app --device dev.json --nonce "$NONCE"
  $ attest dev mint apple --device dev.json --server-nonce "$SERVER_NONCE" --json
  $ attest dev mint apple --device dev.json --nonce "$NONCE" --counter 1   # a replay
  $ attest dev mint apple --app-id ABCDE12345.com.example.app --device ios27.json --nonce "$NONCE" --receipt --validation-category appstore --bundle-version 4.2`,
    )
    .action(async (opts: AppleMintOptions) => {
      const nonce = finalNonceOf(opts);
      const clientDataHash = createHash('sha256').update(nonce).digest();
      const existing = existsSync(opts.device)
        ? readDeviceFile(opts.device, DEVICE_KIND, 'apple', appleDeviceFields)
        : null;
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
      if (opts.platform && !attestation)
        throw usageError(
          '--platform applies to attestations (an assertion reports the registered platform): add --attest or --both',
        );
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
          ...(opts.platform === 'macos' ? { platform: 'macOS' as const } : {}),
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
  platform?: 'ios' | 'macos';
  bundleVersion?: string;
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

function newDevice(appId: string, environment: AppleEnvironment): DeviceFile {
  const key = createSimulatedKey();
  return {
    kind: DEVICE_KIND,
    version: 1,
    appId,
    environment,
    ...deviceKeyFields(key),
    counter: 0,
    attested: false,
  };
}

/** Whether a device file's own fields are those of this kind. */
const appleDeviceFields = (parsed: Partial<DeviceFile>): boolean =>
  typeof parsed.appId === 'string' &&
  APPLE_APP_ID.test(parsed.appId) &&
  (parsed.environment === 'Development' || parsed.environment === 'Production') &&
  Number.isInteger(parsed.counter) &&
  parsed.counter! >= 0 &&
  parsed.counter! <= UINT32_MAX &&
  typeof parsed.attested === 'boolean';

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

function counterFlag(text: string): number {
  if (!/^\d{1,10}$/.test(text) || Number(text) > UINT32_MAX)
    throw usageError('--counter must be 1 to 4294967295');
  return Number(text);
}

/** Same team, a bundle no allowlist entry has. */
function wrongAppId(appId: string): string {
  return `${appId}.not-allowlisted`;
}
