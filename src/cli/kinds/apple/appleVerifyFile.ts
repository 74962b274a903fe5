import { createHash, createPublicKey } from 'node:crypto';
import { Option, type Command } from 'commander';
import { configuredReceiptRoots } from '../../../configuredAppleRoots.js';
import { checkTokenReceipt, summarizeReceipt } from '../../../core/apple/tokenReceipt.js';
import { defaultAppleRoots, withDevelopmentRoot } from '../../../core/apple/trustRoots.js';
import {
  createReceiptVerifier,
  withDevelopmentReceiptRoot,
} from '../../../core/apple/verifyReceipt.js';
import { isBytes, isMap } from '../../../core/cbor.js';
import { createMemoryAppleKeyStore } from '../../../core/memoryStores.js';
import type { AppleKeyRecord, AppleKeyStore, KeyMode } from '../../../core/ports.js';
import { parseEnvelope } from '../../../core/envelope.js';
import { appleRootsOf } from '../../appleRootsOf.js';
import { config } from '../../context.js';
import { usageError } from '../../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../../inputFiles.js';
import { isoInstant } from '../../isoInstant.js';
import { printJson } from '../../output.js';
import { readReceiptFile, receiptLine } from '../../receiptReport.js';
import { bytesFlag } from '../../tokenOutput.js';
import type { VerifyFileFlags, VerifyFileKind } from '../verifyFileKind.js';
import { APPLE_APP_ID } from './appleAppId.js';

interface AppleFlags extends VerifyFileFlags {
  clientDataHash?: string;
  appleKey?: string;
  counter?: string;
  env?: 'production' | 'development';
  receipt?: string;
}

/** App Attest in `attest verify-file`: --app-id, --apple-key, --client-data-hash, --receipt. */
export const appleVerifyFile: VerifyFileKind = {
  options: [
    {
      at: 20,
      add: (command: Command) =>
        command
          .option(
            '--client-data-hash <b64>',
            'App Attest: use these bytes instead of SHA-256(final nonce)',
          )
          .option(
            '--app-id <id>',
            'no database: allow this App Attest app ID (either environment); repeatable',
            (v: string, p: string[]) => [...p, v],
            [],
          ),
    },
    {
      at: 40,
      add: (command: Command) =>
        command
          .option(
            '--apple-key <pem>',
            'no database: a registered App Attest public key (PEM file or text), with --app-id',
          )
          .option('--counter <n>', 'with --apple-key: the stored assertion counter', '0')
          .addOption(
            new Option(
              '--env <env>',
              'with --apple-key: the environment the key was registered in',
            ).choices(['production', 'development']),
          ),
    },
    {
      at: 70,
      add: (command: Command) =>
        command.option(
          '--receipt <file>',
          'check an App Attest receipt file alone (DER/BER or base64; no TOKEN), with --at and --app-id',
        ),
    },
  ],
  attestationOnly: ['appId', 'appleKey', 'clientDataHash'],
  testTrustReasons: ['apple_chain_invalid', 'apple_key_unknown', 'apple_key_registered'],
  alone: (tokenPath, opts: AppleFlags) =>
    opts.receipt === undefined ? null : receiptAlone(tokenPath, opts.receipt, opts),
  offline: (opts: AppleFlags) => opts.appId.length > 0 || opts.appleKey !== undefined,
  input: (opts: AppleFlags) =>
    opts.clientDataHash === undefined
      ? {}
      : { clientDataHash: bytesFlag(opts.clientDataHash, '--client-data-hash') },
  async prepare(opts: AppleFlags, cfg) {
    const appleRoots = appleRootsOf(cfg);
    const receipts = createReceiptVerifier(configuredReceiptRoots(cfg.appleReceiptRootCaPath));
    // test keys trust receipts made with the development CA too (`dev mint apple --receipt`)
    let testReceipts = receipts;
    const partsWith = (appleKeys: AppleKeyStore) => (mode: KeyMode, devRoot: Uint8Array | null) => {
      if (mode === 'test') testReceipts = withDevelopmentReceiptRoot(receipts, devRoot)!;
      return {
        appleKeys,
        appleRoots: mode === 'test' ? withDevelopmentRoot(appleRoots, devRoot) : appleRoots,
        receipts: mode === 'test' ? testReceipts : receipts,
      };
    };
    return {
      offlineEntries() {
        for (const id of opts.appId)
          if (!APPLE_APP_ID.test(id)) throw usageError(`--app-id "${id}" is not TEAMID.bundle.id`);
        return { apple: opts.appId.map((appId) => ({ appId, env: 'any' as const })) };
      },
      offline: (token) => partsWith(offlineKeys(opts, token)),
      database: async (admin) =>
        partsWith(
          readOnlyKeys({
            find: (keyId) => admin.run('appleKeys.find', { keyId }),
            register: async () => false,
            raiseCounter: async () => false,
          }),
        ),
      trustRoots: () => (appleRoots === defaultAppleRoots() ? 'apple' : 'ATTEST_APPLE_ROOT_CA'),
      // the receipt on its own, whatever the verdict on the token (it never changes the verdict)
      // (shown as the mode's verifier checks it)
      receipt: (token, at, outcome) =>
        checkTokenReceipt(token, opts.devRoots ? testReceipts : receipts, at, outcome.facts.appId),
    };
  },
};

