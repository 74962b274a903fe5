import { createPublicKey, createHash, X509Certificate } from 'node:crypto';
import { Command, Option } from 'commander';
import { defaultAppleRoots, withDevelopmentRoot } from '../../core/apple/trustRoots.js';
import { decodeBase64 } from '../../core/base64.js';
import { decodeStrictCbor, isBytes, isMap } from '../../core/cbor.js';
import { checkTitle } from '../../core/checkTitles.js';
import { findHints, type Hint } from '../../core/explain.js';
import { parseDecryptionKey, parseVerificationKey } from '../../core/google/keyMaterial.js';
import { DEFAULT_ANDROID_POLICY } from '../../core/google/defaultAndroidPolicy.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../../core/memoryStores.js';
import { parseRevocationDocument, shippedRevocations } from '../../core/android/revocationList.js';
import { androidRootsFromCertificates } from '../../core/android/trustRoots.js';
import { configuredAndroidRoots } from '../../configuredAndroidRoots.js';
import type { AndroidPolicyInput } from '../../db/allowlist.js';
import {
  addKeyAttestationOptions,
  keyAttestationPolicy,
  type KeyAttestationFlags,
} from '../keyAttestationOptions.js';
import type {
  AllowlistReader,
  AndroidKeyStore,
  AppleKeyRecord,
  AppleKeyStore,
  GoogleServiceAccount,
  IntegrityTokenDecoder,
  KeyMode,
  RevocationList,
  VerifyOutcome,
} from '../../core/types.js';
import { buildVerifiers } from '../../core/verifiers.js';
import {
  DEVICE_NONCE_BYTES,
  finalNonce,
  parseEnvelope,
  TOKEN_NONCE_MAX,
  TOKEN_NONCE_MIN,
  verifyToken,
  type VerifyInput,
} from '../../core/verify.js';
import { colorWanted } from '../../config.js';
import {
  createPlayIntegrityClient,
  GoogleBusyError,
  GoogleFault,
} from '../../google/playIntegrityClient.js';
import { parseServiceAccount } from '../../google/serviceAccount.js';
import { appleRootsOf, config, withAdmin } from '../context.js';
import { CliError, EXIT, runtimeError, usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFile, readCliFileSync } from '../inputFiles.js';
import { printJson } from '../output.js';
import { paint, safeText } from '../terminalText.js';
import { APPLE_APP_ID } from './allowlist.js';
import { looksLikeJws } from '../../core/resultToken.js';
import { verifyResultTokenFile } from '../resultTokenReport.js';
import { configuredReceiptRoots } from '../../configuredAppleRoots.js';
import {
  checkTokenReceipt,
  summarizeReceipt,
  type ReceiptSummary,
} from '../../core/apple/tokenReceipt.js';
import {
  createReceiptVerifier,
  withDevelopmentReceiptRoot,
} from '../../core/apple/verifyReceipt.js';
import { readReceiptFile, receiptLine } from '../receiptReport.js';

interface Options extends KeyAttestationFlags {
  challenge?: string;
  revocations?: string;
  nonce?: string;
  serverNonce?: string;
  deviceNonce?: string;
  at?: string;
  clientDataHash?: string;
  appId: string[];
  package?: string;
  decryptionKey?: string;
  verificationKey?: string;
  decryptionKeyFile?: string;
  verificationKeyFile?: string;
  appleKey?: string;
  counter?: string;
  env?: 'production' | 'development';
  devRoots?: boolean;
  online?: boolean;
  serviceAccountFile?: string;
  jwks?: string;
  issuer?: string;
  audience?: string;
  json?: boolean;
  receipt?: string;
}

/** The most verify-file reads: base64 text of a 64 KiB token, with room for line breaks. */
export const INPUT_MAX_BYTES = 128 * 1024;
/** Key files hold base64 of a 32-byte AES key or a P-256 SPKI: far less. */
const KEY_FILE_MAX_BYTES = 4096;
/** The service's deviceNonce rule. */

