import { randomUUID, webcrypto } from 'node:crypto';
import { CompactSign, type CompactJWSHeaderParameters } from 'jose';
import { deviceKeyConfirmation } from '../core/deviceKeyConfirmation.js';
import {
  newResultSigningKey,
  publicJwk,
  resultClaims,
  RESULT_TOKEN_ALG,
  RESULT_TOKEN_TYPE,
  type ResultJwk,
} from '../core/resultToken.js';
import { RETIRED_KEY_GRACE_SECONDS } from '../core/resultKeyTiming.js';
import { lowSJws } from '../core/ecdsaLowS.js';
import type { PlatformDetails } from '../core/kinds.js';
import type { Auditor } from '../db/audit.js';
import type { ResultKeyMode, ResultKeyRecord, ResultKeyRepository } from '../db/resultKeys.js';

const encoder = new TextEncoder();

/** What signing needs of the key store (src/db/resultKeys.ts). */
export type ResultKeySource = Pick<ResultKeyRepository, 'list' | 'open' | 'createFirst'>;

export interface ResultTokenSignerOptions {
  keys: ResultKeySource;
  /** ATTEST_ISSUER, or a function giving it (dev up knows its own URL only once it listens) */
  issuer: string | (() => string);
  /**
   * 'test': signs for test-mode API keys with the test keys only, and every token says
   * `test: true`; default 'live'
   */
  mode?: ResultKeyMode;
  /** ATTEST_RESULT_TOKEN_TTL */
  ttlSeconds: number;
  /** how long a read of the keys is used before the next (the propagation time, 5 s) */
  refreshMs: number;
  now?: () => number;
  /** records the first key the service makes (`result_keys.create`) */
  auditor?: Auditor;
}

/** One valid verify, as the token states it. */
export interface ResultTokenInput {
  apiKeyId: string;
  approach: 'session' | 'sessionless';
  /** the final nonce */
  nonce: Uint8Array;
  details: PlatformDetails;
  /** base64 DER SPKI of the attested device key (the verify's facts), bound as `cnf.jwk` */
  devicePublicKey?: string | undefined;
}

interface Snapshot {
  /** local clock of the read */
  readAt: number;
  keys: {
    record: ResultKeyRecord;
    jwk: ResultJwk;
    /** local clock: signs from then */
    signingAt: number;
    /** local clock: retired then (null: the newest key) */
    retiredAt: number | null;
    /** the protected header of the tokens it signs */
    header: CompactJWSHeaderParameters;
  }[];
}

/**
 * Signs result tokens and publishes their keys. Every instance reads the keys from the database
 * at most every `refreshMs` (an empty read is never kept), so a key added by a rotation is in
 * every instance's JWKS within `refreshMs` of its commit; a rotation makes it sign only later
 * than that (docs/result-tokens.md). Each private key is opened and imported once, when it first
 * signs: a verify pays for one ECDSA signature and nothing else.
 */
