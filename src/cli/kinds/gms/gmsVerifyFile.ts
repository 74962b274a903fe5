import { readIssuerLimit } from '../../../core/androidKey/issuerVelocity.js';
import type { Command } from 'commander';
import { isMap } from '../../../core/cbor.js';
import { DEFAULT_ANDROID_POLICY } from '../../../core/gms/defaultAndroidPolicy.js';
import { parseDecryptionKey, parseVerificationKey } from '../../../core/gms/keyMaterial.js';
import type { AndroidPackagePolicy, IntegrityTokenDecoder } from '../../../core/ports.js';
import { parseEnvelope } from '../../../core/envelope.js';
import {
  createPlayIntegrityClient,
  GoogleBusyError,
  GoogleFault,
} from '../../../upstream/playIntegrityClient.js';
import { runtimeError, usageError } from '../../errors.js';
import { readCliFileSync } from '../../inputFiles.js';
import {
  keyAttestationPolicy,
  type KeyAttestationFlags,
} from '../androidKey/keyAttestationOptions.js';
import type { VerifyFileFlags, VerifyFileKind } from '../verifyFileKind.js';
import { readServiceAccountFile } from './serviceAccountFile.js';

interface GmsFlags extends VerifyFileFlags, KeyAttestationFlags {
  package?: string;
  decryptionKey?: string;
  verificationKey?: string;
  decryptionKeyFile?: string;
  verificationKeyFile?: string;
  online?: boolean;
  serviceAccountFile?: string;
}

/** Key files hold base64 of a 32-byte AES key or a P-256 SPKI: far less. */
const KEY_FILE_MAX_BYTES = 4096;

/** Play Integrity in `attest verify-file`: --package with its keys, --online with a service account. */
export const gmsVerifyFile: VerifyFileKind = {
  options: [
    {
      at: 30,
      add: (command: Command) =>
        command
          .option(
            '--package <name>',
            'no database: allow this Android package, with --decryption-key and --verification-key (or --service-account-file)',
          )
          .option(
            '--decryption-key-file <path>',
            'with --package: a file holding its AES-256 decryption key (base64)',
          )
          .option(
            '--verification-key-file <path>',
            'with --package: a file holding its EC P-256 verification key (base64)',
          )
          .option(
            '--decryption-key <b64>',
            'the key itself (visible to other users in ps: prefer --decryption-key-file)',
          )
          .option('--verification-key <b64>', 'the key itself (prefer --verification-key-file)'),
    },
    {
      at: 50,
      add: (command: Command) =>
        command
          .option(
            '--online',
            'Play Integrity standard requests: let Google decode the token with the package service account (network)',
          )
          .option(
            '--service-account-file <path>',
            'with --package and --online: the service-account key file (JSON)',
          ),
    },
  ],
  attestationOnly: ['package', 'online', 'serviceAccountFile'],
  testTrustReasons: ['gms_decrypt_failed', 'gms_signature_invalid'],
  check(opts: GmsFlags) {
    if (opts.package === undefined) {
      const stray = (
        ['decryptionKey', 'verificationKey', 'decryptionKeyFile', 'verificationKeyFile'] as const
      ).find((k) => opts[k] !== undefined);
      if (stray)
        throw usageError(
          `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --package`,
        );
    }
  },
  offline: (opts: GmsFlags) => opts.package !== undefined,
  checkToken(token, opts: GmsFlags) {
    if (opts.serviceAccountFile !== undefined && (opts.package === undefined || !opts.online))
      throw usageError('--service-account-file needs --package and --online');
    if (!opts.online && isStandardRequest(token)) {
      throw usageError(
        'this is a Play Integrity standard-request token: only Google can decode it; re-run with --online (calls Google with the package service account)',
      );
    }
  },
  async prepare(opts: GmsFlags, cfg) {
    const serviceAccount =
      opts.serviceAccountFile === undefined
        ? undefined
        : await readServiceAccountFile(opts.serviceAccountFile);
    const googleDecoder = opts.online
      ? oncePerToken(
          createPlayIntegrityClient({
            oauthUrl: cfg.googleOauthUrl,
            playIntegrityUrl: cfg.googlePlayIntegrityUrl,
            timeoutMs: cfg.googleTimeoutMs,
            maxInFlight: 4,
          }),
        )
      : undefined;
    const parts = () => (googleDecoder ? { googleDecoder } : {});
    return {
      offlineEntries(token) {
        const android: AndroidPackagePolicy[] = [];
        const keyFlags = keyAttestationPolicy(opts);
        const service = tokenService(token);
        if (opts.package !== undefined) {
          const decryption = keyFlag(opts, 'decryptionKey', '--decryption-key');
          const verification = keyFlag(opts, 'verificationKey', '--verification-key');
          // an android-key token needs no Play keys: the package's key attestation policy is enough
          const keyless =
            (serviceAccount !== undefined || service === 'android-key') &&
            decryption === undefined &&
            verification === undefined;
          if (!keyless && (decryption === undefined || verification === undefined)) {
            throw usageError(
              '--package needs --decryption-key-file and --verification-key-file (or --decryption-key and --verification-key; for standard requests, --service-account-file with --online)',
            );
          }
          try {
            const keys = keyless
              ? []
              : [
                  {
                    id: 'cli',
                    decryptionKey: parseDecryptionKey(decryption!),
                    verificationKey: parseVerificationKey(verification!),
                  },
                ];
            android.push({
              packageName: opts.package,
              keys,
              ...(serviceAccount ? { serviceAccount } : {}),
              ...DEFAULT_ANDROID_POLICY,
              // verify-file --package implies --key-attestation
              keyAttestation: true,
              ...keyFlags,
              ...(keyFlags.bootKeys ? { bootKeys: keyFlags.bootKeys } : {}),
              // stored as text, read as a limit (verify-file counts nothing: the step is skipped)
              maxKeysPerIssuer: readIssuerLimit(keyFlags.maxKeysPerIssuer),
            });
          } catch (err) {
            throw usageError((err as Error).message);
          }
        }
        return { android };
      },
      offline: () => parts,
      database: async () => parts,
      fault: (err) =>
        err instanceof GoogleFault || err instanceof GoogleBusyError
          ? runtimeError(`Google gave no verdict: ${err.message}`)
          : undefined,
    };
  },
};