export function verifyFileCommand(): Command {
  return addKeyAttestationOptions(
    new Command('verify-file')
      .description(
        'check a token offline, step by step, and explain why it is rejected (changes no state)',
      )
      .argument(
        '[token]',
        'file with the token as raw CBOR, base64 text, or a saved verify request body (JSON); - for stdin',
      ),
  )
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce sent to verify')
    .option('--at <iso-time>', 'verify as of this instant (certificate validity, freshness)')
    .option(
      '--client-data-hash <b64>',
      'App Attest: use these bytes instead of SHA-256(final nonce)',
    )
    .option(
      '--app-id <id>',
      'no database: allow this App Attest app ID (either environment); repeatable',
      (v: string, p: string[]) => [...p, v],
      [],
    )
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
    .option('--verification-key <b64>', 'the key itself (prefer --verification-key-file)')
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
    )
    .option(
      '--online',
      'Play Integrity standard requests: let Google decode the token with the package service account (network)',
    )
    .option(
      '--service-account-file <path>',
      'with --package and --online: the service-account key file (JSON)',
    )
    .option(
      '--dev-roots',
      "verify as a test API key would: also trust the database's development CA and test-only Play pairs",
    )
    .option(
      '--jwks <file>',
      "a result token: check it against this key set (what /.well-known/jwks.json serves) instead of the database's keys",
    )
    .option(
      '--issuer <url>',
      'a result token: the issuer it must name (default ATTEST_ISSUER when set)',
    )
    .option('--audience <id>', 'a result token: the API key id it must be made for')
    .option(
      '--receipt <file>',
      'check an App Attest receipt file alone (DER/BER or base64; no TOKEN), with --at and --app-id',
    )
    .option(
      '--challenge <b64>',
      'android-key: the attestation challenge to expect instead of SHA-256(final nonce) (captures made by other integrations)',
    )
    .option(
      '--revocations <file>',
      "android-key: Google's attestation status list (JSON) to use instead of the stored or built-in one",
    )
    .option('--json', 'print a JSON document (documented in the README)')
    .addHelpText(
      'after',
      `
Uses the allowlist and registered keys of the configured database, read-only, unless --app-id,
--package or --apple-key is given. Without a nonce flag the nonce is not checked; a saved verify
request body supplies its expectedNonce. Verifies as a live API key does unless --dev-roots.
Standard-request Play Integrity tokens can only be decoded by Google: they are verified with
--online only.

Examples:
  $ attest verify-file token.b64 --server-nonce q4T...= --device-nonce AAEC
  $ attest verify-file capture.cbor --at 2021-01-23T12:13:33Z --app-id 6MURL8TA57.de.example.app \\
      --client-data-hash SGVsbG8=
  $ attest verify-file play.cbor --nonce ... --package com.example.app \\
      --decryption-key-file dec.key --verification-key-file ver.key --json
  $ attest verify-file standard.cbor --nonce ... --online
  $ attest verify-file result.jwt --jwks jwks.json --audience 0h3k5x9q2m7c1b4n --at 2026-01-01T10:00:00Z
  $ attest verify-file --receipt receipt.der --at 2020-11-21T22:13:10Z --app-id 6MURL8TA57.de.example.app
  $ attest verify-file android.cbor --nonce ... --package com.example.app --min-security-level strongbox`,
    )
    .action(async (tokenPath: string | undefined, opts: Options) => {
      if (opts.receipt !== undefined) {
        if (tokenPath !== undefined)
          throw usageError('--receipt checks a receipt file alone: leave out TOKEN');
        if (opts.appId.length > 1) throw usageError('--receipt takes at most one --app-id');
        const bytes = readReceiptFile(opts.receipt);
        const at = opts.at === undefined ? new Date() : instant(opts.at);
        const verifier = createReceiptVerifier(
          configuredReceiptRoots(config().appleReceiptRootCaPath),
        );
        const summary = summarizeReceipt(
          await verifier.verify(bytes, opts.appId[0] ? { appId: opts.appId[0] } : {}, at),
        );
        if (opts.json) printJson({ receipt: summary, verifiedAt: at.toISOString() });
        else process.stdout.write(`${receiptLine(summary)}\nverified at ${at.toISOString()}\n`);
        process.exitCode = summary.valid ? EXIT.ok : EXIT.negative;
        return;
      }
      if (tokenPath === undefined)
        throw usageError('give the TOKEN file to check (or --receipt FILE for a receipt alone)');
      if (opts.package === undefined) {
        const stray = (
          ['decryptionKey', 'verificationKey', 'decryptionKeyFile', 'verificationKeyFile'] as const
        ).find((k) => opts[k] !== undefined);
        if (stray)
          throw usageError(
            `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --package`,
          );
      }
      const keyFlags = keyAttestationPolicy(opts);
      if (opts.package === undefined && Object.keys(keyFlags).length > 0)
        throw usageError(
          'the key attestation policy flags describe a package: they need --package',
        );
      let token: Uint8Array = new Uint8Array();
      let bodyNonce: string | undefined;
      let raw: Buffer;
      let jws: string | undefined;
      try {
        raw = await readBounded(tokenPath);
        const text = raw.toString('latin1').trim();
        if (looksLikeJws(text)) jws = text;
        else {
          const stray = (['jwks', 'issuer', 'audience'] as const).find(
            (k) => opts[k] !== undefined,
          );
          if (stray)
            throw usageError(
              `--${stray} is for result tokens (a JWT), and ${tokenPath} holds an attestation token`,
            );
          ({ token, bodyNonce } = parseTokenInput(raw, tokenPath));
        }
      } catch (err) {
        // scripts reading --json get a document for an unreadable input too (exit 2 as well)
        if (opts.json === true && err instanceof CliError)
          printJson({ valid: false, error: 'input_unreadable', detail: err.message });
        throw err;
      }
      if (jws !== undefined) {
        process.exitCode = (await resultToken(jws, opts)) ? EXIT.ok : EXIT.negative;
        return;
      }
      if (bodyNonce !== undefined && opts.nonce === undefined && opts.serverNonce === undefined)
        opts.nonce = bodyNonce;
      const { expectedNonce, serverNonce, deviceNonce } = nonces(opts);
      const at = opts.at === undefined ? new Date() : instant(opts.at);
      const clientDataHash =
        opts.clientDataHash === undefined
          ? undefined
          : bytesFlag(opts.clientDataHash, '--client-data-hash');
      const challenge =
        opts.challenge === undefined ? undefined : bytesFlag(opts.challenge, '--challenge');
      const revocationFile =
        opts.revocations === undefined ? undefined : readRevocationFile(opts.revocations);
      const input: VerifyInput = {
        token,
        expectedNonce,
        ...(clientDataHash ? { clientDataHash } : {}),
        ...(challenge ? { challenge } : {}),
      };
      const offline =
        opts.appId.length > 0 || opts.package !== undefined || opts.appleKey !== undefined;
      if (offline && opts.devRoots)
        throw usageError(
          '--dev-roots reads the development CA from the database: leave out --app-id, --package and --apple-key',
        );
      const mode: KeyMode = opts.devRoots ? 'test' : 'live';
      if (opts.serviceAccountFile !== undefined && (opts.package === undefined || !opts.online))
        throw usageError('--service-account-file needs --package and --online');
      if (!opts.online && isStandardRequest(token)) {
        throw usageError(
          'this is a Play Integrity standard-request token: only Google can decode it; re-run with --online (calls Google with the package service account)',
        );
      }
      const cfg = config();
      const appleRoots = appleRootsOf(cfg);
      const receipts = createReceiptVerifier(configuredReceiptRoots(cfg.appleReceiptRootCaPath));
      const androidRoots = configuredAndroidRoots(cfg.androidRootCaPath);
      const serviceAccount =
        opts.serviceAccountFile === undefined
          ? undefined
          : await readServiceAccount(opts.serviceAccountFile);
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

      const explain = async (
        allowlist: AllowlistReader,
        keys: AppleKeyStore,
        devRoot: Uint8Array | null,
        android: { keys: AndroidKeyStore; revocations: RevocationList },
      ) => {
        const rootsOf = (m: KeyMode) =>
          m === 'test' ? withDevelopmentRoot(appleRoots, devRoot) : appleRoots;
        const androidRootsOf = (m: KeyMode) =>
          m === 'test' && devRoot
            ? [...androidRoots, ...androidRootsFromCertificates([devRoot])]
            : androidRoots;
        const runAs =
          (m: KeyMode) =>
          (i: VerifyInput, o: { allowlist?: AllowlistReader; at?: Date } = {}) =>
            verifyToken(i, {
              now: () => o.at ?? at,
              verifiers: buildVerifiers({
                allowlist: o.allowlist ?? allowlist,
                appleKeys: keys,
                appleRoots: rootsOf(m),
                mode: m,
                // test keys trust receipts made with the development CA too
                receipts: m === 'test' ? withDevelopmentReceiptRoot(receipts, devRoot)! : receipts,
                ...(googleDecoder ? { googleDecoder } : {}),
                android: {
                  keys: android.keys,
                  roots: androidRootsOf(m),
                  revocations: () => android.revocations,
                },
              }),
            });
        const run = runAs(mode);
        try {
          const outcome = await run(input);
          const hints = outcome.ok
            ? []
            : await findHints(outcome, {
                input,
                at,
                allowlist,
                run,
                ...(serverNonce ? { serverNonce } : {}),
                ...(deviceNonce ? { deviceNonce } : {}),
              });
          if (
            !outcome.ok &&
            mode === 'live' &&
            !offline &&
            TEST_TRUST_REASONS.has(outcome.reason)
          ) {
            // a token minted by `attest dev mint` (or a key a test key registered) passes only for test keys
            const asTest = await runAs('test')(input);
            if (asTest.ok || failedAt(asTest) > failedAt(outcome)) {
              hints.push({
                code: 'test_keys_only',
                message:
                  'this token gets further as a test API key would verify it (development CA, test-only Play pairs, keys test keys registered): a live key rejects it; run again with --dev-roots to see the rest',
              });
            }
          }
          return {
            outcome,
            hints,
            devRoot: devRoot !== null,
            // the receipt is shown as the mode's verifier checks it
            receipts: mode === 'test' ? withDevelopmentReceiptRoot(receipts, devRoot)! : receipts,
          };
        } catch (err) {
          if (err instanceof GoogleFault || err instanceof GoogleBusyError)
            throw runtimeError(`Google gave no verdict: ${err.message}`);
          throw err;
        }
      };

      const result = offline
        ? await explain(
            offlineAllowlist(opts, serviceAccount, keyFlags, tokenService(token)),
            offlineKeys(opts, token),
            null,
            {
              keys: createMemoryAndroidKeyStore([], { readOnly: true }),
              revocations: revocationFile ?? shippedRevocations().list,
            },
          )
        : await withAdmin(
            async (admin) => {
              // one snapshot for the whole run, so the re-tries see the same allowlist
              const { apple, android, devRoot } = await admin.run('verifyFile.snapshot', {});
              if (opts.devRoots && !devRoot)
                process.stderr.write(
                  'attest: note: this deployment has no development CA ("attest dev init"); --dev-roots adds only test-only Play pairs\n',
                );
              const registered: AppleKeyStore = {
                find: (keyId) => admin.run('appleKeys.find', { keyId }),
                register: async () => false,
                raiseCounter: async () => false,
              };
              const androidRegistered: AndroidKeyStore = {
                find: (keyId) => admin.run('androidKeys.find', { keyId }),
                register: async () => false,
              };
              const stored = revocationFile ? null : await admin.run('verifyFile.revocations', {});
              return explain(
                createMemoryAllowlist({ apple, android }),
                readOnlyKeys(registered),
                devRoot,
                {
                  keys: readOnlyAndroidKeys(androidRegistered),
                  revocations:
                    revocationFile ??
                    (stored === null
                      ? shippedRevocations().list
                      : parseRevocationDocument({ entries: stored }).list),
                },
              );
            },
            { establish: false },
          );

      const roots = appleRoots === defaultAppleRoots() ? 'apple' : 'ATTEST_APPLE_ROOT_CA';
      // the receipt on its own, whatever the verdict on the token (it never changes the verdict)
      const receipt = await checkTokenReceipt(
        token,
        result.receipts,
        at,
        result.outcome.facts.appId,
      );
      report(result.outcome, result.hints, {
        receipt,
        at,
        nonceChecked: expectedNonce !== null,
        json: opts.json === true,
        offline,
        roots: mode === 'test' && result.devRoot ? `${roots}+development` : roots,
        mode,
      });
      process.exitCode = result.outcome.ok ? EXIT.ok : EXIT.negative;
    });
}

