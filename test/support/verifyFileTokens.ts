/**
 * For the `attest verify-file` tests: the real App Attest captures wrapped in format-1 tokens,
 * `gms` tokens, temporary token files, and an in-process runner that sets the environment for
 * one call (ATTEST_APPLE_ROOT_CA, ATTEST_DATA_DIR) and parses `--json` output.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeGmsToken } from '../../src/core/gms/gmsToken.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { runCli, type CliRun } from './cli.js';

// ---- the real captures (test/fixtures/apple, fields in VECTORS.md) ----

export interface CaptureAssertion {
  assertion: string;
  clientDataHash: string;
  expectedCounter: number;
  publicKeyPem: string;
}

export interface Capture {
  id: string;
  appId: string;
  keyId: string;
  environment?: 'development' | 'production';
  attestation?: string;
  clientDataHash?: string;
  verifyAt?: string;
  leafNotBefore?: string;
  leafNotAfter?: string;
  assertions: CaptureAssertion[];
}

const FIXTURES = fileURLToPath(new URL('../fixtures/apple/', import.meta.url));

/** Every capture, in file order. */
export function loadCaptures(): Capture[] {
  return readdirSync(FIXTURES)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => JSON.parse(readFileSync(join(FIXTURES, name), 'utf8')) as Capture);
}

const b64 = (text: string) => Buffer.from(text, 'base64');

/** A format-1 `apple` token around a capture's attestation and/or one of its assertions. */
export function captureToken(
  capture: Capture,
  options: { nonce?: Uint8Array; assertion?: string; withAttestation?: boolean } = {},
): Buffer {
  const apple = new Map<string, unknown>([['keyId', b64(capture.keyId)]]);
  // an assertion goes alone unless `withAttestation` (the attestation plus assertion shape)
  if (
    capture.attestation &&
    (options.assertion ? options.withAttestation === true : options.withAttestation !== false)
  )
    apple.set('attestation', b64(capture.attestation));
  if (options.assertion) apple.set('assertion', b64(options.assertion));
  return Buffer.from(
    encodeEnvelope({
      // any 16..512 bytes: without a nonce flag verify-file does not compare it, and the captures'
      // own clientDataHash replaces SHA-256 of it
      nonce: options.nonce ?? Buffer.alloc(32, 0x5a),
      service: 'apple',
      evidence: apple,
    }),
  );
}

/** A format-1 `gms` token (the encoder `attest dev mint` and `token wrap` ship). */
export function gmsToken(fields: {
  nonce: Uint8Array;
  packageName: string;
  integrityToken: string;
}): Buffer {
  return Buffer.from(encodeGmsToken(fields, { model: 'Pixel 9' }));
}

// ---- files ----

/** A private temporary folder with a `file(name, content)` writer and cleanup. */
export function scratch(prefix = 'attest-vf-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  let n = 0;
  return {
    dir,
    /** writes `content` (bytes as is, text as UTF-8) and returns the path */
    file(content: Uint8Array | string, name = `token-${++n}`): string {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

// ---- running the command ----

/** `verify-file --json` output (README "Why was a token rejected?"). */
export interface VerifyFileJson {
  valid: boolean;
  reason?: string;
  detail?: string;
  verifiedAt: string;
  nonceChecked: boolean;
  /** android-key with --challenge: the attested challenge was given, not derived */
  challenge?: 'given';
  source: 'flags' | 'database';
  trustRoots: string;
  facts: Record<string, unknown>;
  checks: {
    id: string;
    title: string;
    status: 'pass' | 'fail' | 'skip' | 'observed';
    detail: string;
    reason?: string;
  }[];
  details?: Record<string, unknown>;
  hints: { code: string; message: string }[];
}

export interface VerifyFileRun extends CliRun {
  /** the parsed document when `--json` was given and the command got that far */
  json?: VerifyFileJson;
}

/**
 * Runs `attest verify-file ...args` in this process with `env` set for the call only (a value of
 * `undefined` unsets). DATABASE_URL is always unset unless given, so database mode uses
 * ATTEST_DATA_DIR.
 */
export async function verifyFile(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<VerifyFileRun> {
  const vars = { DATABASE_URL: undefined, ...env };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  let run: CliRun;
  try {
    run = await runCli('verify-file', ...args);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  const json =
    args.includes('--json') && run.stdout.trim().startsWith('{')
      ? (JSON.parse(run.stdout) as VerifyFileJson)
      : undefined;
  return json ? { ...run, json } : run;
}

/** The hint codes of a `--json` run. */
export const hintCodes = (run: VerifyFileRun): string[] =>
  (run.json?.hints ?? []).map((h) => h.code);