export function createResultTokenSigner(options: ResultTokenSignerOptions) {
  const now = options.now ?? Date.now;
  const mode = options.mode ?? 'live';
  const issuer =
    typeof options.issuer === 'string' ? () => options.issuer as string : options.issuer;
  const publishMs = (options.ttlSeconds + RETIRED_KEY_GRACE_SECONDS) * 1000;
  let snapshot: Snapshot | undefined;
  let reading: Promise<Snapshot> | undefined;
  const imported = new Map<string, Promise<webcrypto.CryptoKey>>();
  const jwks = new Map<string, ResultJwk>();

  async function read(): Promise<Snapshot> {
    // a retired key matters for as long as it is published; a little more covers clock drift
    const records = await options.keys.list(
      options.ttlSeconds + RETIRED_KEY_GRACE_SECONDS + 60,
      mode,
    );
    const readAt = now();
    const keys = records.map((record) => {
      let jwk = jwks.get(record.id);
      if (!jwk) jwks.set(record.id, (jwk = publicJwk(record.id, record.publicKey)));
      return {
        record,
        jwk,
        signingAt: readAt + record.signingInMs,
        retiredAt: record.retiredMsAgo === null ? null : readAt - record.retiredMsAgo,
        header: { alg: RESULT_TOKEN_ALG, typ: RESULT_TOKEN_TYPE, kid: record.id },
      };
    });
    return { readAt, keys };
  }

  async function current(): Promise<Snapshot> {
    if (snapshot && now() - snapshot.readAt < options.refreshMs) return snapshot;
    reading ??= read().finally(() => (reading = undefined));
    const fresh = await reading;
    // no key yet: read again next time, so the first key is seen the moment it exists
    snapshot = fresh.keys.length > 0 ? fresh : undefined;
    return fresh;
  }

  function signingKey(s: Snapshot, at: number) {
    let chosen: Snapshot['keys'][number] | undefined;
    for (const k of s.keys) if (k.signingAt <= at) chosen = k;
    return chosen;
  }

  function importKey(record: ResultKeyRecord): Promise<webcrypto.CryptoKey> {
    let key = imported.get(record.id);
    if (!key) {
      key = (async () => {
        const pkcs8 = options.keys.open(record);
        try {
          return await webcrypto.subtle.importKey(
            'pkcs8',
            pkcs8,
            { name: 'ECDSA', namedCurve: 'P-256' },
            false,
            ['sign'],
          );
        } finally {
          pkcs8.fill(0);
        }
      })();
      key.catch(() => imported.delete(record.id));
      imported.set(record.id, key);
    }
    return key;
  }

  return {
    get issuer(): string {
      return issuer();
    },
    mode,

    /** The signed result token of one valid verify. */
    async sign(input: ResultTokenInput): Promise<string> {
      let s = await current();
      let key = signingKey(s, now());
      if (!key) {
        // no key at all yet: the first one is made here (once, whichever instance gets there first)
        await options.keys.createFirst(await newResultSigningKey(), options.auditor, mode);
        snapshot = undefined;
        s = await current();
        key = signingKey(s, now());
        if (!key) throw new Error('no result signing key can sign yet');
      }
      const claims = resultClaims({
        issuer: issuer(),
        apiKeyId: input.apiKeyId,
        approach: input.approach,
        nonce: input.nonce,
        details: input.details,
        now: Math.floor(now() / 1000),
        ttlSeconds: options.ttlSeconds,
        jti: randomUUID(),
        test: mode === 'test',
        ...(input.devicePublicKey
          ? { confirmation: await deviceKeyConfirmation(input.devicePublicKey) }
          : {}),
      });
      if (!Number.isSafeInteger(claims.iat) || !Number.isSafeInteger(claims.exp))
        throw new TypeError('"iat" and "exp" must be whole numbers of seconds');
      // CompactSign over the claims' JSON: the same token SignJWT makes, without the deep copy
      // of the claims it takes first (a fifth of the signing cost). WebCrypto gives either of the
      // signature's two forms: the token carries the low-S one, its only accepted form
      return lowSJws(
        await new CompactSign(encoder.encode(JSON.stringify(claims)))
          .setProtectedHeader(key.header)
          .sign(await importKey(key.record)),
      );
    },

    /** The published keys: every key not retired, and those retired less than TTL + 1 h ago. */
    async jwks(): Promise<{ keys: ResultJwk[] }> {
      const s = await current();
      const at = now();
      return {
        keys: s.keys
          .filter((k) => k.retiredAt === null || at - k.retiredAt < publishMs)
          .map((k) => k.jwk),
      };
    },

    /** Makes the first key when there is none (at start, so the JWKS has a key before any token). */
    async ensureKey(): Promise<void> {
      if ((await current()).keys.length > 0) return;
      await options.keys.createFirst(await newResultSigningKey(), options.auditor, mode);
      snapshot = undefined;
    },
  };
}

export type ResultTokenSigner = ReturnType<typeof createResultTokenSigner>;