/** verify-file for a result token; the flags of attestation tokens do not apply to it. */
async function resultToken(text: string, opts: Options): Promise<boolean> {
  const stray = (
    [
      ['appId', opts.appId.length > 0],
      ['package', opts.package !== undefined],
      ['appleKey', opts.appleKey !== undefined],
      ['clientDataHash', opts.clientDataHash !== undefined],
      ['devRoots', opts.devRoots === true],
      ['online', opts.online === true],
      ['serviceAccountFile', opts.serviceAccountFile !== undefined],
    ] as const
  ).find(([, given]) => given);
  if (stray)
    throw usageError(
      `--${stray[0].replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is for attestation tokens; this is a result token (a JWT): check it with --jwks FILE or against the database's keys`,
    );
  const { expectedNonce } = nonces(opts);
  const at = opts.at === undefined ? new Date() : instant(opts.at);
  const cfg = config();
  const issuer = opts.issuer ?? cfg.issuer;
  return verifyResultTokenFile({
    token: text,
    at,
    ...(opts.jwks !== undefined ? { jwksFile: opts.jwks } : {}),
    ...(issuer !== undefined ? { issuer } : {}),
    ...(opts.audience !== undefined ? { audience: opts.audience } : {}),
    nonce: expectedNonce,
    json: opts.json === true,
    config: cfg,
  });
}

