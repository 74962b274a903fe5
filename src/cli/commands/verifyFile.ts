import { createPublicKey, createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { defaultAppleRoots } from '../../core/apple/trustRoots.js';
import { decodeBase64 } from '../../core/base64.js';
import { decodeStrictCbor, isBytes, isMap } from '../../core/cbor.js';
import { CHECK_TITLES } from '../../core/checkTitles.js';
import { findHints, type Hint } from '../../core/explain.js';
import { parseDecryptionKey, parseVerificationKey } from '../../core/google/keyMaterial.js';
import { createMemoryAllowlist, createMemoryAppleKeyStore } from '../../core/memoryStores.js';
import type { AllowlistReader, AppleKeyRecord, AppleKeyStore, KeyMode, VerifyOutcome } from '../../core/types.js';
import { buildVerifiers, loadAppleRoots } from '../../core/verifiers.js';
import { parseEnvelope, verifyToken, type VerifyInput } from '../../core/verify.js';
import { createAllowlistRepository, createCachedAllowlist } from '../../db/allowlist.js';
import { createAppleKeyRepository } from '../../db/appleKeys.js';
import { createDevCaRepository } from '../../db/devCa.js';
import { config, withDatabase } from '../context.js';
import { EXIT, usageError } from '../errors.js';
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
  devRoots?: boolean;
  json?: boolean;
}

export function verifyFileCommand(): Command {
  return new Command('verify-file')
    .description('check a token offline, step by step, and explain why it is rejected (changes no state)')
    .argument('<token>', 'file with the token as raw CBOR, base64 text, or a saved verify request body (JSON); - for stdin')
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce sent to verify')
    .option('--at <iso-time>', 'verify as of this instant (certificate validity, freshness)')
    .option('--client-data-hash <b64>', 'App Attest: use these bytes instead of SHA-256(final nonce)')
    .option('--app-id <id>', 'no database: allow this App Attest app ID (either environment); repeatable', (v: string, p: string[]) => [...p, v], [])
    .option('--package <name>', 'no database: allow this Android package, with --decryption-key and --verification-key')
    .option('--decryption-key <b64>', 'with --package: its AES-256 decryption key')
    .option('--verification-key <b64>', 'with --package: its EC P-256 verification key')
    .option('--apple-key <pem>', 'no database: a registered App Attest public key (PEM file or text), with --app-id')
    .option('--counter <n>', 'with --apple-key: the stored assertion counter', '0')
    .option('--dev-roots', 'verify as a test API key would: also trust the database\'s development CA and test-only Play pairs')
    .option('--json', 'print a JSON document (documented in the README)')
    .addHelpText('after', `
Uses the allowlist and registered keys of the configured database, read-only, unless --app-id,
--package or --apple-key is given. Without a nonce flag the nonce is not checked; a saved verify
request body supplies its expectedNonce. Verifies as a live API key does unless --dev-roots.

Examples:
  $ attest verify-file token.b64 --server-nonce q4T...= --device-nonce AAEC
  $ attest verify-file capture.cbor --at 2021-01-23T12:13:33Z --app-id 6MURL8TA57.de.example.app \\
      --client-data-hash SGVsbG8=
  $ attest verify-file play.cbor --nonce ... --package com.example.app \\
      --decryption-key ... --verification-key ... --json`)
    .action(async (tokenPath: string, opts: Options) => {
      const { token, bodyNonce } = readToken(tokenPath);
      if (bodyNonce !== undefined && opts.nonce === undefined && opts.serverNonce === undefined) opts.nonce = bodyNonce;
      const { expectedNonce, serverNonce, deviceNonce } = nonces(opts);
      const at = opts.at === undefined ? new Date() : instant(opts.at);
      const clientDataHash = opts.clientDataHash === undefined ? undefined : bytesFlag(opts.clientDataHash, '--client-data-hash');
      const input: VerifyInput = { token, expectedNonce, ...(clientDataHash ? { clientDataHash } : {}) };
      const offline = opts.appId.length > 0 || opts.package !== undefined || opts.appleKey !== undefined;
      if (offline && opts.devRoots) throw usageError('--dev-roots reads the development CA from the database: leave out --app-id, --package and --apple-key');
      const mode: KeyMode = opts.devRoots ? 'test' : 'live';
      const cfg = config();
      const appleRoots = loadAppleRoots(cfg.appleRootCaPath ? readFileSync(cfg.appleRootCaPath, 'utf8') : undefined);

      const explain = async (allowlist: AllowlistReader, keys: AppleKeyStore, devRoot: Uint8Array | null) => {
        const rootsOf = (m: KeyMode) => (m === 'test' && devRoot ? [...appleRoots, new X509Certificate(devRoot)] : appleRoots);
        const runAs = (m: KeyMode) => (i: VerifyInput, o: { allowlist?: AllowlistReader; at?: Date } = {}) =>
          verifyToken(i, { now: () => o.at ?? at, verifiers: buildVerifiers({ allowlist: o.allowlist ?? allowlist, appleKeys: keys, appleRoots: rootsOf(m), mode: m }) });
        const run = runAs(mode);
        const outcome = await run(input);
        const hints = outcome.ok
          ? []
          : await findHints(outcome, { input, at, allowlist, run, ...(serverNonce ? { serverNonce } : {}), ...(deviceNonce ? { deviceNonce } : {}) });
        if (!outcome.ok && mode === 'live' && !offline && TEST_TRUST_REASONS.has(outcome.reason)) {
          // a token minted by `attest dev mint` (or a key a test key registered) passes only for test keys
          const asTest = await runAs('test')(input);
          if (asTest.ok || failedAt(asTest) > failedAt(outcome)) {
            hints.push({ code: 'test_keys_only', message: 'this token gets further as a test API key would verify it (development CA, test-only Play pairs, keys test keys registered): a live key rejects it; run again with --dev-roots to see the rest' });
          }
        }
        return { outcome, hints, devRoot: devRoot !== null };
      };

      const result = offline
        ? await explain(offlineAllowlist(opts), offlineKeys(opts, token), null)
        : await withDatabase(async (handle) => {
            // one snapshot for the whole run, so the re-tries see the same allowlist
            const allowlist = createCachedAllowlist(createAllowlistRepository(handle.db), { ttlMs: Number.POSITIVE_INFINITY });
            const devRoot = await createDevCaRepository(handle.db).root();
            if (opts.devRoots && !devRoot) process.stderr.write('attest: note: this deployment has no development CA ("attest dev init"); --dev-roots adds only test-only Play pairs\n');
            return explain(allowlist, readOnlyKeys(createAppleKeyRepository(handle.db)), devRoot);
          });

      const roots = appleRoots === defaultAppleRoots() ? 'apple' : 'ATTEST_APPLE_ROOT_CA';
      report(result.outcome, result.hints, { at, nonceChecked: expectedNonce !== null, json: opts.json === true, offline, roots: mode === 'test' && result.devRoot ? `${roots}+development` : roots, mode });
      process.exitCode = result.outcome.ok ? EXIT.ok : EXIT.negative;
    });
}

