import { createLocalJWKSet, decodeProtectedHeader, type JWTVerifyGetKey } from 'jose';
import {
  checkOwnResultToken,
  mayConsume,
  type ConsumeRejectReason,
  type ConsumingKey,
} from '../core/consumeResult.js';
import type { ResultTokenClaims } from '../core/resultTokenClaims.js';
import type { KeyMode } from '../core/ports.js';
import type { ConsumedResultRepository } from '../db/consumedResults.js';
import type { ResultTokenSigner } from './resultTokenSigner.js';

export interface ResultConsumerOptions {
  /** the live signer: its published keys verify live tokens */
  live: Pick<ResultTokenSigner, 'issuer' | 'jwks'>;
  /** the test signer (ATTEST_TEST_KEYS on): its keys verify the tokens of test-mode keys */
  test?: Pick<ResultTokenSigner, 'issuer' | 'jwks'> | undefined;
  consumed: Pick<ConsumedResultRepository, 'record'>;
  now?: () => Date;
}

export type ConsumeOutcome =
  | { valid: false; reason: ConsumeRejectReason; detail: string }
  | { valid: true; alreadyConsumed: boolean; claims: ResultTokenClaims };

/**
 * Consumes the deployment's own result tokens: verified with the published keys of the consuming
 * key's mode (the same set /.well-known serves, so every key that signed an unexpired token is in
 * it), authorized by mayConsume, then its jti recorded once in the database shared by every
 * instance.
 */
export function createResultConsumer(options: ResultConsumerOptions) {
  const now = options.now ?? (() => new Date());
  // the imported key set of each mode, kept while the published kids stay the same: importing
  // the keys on every consume would cost a share of its CPU
  const keySets = new Map<KeyMode, { kids: string; getKey: JWTVerifyGetKey }>();
  const signerOf = (mode: KeyMode) => (mode === 'test' ? options.test : options.live);

  async function keysOf(mode: KeyMode): Promise<{ kids: string; getKey: JWTVerifyGetKey }> {
    const signer = signerOf(mode)!;
    const { keys } = await signer.jwks();
    const kids = keys.map((k) => k.kid).join(' ');
    let set = keySets.get(mode);
    if (!set || set.kids !== kids) {
      set = { kids, getKey: createLocalJWKSet({ keys: [...keys] }) };
      keySets.set(mode, set);
    }
    return set;
  }

  /** A key of the other mode signed it: name that in the log rather than "unknown key". */
  async function signedByOtherMode(token: string, mode: KeyMode): Promise<boolean> {
    const other: KeyMode = mode === 'test' ? 'live' : 'test';
    if (!signerOf(other)) return false;
    let kid: unknown;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      return false;
    }
    return typeof kid === 'string' && (await keysOf(other)).kids.split(' ').includes(kid);
  }

  return {
    async consume(token: string, key: ConsumingKey): Promise<ConsumeOutcome> {
      const signer = signerOf(key.mode);
      if (!signer)
        return {
          valid: false,
          reason: 'result_token_key_unknown',
          detail: `no result token keys of mode ${key.mode}`,
        };
      const checked = await checkOwnResultToken(token, {
        keys: (await keysOf(key.mode)).getKey,
        issuer: signer.issuer,
        now: now(),
      });
      if (!checked.ok) {
        if (
          checked.reason === 'result_token_key_unknown' &&
          (await signedByOtherMode(token, key.mode))
        )
          return {
            valid: false,
            reason: 'result_token_wrong_mode',
            detail:
              key.mode === 'live'
                ? 'a test token consumed with a live key'
                : 'a live token consumed with a test key',
          };
        return { valid: false, reason: checked.reason, detail: checked.detail };
      }
      const allowed = mayConsume(key, checked.claims);
      if (!allowed.ok) return { valid: false, reason: allowed.reason, detail: allowed.detail };
      const first = await options.consumed.record(checked.claims.jti, checked.claims.exp, key.id);
      return { valid: true, alreadyConsumed: !first, claims: checked.claims };
    },
  };
}

export type ResultConsumer = ReturnType<typeof createResultConsumer>;