/** The rejections a test key's wider trust can change: only these are re-run as a test key. */
const TEST_TRUST_REASONS = new Set([
  'apple_chain_invalid',
  'apple_key_unknown',
  'apple_key_registered',
  'gms_decrypt_failed',
  'gms_signature_invalid',
  'android_chain_invalid',
  'android_key_unknown',
  'android_key_registered',
]);

const COMPACT_JWE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*){4}$/;

/**
 * Reads the token to check, in every input form verify-file knows: a file or stdin (`-`) holding
 * the token's CBOR bytes, its base64 text, or a saved verify request body (whose expectedNonce
 * comes along). Raw platform evidence and empty input are named, with the `attest token wrap`
 * that turns them into a token. Input over {@link INPUT_MAX_BYTES} is refused before it is read
 * (a 100 MB file once took 670 MB of memory). New input forms go here.
 * @param path - the TOKEN argument
 * @throws CliError (exit 2) saying in words what the input is when it is not a token
 */
export async function readTokenInput(
  path: string,
): Promise<{ token: Uint8Array; bodyNonce?: string }> {
  return parseTokenInput(await readBounded(path), path);
}

function parseTokenInput(raw: Buffer, path: string): { token: Uint8Array; bodyNonce?: string } {
  const text = raw.toString('latin1').trim();
  if (text.length === 0)
    throw usageError(
      `${path} is empty: give a file holding the token as CBOR or base64, or a saved verify request body`,
    );
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw[0]! >> 5 === 5) return { token: notRawEvidence(new Uint8Array(raw), path) };
  if (text.startsWith('{')) return fromRequestBody(raw, path);
  if (COMPACT_JWE.test(text)) {
    throw usageError(
      `${path} holds a raw Play Integrity integrity token (a JWE), not a format-1 token: wrap it with "attest token wrap gms --package <name> --integrity-token ${path} --nonce <b64>"`,
    );
  }
  const bytes = decodeBase64(text.replace(/\s+/g, ''));
  if (!bytes)
    throw usageError(`${path} is neither a CBOR token nor base64 text: ${describeInput(raw)}`);
  return { token: notRawEvidence(bytes, path) };
}