/** `verify-file --receipt FILE`: an App Attest receipt checked alone; true when it is valid. */
async function receiptAlone(
  tokenPath: string | undefined,
  file: string,
  opts: AppleFlags,
): Promise<boolean> {
  if (tokenPath !== undefined)
    throw usageError('--receipt checks a receipt file alone: leave out TOKEN');
  if (opts.appId.length > 1) throw usageError('--receipt takes at most one --app-id');
  const bytes = readReceiptFile(file);
  const at =
    opts.at === undefined ? new Date() : isoInstant(opts.at, '--at', '2021-01-23T12:13:33Z');
  const verifier = createReceiptVerifier(configuredReceiptRoots(config().appleReceiptRootCaPath));
  const summary = summarizeReceipt(
    await verifier.verify(bytes, opts.appId[0] ? { appId: opts.appId[0] } : {}, at),
  );
  if (opts.json) printJson({ receipt: summary, verifiedAt: at.toISOString() });
  else process.stdout.write(`${receiptLine(summary)}\nverified at ${at.toISOString()}\n`);
  return summary.valid;
}

function offlineKeys(opts: AppleFlags, token: Uint8Array): AppleKeyStore {
  if (opts.appleKey === undefined) {
    if (opts.env !== undefined)
      throw usageError('--env needs --apple-key: it is the environment of that registered key');
    return createMemoryAppleKeyStore([], { readOnly: true });
  }
  if (opts.appId.length !== 1)
    throw usageError('--apple-key needs exactly one --app-id: the app the key was registered for');
  const counter = /^\d{1,10}$/.test(opts.counter ?? '') ? Number(opts.counter) : Number.NaN;
  if (!(counter >= 0 && counter <= 0xffffffff))
    throw usageError('--counter must be 0 to 4294967295');
  let pem = opts.appleKey;
  if (!pem.includes('-----BEGIN')) {
    pem = readCliFileSync(pem, { maxBytes: CLI_INPUT_MAX_BYTES, what: '--apple-key' }).toString(
      'utf8',
    );
  }
  let publicKey: Uint8Array;
  try {
    publicKey = new Uint8Array(createPublicKey(pem).export({ type: 'spki', format: 'der' }));
  } catch {
    throw usageError('--apple-key is not a PEM public key');
  }
  let keyId: Uint8Array | undefined;
  try {
    const evidence = parseEnvelope(token).evidence;
    const id = isMap(evidence) ? evidence.get('keyId') : undefined;
    if (isBytes(id)) keyId = id;
  } catch {
    // a token that does not parse is reported by the verification itself
  }
  const record: AppleKeyRecord = {
    keyId: keyId ?? new Uint8Array(createHash('sha256').update(publicKey).digest()),
    publicKey,
    appId: opts.appId[0]!,
    environment: opts.env === 'development' ? 'Development' : 'Production',
    counter,
  };
  return createMemoryAppleKeyStore([record], { readOnly: true });
}

/** The database key store, with writes answered as the database would answer them but not made. */
function readOnlyKeys(store: AppleKeyStore): AppleKeyStore {
  return {
    find: (keyId) => store.find(keyId),
    register: async (record) => (await store.find(record.keyId)) === null,
    raiseCounter: async (keyId, counter) => {
      const existing = await store.find(keyId);
      return existing !== null && existing.counter < counter;
    },
  };
}