/** A key given as itself or, kept out of `ps`, as a file holding it. */
function keyFlag(
  opts: GmsFlags,
  name: 'decryptionKey' | 'verificationKey',
  flag: string,
): string | undefined {
  const inline = opts[name];
  const file = opts[`${name}File`];
  if (inline !== undefined && file !== undefined)
    throw usageError(`give ${flag} or ${flag}-file, not both`);
  if (file === undefined) return inline;
  return readCliFileSync(file, {
    maxBytes: KEY_FILE_MAX_BYTES,
    what: `${flag}-file`,
    tooLarge: () =>
      `${flag}-file ${file} is larger than a key (${KEY_FILE_MAX_BYTES} bytes at most)`,
  })
    .toString('utf8')
    .trim();
}

/** Whether the token is a `gms` token of a standard request (which only Google can decode). */
function isStandardRequest(token: Uint8Array): boolean {
  try {
    const { service, evidence } = parseEnvelope(token);
    return service === 'gms' && isMap(evidence) && evidence.get('request') === 'standard';
  } catch {
    return false; // the verification itself reports a token that does not parse
  }
}

/** The hints re-run the verification: Google is asked once per token, the answer reused. */
function oncePerToken(decoder: IntegrityTokenDecoder): IntegrityTokenDecoder {
  const answers = new Map<string, ReturnType<IntegrityTokenDecoder['decode']>>();
  return {
    decode(request) {
      const key = `${request.packageName}\n${request.integrityToken}`;
      let answer = answers.get(key);
      if (!answer) answers.set(key, (answer = decoder.decode(request)));
      return answer;
    },
  };
}

/** The token's device.service, or undefined when it does not parse. */
function tokenService(token: Uint8Array): string | undefined {
  try {
    return parseEnvelope(token).service;
  } catch {
    return undefined;
  }
}