function readBounded(path: string): Promise<Buffer> {
  return readCliFile(path, {
    maxBytes: INPUT_MAX_BYTES,
    what: 'verify-file',
    stdin: true,
    tooLarge: (size) =>
      `${path} is ${size}, more than verify-file reads (${INPUT_MAX_BYTES / 1024} KiB; a token is at most 64 KiB): is it the token?`,
  });
}

const MAJOR_TYPES = [
  'an unsigned integer',
  'a negative integer',
  'a byte string',
  'a text string',
  'an array',
  'a map',
  'a tag',
  'a simple value or float',
];

/** What an input that is not a token looks like, in words. */
function describeInput(raw: Buffer): string {
  const isText = raw.every(
    (b) => b === 0x09 || b === 0x0a || b === 0x0d || (b >= 0x20 && b < 0x7f),
  );
  if (!isText) {
    return `binary data whose first byte 0x${raw[0]!.toString(16).padStart(2, '0')} starts ${MAJOR_TYPES[raw[0]! >> 5]} in CBOR, and a token is a CBOR map (first byte 0xa0 to 0xbb)`;
  }
  const text = raw.toString('latin1').trim();
  if (text.startsWith('{'))
    return 'it looks like JSON; give the token itself (the attestationToken value), not the request body';
  const stray = /[^A-Za-z0-9+/_=\s-]/.exec(text);
  if (stray)
    return `text with "${safeText(stray[0])}" at character ${stray.index + 1}; base64 uses only A-Z a-z 0-9 + / (or - _) and = at the end`;
  return 'text that is not well-formed base64 (its length or padding is wrong)';
}

