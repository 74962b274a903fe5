import type { Command } from 'commander';
import { configuredAndroidRoots } from '../../../configuredAndroidRoots.js';
import {
  parseRevocationDocument,
  shippedRevocations,
} from '../../../core/androidKey/revocationList.js';
import { androidRootsFromCertificates } from '../../../core/androidKey/trustRoots.js';
import { createMemoryAndroidKeyStore } from '../../../core/memoryStores.js';
import type { AndroidKeyStore, KeyMode, RevocationList } from '../../../core/ports.js';
import { usageError } from '../../errors.js';
import { readCliFileSync } from '../../inputFiles.js';
import { safeText } from '../../terminalText.js';
import { bytesFlag } from '../../tokenOutput.js';
import type { VerifyFileFlags, VerifyFileKind } from '../verifyFileKind.js';
import {
  addKeyAttestationOptions,
  keyAttestationPolicy,
  type KeyAttestationFlags,
} from './keyAttestationOptions.js';

interface AndroidKeyFlags extends VerifyFileFlags, KeyAttestationFlags {
  package?: string;
  challenge?: string;
  revocations?: string;
}

/** Android key attestation in `attest verify-file`: the policy flags, --challenge, --revocations. */
export const androidKeyVerifyFile: VerifyFileKind = {
  readsChallenge: true,
  options: [
    { at: 0, add: addKeyAttestationOptions },
    {
      at: 80,
      add: (command: Command) =>
        command
          .option(
            '--challenge <b64>',
            'android-key: the attestation challenge to expect instead of SHA-256(final nonce) (captures made by other integrations)',
          )
          .option(
            '--revocations <file>',
            "android-key: Google's attestation status list (JSON) to use instead of the stored or built-in one",
          ),
    },
  ],
  attestationOnly: [],
  testTrustReasons: ['android_chain_invalid', 'android_key_unknown', 'android_key_registered'],
  check(opts: AndroidKeyFlags) {
    if (opts.package === undefined && Object.keys(keyAttestationPolicy(opts)).length > 0)
      throw usageError('the key attestation policy flags describe a package: they need --package');
  },
  // its policy flags describe the package that --package allows
  offline: () => false,
  input: (opts: AndroidKeyFlags) =>
    opts.challenge === undefined ? {} : { challenge: bytesFlag(opts.challenge, '--challenge') },
  async prepare(opts: AndroidKeyFlags, cfg) {
    const revocationFile =
      opts.revocations === undefined ? undefined : readRevocationFile(opts.revocations);
    const androidRoots = configuredAndroidRoots(cfg.androidRootCaPath);
    const partsWith =
      (keys: AndroidKeyStore, revocations: RevocationList) =>
      (mode: KeyMode, devRoot: Uint8Array | null) => ({
        android: {
          keys,
          roots:
            mode === 'test' && devRoot
              ? [...androidRoots, ...androidRootsFromCertificates([devRoot])]
              : androidRoots,
          revocations: () => revocations,
        },
      });
    return {
      offline: () =>
        partsWith(
          createMemoryAndroidKeyStore([], { readOnly: true }),
          revocationFile ?? shippedRevocations().list,
        ),
      async database(admin) {
        const stored = revocationFile ? null : await admin.run('verifyFile.revocations', {});
        return partsWith(
          readOnlyAndroidKeys({
            find: (keyId) => admin.run('androidKeys.find', { keyId }),
            register: async () => false,
            assertionAcceptedAt: (digest, mode) =>
              admin.run('androidKeys.assertionAcceptedAt', { digest, mode }),
          }),
          revocationFile ??
            (stored === null
              ? shippedRevocations().list
              : parseRevocationDocument({ entries: stored }).list),
        );
      },
    };
  },
};

/** Google's status list from a file (`--revocations`). */
function readRevocationFile(path: string): RevocationList {
  const text = readCliFileSync(path, {
    maxBytes: 16 * 1024 * 1024,
    what: '--revocations',
  }).toString('utf8');
  try {
    return parseRevocationDocument(JSON.parse(text)).list;
  } catch (err) {
    throw usageError(`--revocations ${safeText(path)}: ${(err as Error).message}`);
  }
}

/**
 * The database's Android keys, read-only: a registration is answered, never stored; an assertion
 * is checked against the ones the server accepted, never recorded.
 */
function readOnlyAndroidKeys(store: AndroidKeyStore): AndroidKeyStore {
  return {
    find: (keyId) => store.find(keyId),
    register: async () => true,
    ...(store.assertionAcceptedAt
      ? { assertionAcceptedAt: store.assertionAcceptedAt.bind(store) }
      : {}),
  };
}