/** The rejections a test key's wider trust can change: only these are re-run as a test key. */
const TEST_TRUST_REASONS = new Set(['apple_chain_invalid', 'apple_key_unknown', 'apple_key_registered', 'gms_decrypt_failed', 'gms_signature_invalid']);

const COMPACT_JWE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*){4}$/;

/**
 * The token from a file: raw CBOR, base64 text, or a saved verify request body (whose
 * expectedNonce comes along). Raw platform evidence and empty files are named, with the
 * `attest token wrap` that turns them into a token.
 */
function readToken(path: string): { token: Uint8Array; bodyNonce?: string } {
  let raw: Buffer;
  try {
    raw = readFileSync(path === '-' ? 0 : path);
  } catch (err) {
    throw usageError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}): give a file holding the token as CBOR or base64`);
  }
  const text = raw.toString('latin1').trim();
  if (text.length === 0) throw usageError(`${path} is empty: give a file holding the token as CBOR or base64, or a saved verify request body`);
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw[0]! >> 5 === 5) return { token: notRawEvidence(new Uint8Array(raw), path) };
  if (text.startsWith('{')) return fromRequestBody(raw, path);
  if (COMPACT_JWE.test(text)) {
    throw usageError(
      `${path} holds a raw Play Integrity integrity token (a JWE), not a format-1 token: wrap it with "attest token wrap gms --package <name> --integrity-token ${path} --nonce <b64>"`,
    );
  }
  const bytes = decodeBase64(text.replace(/\s+/g, ''));
  if (!bytes) throw usageError(`${path} is neither a CBOR token nor base64 text`);
  return { token: notRawEvidence(bytes, path) };
}

function fromRequestBody(raw: Buffer, path: string): { token: Uint8Array; bodyNonce?: string } {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw usageError(`${path} starts like JSON but is not valid JSON; give a saved verify request body ({"attestationToken": ...}), CBOR or base64`);
  }
  const b = body as { attestationToken?: unknown; expectedNonce?: unknown; sessionReference?: unknown };
  if (typeof b !== 'object' || b === null || typeof b.attestationToken !== 'string') {
    throw usageError(`${path} is JSON without an "attestationToken" string: give a saved verify request body`);
  }
  const token = decodeBase64(b.attestationToken);
  if (!token) throw usageError(`${path}: "attestationToken" is not base64 (the service answers such a request 400)`);
  if (b.sessionReference !== undefined) process.stderr.write('attest: note: the body uses a session: give --server-nonce (and --device-nonce) to check the nonce\n');
  return { token: notRawEvidence(token, path), ...(typeof b.expectedNonce === 'string' ? { bodyNonce: b.expectedNonce } : {}) };
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
    throw usageError(`${path} holds a raw App Attest assertion object, not a format-1 token: wrap it with "attest token wrap apple --key-id <b64> --assertion ${path} --nonce <b64>"`);
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

function offlineAllowlist(opts: Options): AllowlistReader {
  for (const id of opts.appId) if (!APPLE_APP_ID.test(id)) throw usageError(`--app-id "${id}" is not TEAMID.bundle.id`);
  const android = [];
  if (opts.package !== undefined) {
    if (opts.decryptionKey === undefined || opts.verificationKey === undefined) throw usageError('--package needs --decryption-key and --verification-key');
    try {
      const decryptionKey = parseDecryptionKey(opts.decryptionKey);
      const verificationKey = parseVerificationKey(opts.verificationKey);
      android.push({
        packageName: opts.package,
        keys: [{ id: 'cli', decryptionKey, verificationKey }],
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
  ctx: { at: Date; nonceChecked: boolean; json: boolean; offline: boolean; roots: string; mode: KeyMode },
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
      mode: ctx.mode,
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
  out.push(`verified at ${ctx.at.toISOString()} against ${ctx.offline ? 'the flags given' : 'the configured database (read-only)'}, as a ${ctx.mode} API key would`);
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