function fromRequestBody(raw: Buffer, path: string): { token: Uint8Array; bodyNonce?: string } {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw usageError(
      `${path} starts like JSON but is not valid JSON; give a saved verify request body ({"attestationToken": ...}), CBOR or base64`,
    );
  }
  const b = body as {
    attestationToken?: unknown;
    expectedNonce?: unknown;
    sessionReference?: unknown;
  };
  if (typeof b !== 'object' || b === null || typeof b.attestationToken !== 'string') {
    throw usageError(
      `${path} is JSON without an "attestationToken" string: give a saved verify request body`,
    );
  }
  const token = decodeBase64(b.attestationToken);
  if (!token)
    throw usageError(
      `${path}: "attestationToken" is not base64 (the service answers such a request 400)`,
    );
  if (b.sessionReference !== undefined)
    process.stderr.write(
      'attest: note: the body uses a session: give --server-nonce (and --device-nonce) to check the nonce\n',
    );
  return {
    token: notRawEvidence(token, path),
    ...(typeof b.expectedNonce === 'string' ? { bodyNonce: b.expectedNonce } : {}),
  };
}

/** Refuses an App Attest attestation or assertion object given where a token belongs. */
function notRawEvidence(bytes: Uint8Array, path: string): Uint8Array {
  let value: unknown;
  try {
    value = decodeStrictCbor(bytes, { maxBytes: 64 * 1024, maxDepth: 16 });
  } catch {
    return bytes; // the verification reports what is wrong with it
  }
  if (!isMap(value) || value.has('v')) return bytes;
  if (value.has('fmt') && value.has('attStmt') && value.has('authData')) {
    throw usageError(
      `${path} holds a raw App Attest attestation object, not a format-1 token: wrap it with "attest token wrap apple --key-id <b64> --attestation ${path} --nonce <b64>"`,
    );
  }
  if (value.has('signature') && value.has('authenticatorData')) {
    throw usageError(
      `${path} holds a raw App Attest assertion object, not a format-1 token: wrap it with "attest token wrap apple --key-id <b64> --assertion ${path} --nonce <b64>"`,
    );
  }
  return bytes;
}

