import { createPublicKey, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { defaultAppleRoots } from '../../core/apple/trustRoots.js';
import { decodeBase64 } from '../../core/base64.js';
import { isBytes, isMap } from '../../core/cbor.js';
import { CHECK_TITLES } from '../../core/checkTitles.js';
import { findHints, type Hint } from '../../core/explain.js';
import { parseDecryptionKey, parseVerificationKey } from '../../core/google/keyMaterial.js';
import { createMemoryAllowlist, createMemoryAppleKeyStore } from '../../core/memoryStores.js';
import type { AllowlistReader, AppleKeyRecord, AppleKeyStore, GoogleServiceAccount, IntegrityTokenDecoder, VerifyOutcome } from '../../core/types.js';
import { buildVerifiers, loadAppleRoots } from '../../core/verifiers.js';
import { parseEnvelope, verifyToken, type VerifyInput } from '../../core/verify.js';
import { createAllowlistRepository, createCachedAllowlist } from '../../db/allowlist.js';
import { createAppleKeyRepository } from '../../db/appleKeys.js';
import { createPlayIntegrityClient, GoogleBusyError, GoogleFault } from '../../google/playIntegrityClient.js';
import { parseServiceAccount } from '../../google/serviceAccount.js';
import { config, withDatabase } from '../context.js';
import { EXIT, runtimeError, usageError } from '../errors.js';
import { printJson } from '../output.js';
import { APPLE_APP_ID } from './allowlist.js';

interface Options {
  nonce?: string;
  serverNonce?: string;
  deviceNonce?: string;
  at?: string;
  clientDataHash?: string;
  appId: string[];
  package?: string;
  decryptionKey?: string;
  verificationKey?: string;
  appleKey?: string;
  counter?: string;
  online?: boolean;
  serviceAccountFile?: string;
  json?: boolean;
}

export function verifyFileCommand(): Command {
  return new Command('verify-file')
    .description('check a token offline, step by step, and explain why it is rejected (changes no state)')
    .argument('<token>', 'file with the token as raw CBOR or base64 text; - for stdin')
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce sent to verify')
    .option('--at <iso-time>', 'verify as of this instant (certificate validity, freshness)')
    .option('--client-data-hash <b64>', 'App Attest: use these bytes instead of SHA-256(final nonce)')
    .option('--app-id <id>', 'no database: allow this App Attest app ID (either environment); repeatable', (v: string, p: string[]) => [...p, v], [])
    .option('--package <name>', 'no database: allow this Android package, with --decryption-key and --verification-key (or --service-account-file)')
    .option('--decryption-key <b64>', 'with --package: its AES-256 decryption key')
    .option('--verification-key <b64>', 'with --package: its EC P-256 verification key')
    .option('--apple-key <pem>', 'no database: a registered App Attest public key (PEM file or text), with --app-id')
    .option('--counter <n>', 'with --apple-key: the stored assertion counter', '0')
    .option('--online', 'Play Integrity standard requests: let Google decode the token with the package service account (network)')
    .option('--service-account-file <path>', 'with --package and --online: the service-account key file (JSON)')
    .option('--json', 'print a JSON document (documented in the README)')
    .addHelpText('after', `
Uses the allowlist and registered keys of the configured database, read-only, unless --app-id,
--package or --apple-key is given. Without a nonce flag the nonce is not checked. Standard-request
Play Integrity tokens can only be decoded by Google: they are verified with --online only.

Examples:
  $ attest verify-file token.b64 --server-nonce q4T...= --device-nonce AAEC
  $ attest verify-file capture.cbor --at 2021-01-23T12:13:33Z --app-id 6MURL8TA57.de.example.app \\
      --client-data-hash SGVsbG8=
  $ attest verify-file play.cbor --nonce ... --package com.example.app \\
      --decryption-key ... --verification-key ... --json
  $ attest verify-file standard.cbor --nonce ... --online`)
    .action(async (tokenPath: string, opts: Options) => {
      const token = readToken(tokenPath);
      const { expectedNonce, serverNonce, deviceNonce } = nonces(opts);
      const at = opts.at === undefined ? new Date() : instant(opts.at);
      const clientDataHash = opts.clientDataHash === undefined ? undefined : bytesFlag(opts.clientDataHash, '--client-data-hash');
      const input: VerifyInput = { token, expectedNonce, ...(clientDataHash ? { clientDataHash } : {}) };
      const offline = opts.appId.length > 0 || opts.package !== undefined || opts.appleKey !== undefined;
      if (opts.serviceAccountFile !== undefined && (opts.package === undefined || !opts.online)) throw usageError('--service-account-file needs --package and --online');
      if (!opts.online && isStandardRequest(token)) {
        throw usageError('this is a Play Integrity standard-request token: only Google can decode it; re-run with --online (calls Google with the package service account)');
      }
      const cfg = config();
      const appleRoots = loadAppleRoots(cfg.appleRootCaPath ? readFileSync(cfg.appleRootCaPath, 'utf8') : undefined);
      const serviceAccount = opts.serviceAccountFile === undefined ? undefined : await readServiceAccount(opts.serviceAccountFile);
      const googleDecoder = opts.online
        ? oncePerToken(createPlayIntegrityClient({ oauthUrl: cfg.googleOauthUrl, playIntegrityUrl: cfg.googlePlayIntegrityUrl, timeoutMs: cfg.googleTimeoutMs, maxInFlight: 4 }))
        : undefined;

      const explain = async (allowlist: AllowlistReader, keys: AppleKeyStore) => {
        const run = (i: VerifyInput, o: { allowlist?: AllowlistReader; at?: Date } = {}) =>
          verifyToken(i, {
            now: () => o.at ?? at,
            verifiers: buildVerifiers({ allowlist: o.allowlist ?? allowlist, appleKeys: keys, appleRoots, ...(googleDecoder ? { googleDecoder } : {}) }),
          });
        try {
          const outcome = await run(input);
          const hints = outcome.ok
            ? []
            : await findHints(outcome, { input, at, allowlist, run, ...(serverNonce ? { serverNonce } : {}), ...(deviceNonce ? { deviceNonce } : {}) });
          return { outcome, hints };
        } catch (err) {
          if (err instanceof GoogleFault || err instanceof GoogleBusyError) throw runtimeError(`Google gave no verdict: ${err.message}`);
          throw err;
        }
      };

      const result = offline
        ? await explain(offlineAllowlist(opts, serviceAccount), offlineKeys(opts, token))
        : await withDatabase(async (handle) => {
            // one snapshot for the whole run, so the re-tries see the same allowlist
            const allowlist = createCachedAllowlist(createAllowlistRepository(handle.db), { ttlMs: Number.POSITIVE_INFINITY });
            return explain(allowlist, readOnlyKeys(createAppleKeyRepository(handle.db)));
          });

      report(result.outcome, result.hints, { at, nonceChecked: expectedNonce !== null, json: opts.json === true, offline, roots: appleRoots === defaultAppleRoots() ? 'apple' : 'ATTEST_APPLE_ROOT_CA' });
      process.exitCode = result.outcome.ok ? EXIT.ok : EXIT.negative;
    });
}

function readToken(path: string): Uint8Array {
  let raw: Buffer;
  try {
    raw = readFileSync(path === '-' ? 0 : path);
  } catch (err) {
    throw usageError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}): give a file holding the token as CBOR or base64`);
  }
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw.length > 0 && raw[0]! >> 5 === 5) return new Uint8Array(raw);
  const text = raw.toString('latin1').replace(/\s+/g, '');
  const bytes = decodeBase64(text);
  if (!bytes) throw usageError(`${path} is neither a CBOR token nor base64 text`);
  return bytes;
}

function bytesFlag(value: string, flag: string): Uint8Array {
  const bytes = decodeBase64(value);
  if (!bytes) throw usageError(`${flag} must be base64 (standard or URL-safe)`);
  return bytes;
}

function nonces(opts: Options): { expectedNonce: Uint8Array | null; serverNonce?: Uint8Array; deviceNonce?: Uint8Array } {
  if (opts.nonce !== undefined && (opts.serverNonce !== undefined || opts.deviceNonce !== undefined)) {
    throw usageError('give --nonce (sessionless) or --server-nonce [--device-nonce] (session), not both');
  }
  if (opts.deviceNonce !== undefined && opts.serverNonce === undefined) throw usageError('--device-nonce needs --server-nonce');
  if (opts.nonce !== undefined) return { expectedNonce: bytesFlag(opts.nonce, '--nonce') };
  if (opts.serverNonce === undefined) return { expectedNonce: null };
  const serverNonce = bytesFlag(opts.serverNonce, '--server-nonce');
  const deviceNonce = opts.deviceNonce === undefined ? undefined : bytesFlag(opts.deviceNonce, '--device-nonce');
  const expectedNonce = deviceNonce ? new Uint8Array(Buffer.concat([serverNonce, deviceNonce])) : serverNonce;
  return { expectedNonce, serverNonce, ...(deviceNonce ? { deviceNonce } : {}) };
}

/** ISO 8601 date and time with its offset: without one, JavaScript would read the machine's local time. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

function instant(text: string): Date {
  const d = new Date(text);
  if (!ISO_INSTANT.test(text) || Number.isNaN(d.getTime())) {
    throw usageError(`--at takes an ISO 8601 time with its offset, such as 2021-01-23T12:13:33Z, got "${text}"`);
  }
  return d;
}

function offlineAllowlist(opts: Options, serviceAccount: GoogleServiceAccount | undefined): AllowlistReader {
  for (const id of opts.appId) if (!APPLE_APP_ID.test(id)) throw usageError(`--app-id "${id}" is not TEAMID.bundle.id`);
  const android = [];
  if (opts.package !== undefined) {
    const keyless = serviceAccount !== undefined && opts.decryptionKey === undefined && opts.verificationKey === undefined;
    if (!keyless && (opts.decryptionKey === undefined || opts.verificationKey === undefined)) {
      throw usageError('--package needs --decryption-key and --verification-key (or, for standard requests, --service-account-file with --online)');
    }
    try {
      const keys = keyless ? [] : [{ id: 'cli', decryptionKey: parseDecryptionKey(opts.decryptionKey!), verificationKey: parseVerificationKey(opts.verificationKey!) }];
      android.push({
        packageName: opts.package,
        keys,
        ...(serviceAccount ? { serviceAccount } : {}),
        certificateDigests: [],
        minVerdict: 'MEETS_DEVICE_INTEGRITY' as const,
        allowUnrecognized: false,
        maxAgeSeconds: 600,
      });
    } catch (err) {
      throw usageError((err as Error).message);
    }
  }
  return createMemoryAllowlist({ apple: opts.appId.map((appId) => ({ appId, env: 'any' as const })), android });
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
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw usageError(`--service-account-file: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
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
  if (opts.appleKey === undefined) return createMemoryAppleKeyStore([], { readOnly: true });
  if (opts.appId.length !== 1) throw usageError('--apple-key needs exactly one --app-id: the app the key was registered for');
  const counter = /^\d{1,10}$/.test(opts.counter ?? '') ? Number(opts.counter) : Number.NaN;
  if (!(counter >= 0 && counter <= 0xffffffff)) throw usageError('--counter must be 0 to 4294967295');
  let pem = opts.appleKey;
  if (!pem.includes('-----BEGIN')) {
    try {
      pem = readFileSync(pem, 'utf8');
    } catch {
      throw usageError(`--apple-key: cannot read ${opts.appleKey}; give a PEM file or the PEM text`);
    }
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
    environment: 'Production',
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

function report(
  outcome: VerifyOutcome,
  hints: Hint[],
  ctx: { at: Date; nonceChecked: boolean; json: boolean; offline: boolean; roots: string },
) {
  const checks = outcome.checks.map((c) => ({ id: c.id, title: CHECK_TITLES[c.id] ?? c.id, status: c.status, detail: c.detail, ...(c.reason ? { reason: c.reason } : {}) }));
  if (ctx.json) {
    printJson({
      valid: outcome.ok,
      ...(outcome.ok ? {} : { reason: outcome.reason, detail: outcome.detail }),
      verifiedAt: ctx.at.toISOString(),
      nonceChecked: ctx.nonceChecked,
      source: ctx.offline ? 'flags' : 'database',
      trustRoots: ctx.roots,
      facts: outcome.facts,
      checks,
      ...(outcome.ok ? { details: outcome.details } : {}),
      hints,
    });
    return;
  }
  const out: string[] = [];
  const f = outcome.facts;
  out.push(`token: service ${f.service ?? '?'}${f.shape ? `, ${f.shape}` : ''}${f.appId ? `, app ${f.appId}` : ''}${f.packageName ? `, package ${f.packageName}` : ''}${f.keyId ? `, key ${f.keyId}` : ''}`);
  out.push(`verified at ${ctx.at.toISOString()} against ${ctx.offline ? 'the flags given' : 'the configured database (read-only)'}`);
  if (!ctx.nonceChecked) out.push('nonce: NOT CHECKED (no --nonce or --server-nonce given)');
  out.push('');
  const mark = { pass: 'pass', fail: 'FAIL', skip: 'skip' } as const;
  for (const c of checks) {
    out.push(`  [${mark[c.status]}] ${c.title}`);
    out.push(`         ${c.id}: ${c.detail}${c.reason ? ` (${c.reason})` : ''}`);
  }
  out.push('');
  if (outcome.ok) {
    const { service, ...details } = outcome.details;
    out.push(`VALID (${service}): ${JSON.stringify(details)}`);
  } else {
    out.push(`REJECTED: ${outcome.reason}: ${outcome.detail}`);
    for (const h of hints) out.push(`  hint (${h.code}): ${h.message}`);
    if (hints.length === 0) out.push('  no common integration mistake explains it');
  }
  process.stdout.write(`${out.join('\n')}\n`);
}
