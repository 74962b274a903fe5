import { createHash } from 'node:crypto';
import type { JWK } from 'jose';
import { colorWanted, DEFAULT_RESULT_TOKEN_TTL_SECONDS, type Config } from '../config.js';
import { checkResultToken, publicJwk, type ResultTokenVerdict } from '../core/resultToken.js';
import { RETIRED_KEY_GRACE_SECONDS } from '../core/resultKeyTiming.js';
import { withAdmin } from './context.js';
import { readCliFileSync } from './inputFiles.js';
import { usageError } from './errors.js';
import { printJson } from './output.js';
import { paint, safeText } from './terminalText.js';

/** The most a JWKS file may be: a key set is a few hundred bytes a key. */
const JWKS_FILE_MAX_BYTES = 256 * 1024;

export interface ResultTokenRun {
  token: string;
  at: Date;
  /** --jwks FILE: check offline against it; else the deployment's keys, from the database */
  jwksFile?: string;
  issuer?: string;
  audience?: string;
  /** the final nonce (--nonce, or --server-nonce/--device-nonce): compared with the nonce claim */
  nonce: Uint8Array | null;
  json: boolean;
  config: Config;
}

/**
 * `verify-file` for a result token: its signature against the deployment's keys (every key the
 * database holds, published or not) or a JWKS file, its claims, issuer, audience, nonce and
 * lifetime at `--at`. Changes nothing. Returns whether it is valid.
 */
export async function verifyResultTokenFile(run: ResultTokenRun): Promise<boolean> {
  let source: string;
  let keys: JWK[];
  let published: Set<string> | undefined;
  if (run.jwksFile !== undefined) {
    keys = readJwks(run.jwksFile);
    source = run.jwksFile;
  } else {
    const ttl = run.config.resultTokenTtlSeconds ?? DEFAULT_RESULT_TOKEN_TTL_SECONDS;
    ({ keys, published } = await withAdmin(async (admin) => {
      const all = await admin.run('resultKeys.list', {});
      const live = await admin.run('resultKeys.list', {
        publishedWithinSeconds: ttl + RETIRED_KEY_GRACE_SECONDS,
      });
      return {
        keys: all.map((k) => publicJwk(k.id, k.publicKey) as unknown as JWK),
        published: new Set(live.map((k) => k.id)),
      };
    }));
    source = 'the configured database (read-only)';
  }
  const verdict = await checkResultToken(run.token, {
    keys,
    now: run.at,
    ...(run.issuer !== undefined ? { issuer: run.issuer } : {}),
    ...(run.audience !== undefined ? { audience: run.audience } : {}),
  });
  const nonce = nonceCheck(verdict, run.nonce);
  const valid = verdict.valid && nonce.status !== 'fail';
  const kid = typeof verdict.header?.kid === 'string' ? verdict.header.kid : undefined;
  const keyPublished = kid && published ? published.has(kid) : undefined;
  const exp = verdict.claims?.exp;
  const expiresAt = Number.isInteger(exp) ? new Date((exp as number) * 1000).toISOString() : null;
  const checks = [...verdict.checks, nonce];

  if (run.json) {
    printJson({
      valid,
      kind: 'result-token',
      verifiedAt: run.at.toISOString(),
      keys: run.jwksFile !== undefined ? 'jwks-file' : 'database',
      ...(keyPublished !== undefined ? { keyPublished } : {}),
      expiresAt,
      checks,
      header: verdict.header ?? null,
      claims: verdict.claims ?? null,
    });
    return valid;
  }
  const p = paint(colorWanted(process.stdout.isTTY));
  const out: string[] = [];
  const line = (text: string) => out.push(safeText(text));
  line(`result token${kid ? `, kid ${kid}` : ''}`);
  line(`verified at ${run.at.toISOString()} against ${source}`);
  if (keyPublished === false)
    out.push(p.yellow('key: no longer published (retired over ATTEST_RESULT_TOKEN_TTL + 1 h ago)'));
  out.push('');
  const mark = { pass: p.green('pass'), fail: p.red(p.bold('FAIL')), skip: p.dim('skip') } as const;
  for (const c of checks) line(`  [${mark[c.status]}] ${c.id}: ${c.detail}`);
  out.push('');
  if (verdict.claims) {
    out.push('claims:');
    for (const [name, value] of Object.entries(verdict.claims))
      line(`  ${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
    if (expiresAt) line(`  (expires ${expiresAt})`);
    out.push('');
  }
  const failed = checks.find((c) => c.status === 'fail');
  out.push(
    valid
      ? p.green(p.bold('VALID'))
      : `${p.red(p.bold('REJECTED'))}${safeText(`: ${failed?.id ?? '?'}: ${failed?.detail ?? ''}`)}`,
  );
  process.stdout.write(`${out.join('\n')}\n`);
  return valid;
}

function nonceCheck(
  verdict: ResultTokenVerdict,
  nonce: Uint8Array | null,
): { id: 'nonce'; status: 'pass' | 'fail' | 'skip'; detail: string } {
  if (nonce === null) return { id: 'nonce', status: 'skip', detail: 'no --nonce given' };
  if (!verdict.claims || typeof verdict.claims.nonce !== 'string')
    return { id: 'nonce', status: 'skip', detail: 'no nonce claim to compare' };
  const digest = createHash('sha256').update(nonce).digest('base64url');
  return digest === verdict.claims.nonce
    ? { id: 'nonce', status: 'pass', detail: 'the nonce claim is SHA-256 of the nonce given' }
    : { id: 'nonce', status: 'fail', detail: 'the token was made for another nonce' };
}

function readJwks(path: string): JWK[] {
  const text = readCliFileSync(path, {
    maxBytes: JWKS_FILE_MAX_BYTES,
    what: '--jwks',
    tooLarge: () => `${path} is over ${JWKS_FILE_MAX_BYTES / 1024} KiB: is it a JWKS?`,
  }).toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw usageError(
      `${path} is not JSON: give the key set /.well-known/jwks.json serves ({"keys": [...]})`,
    );
  }
  const keys = (json as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== 'object' || k === null))
    throw usageError(`${path} has no "keys" array: give the key set /.well-known/jwks.json serves`);
  return keys as JWK[];
}