/** How far a verification got: the index of its failing check (as explain.ts ranks re-runs). */
function failedAt(outcome: VerifyOutcome): number {
  if (outcome.ok) return Number.POSITIVE_INFINITY;
  const i = outcome.checks.findIndex((c) => c.status === 'fail');
  return i === -1 ? outcome.checks.length : i;
}

function bytesFlag(value: string, flag: string): Uint8Array {
  const bytes = decodeBase64(value);
  if (!bytes) throw usageError(`${flag} must be base64 (standard or URL-safe)`);
  return bytes;
}

function nonces(opts: Options): {
  expectedNonce: Uint8Array | null;
  serverNonce?: Uint8Array;
  deviceNonce?: Uint8Array;
} {
  if (
    opts.nonce !== undefined &&
    (opts.serverNonce !== undefined || opts.deviceNonce !== undefined)
  ) {
    throw usageError(
      'give --nonce (sessionless) or --server-nonce [--device-nonce] (session), not both',
    );
  }
  if (opts.deviceNonce !== undefined && opts.serverNonce === undefined)
    throw usageError('--device-nonce needs --server-nonce');
  if (opts.nonce !== undefined) {
    const nonce = bytesFlag(opts.nonce, '--nonce');
    // the service's expectedNonce rule: a shorter or longer one is a malformed request there
    if (nonce.length < TOKEN_NONCE_MIN || nonce.length > TOKEN_NONCE_MAX) {
      throw usageError(
        `--nonce must be ${TOKEN_NONCE_MIN} to ${TOKEN_NONCE_MAX} bytes, as the service requires of expectedNonce; got ${nonce.length}`,
      );
    }
    return { expectedNonce: nonce };
  }
  if (opts.serverNonce === undefined) return { expectedNonce: null };
  const serverNonce = bytesFlag(opts.serverNonce, '--server-nonce');
  const deviceNonce =
    opts.deviceNonce === undefined ? undefined : bytesFlag(opts.deviceNonce, '--device-nonce');
  if (deviceNonce && deviceNonce.length > DEVICE_NONCE_BYTES.max) {
    throw usageError(
      `--device-nonce must be ${DEVICE_NONCE_BYTES.min} to ${DEVICE_NONCE_BYTES.max} bytes, as the service requires of deviceNonce; got ${deviceNonce.length}`,
    );
  }
  const expectedNonce = finalNonce(serverNonce, deviceNonce);
  return { expectedNonce, serverNonce, ...(deviceNonce ? { deviceNonce } : {}) };
}

/** ISO 8601 date and time with its offset: without one, JavaScript would read the machine's local time. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

function instant(text: string): Date {
  const d = new Date(text);
  if (!ISO_INSTANT.test(text) || Number.isNaN(d.getTime())) {
    throw usageError(
      `--at takes an ISO 8601 time with its offset, such as 2021-01-23T12:13:33Z, got "${text}"`,
    );
  }
  return d;
}

function offlineAllowlist(
  opts: Options,
  serviceAccount: GoogleServiceAccount | undefined,
  keyFlags: AndroidPolicyInput,
  service: string | undefined,
): AllowlistReader {
  for (const id of opts.appId)
    if (!APPLE_APP_ID.test(id)) throw usageError(`--app-id "${id}" is not TEAMID.bundle.id`);
  const android = [];
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
      });
    } catch (err) {
      throw usageError((err as Error).message);
    }
  }
  return createMemoryAllowlist({
    apple: opts.appId.map((appId) => ({ appId, env: 'any' as const })),
    android,
  });
}

/** A key given as itself or, kept out of `ps`, as a file holding it. */
function keyFlag(
  opts: Options,
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

async function readServiceAccount(path: string): Promise<GoogleServiceAccount> {
  const text = readCliFileSync(path, {
    maxBytes: CLI_INPUT_MAX_BYTES,
    what: '--service-account-file',
  }).toString('utf8');
  const parsed = await parseServiceAccount(text);
  if (!parsed.ok) throw usageError(`--service-account-file ${path}: ${parsed.problem}`);
  return parsed.account;
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

function offlineKeys(opts: Options, token: Uint8Array): AppleKeyStore {
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
/** The token's device.service, or undefined when it does not parse. */
function tokenService(token: Uint8Array): string | undefined {
  try {
    return parseEnvelope(token).service;
  } catch {
    return undefined;
  }
}

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

/** The database's Android keys, read-only: a registration is answered, never stored. */
function readOnlyAndroidKeys(store: AndroidKeyStore): AndroidKeyStore {
  return { find: (keyId) => store.find(keyId), register: async () => true };
}

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

function report(
  outcome: VerifyOutcome,
  hints: Hint[],
  ctx: {
    at: Date;
    nonceChecked: boolean;
    json: boolean;
    offline: boolean;
    roots: string;
    mode: KeyMode;
    receipt: ReceiptSummary | null;
  },
) {
  const checks = outcome.checks.map((c) => ({
    id: c.id,
    title: checkTitle(c.id) ?? c.id,
    status: c.status,
    detail: c.detail,
    ...(c.reason ? { reason: c.reason } : {}),
  }));
  if (ctx.json) {
    printJson({
      valid: outcome.ok,
      ...(outcome.ok ? {} : { reason: outcome.reason, detail: outcome.detail }),
      verifiedAt: ctx.at.toISOString(),
      nonceChecked: ctx.nonceChecked,
      source: ctx.offline ? 'flags' : 'database',
      trustRoots: ctx.roots,
      mode: ctx.mode,
      facts: outcome.facts,
      checks,
      ...(outcome.ok ? { details: outcome.details } : {}),
      ...(ctx.receipt
        ? {
            receipt: {
              valid: ctx.receipt.valid,
              type: ctx.receipt.type,
              creationTime: ctx.receipt.creationTime,
              expirationTime: ctx.receipt.expirationTime,
              riskMetric: ctx.receipt.riskMetric,
              problem: ctx.receipt.problem,
            },
          }
        : {}),
      hints,
    });
    return;
  }
  // Token-controlled text (device.service, packageName, fmt, details) is in facts, details and
  // hints: every line is escaped whole, then coloured, so nothing from the token reaches the terminal raw.
  const p = paint(colorWanted(process.stdout.isTTY));
  const out: string[] = [];
  const line = (text: string) => out.push(safeText(text));
  const f = outcome.facts;
  line(
    `token: service ${f.service ?? '?'}${f.shape ? `, ${f.shape}` : ''}${f.appId ? `, app ${f.appId}` : ''}${f.packageName ? `, package ${f.packageName}` : ''}${f.keyId ? `, key ${f.keyId}` : ''}`,
  );
  line(
    `verified at ${ctx.at.toISOString()} against ${ctx.offline ? 'the flags given' : 'the configured database (read-only)'}, as a ${ctx.mode} API key would`,
  );
  if (!ctx.nonceChecked)
    out.push(p.yellow('nonce: NOT CHECKED (no --nonce or --server-nonce given)'));
  out.push('');
  const mark = { pass: p.green('pass'), fail: p.red(p.bold('FAIL')), skip: p.dim('skip') } as const;
  for (const c of checks) {
    out.push(`  [${mark[c.status]}] ${safeText(c.title)}`);
    line(`         ${c.id}: ${c.detail}${c.reason ? ` (${c.reason})` : ''}`);
  }
  out.push('');
  if (ctx.receipt) out.push(receiptLine(ctx.receipt), '');
  if (outcome.ok) {
    const { service, ...details } = outcome.details;
    out.push(`${p.green(p.bold('VALID'))}${safeText(` (${service}): ${JSON.stringify(details)}`)}`);
  } else {
    out.push(`${p.red(p.bold('REJECTED'))}${safeText(`: ${outcome.reason}: ${outcome.detail}`)}`);
    for (const h of hints) line(`  hint (${h.code}): ${h.message}`);
    if (hints.length === 0) out.push('  no common integration mistake explains it');
  }
  process.stdout.write(`${out.join('\n')}\n`);
}
