import { createHmac, randomBytes } from 'node:crypto';
import { DUMMY_API_KEY_HASH, parseApiKey, verifyApiKeyHash } from '../core/apiKeys.js';
import { LruCache } from '../core/lruCache.js';
import type { KeyMode } from '../core/types.js';

export interface ApiKeyLookup {
  /** `mode` absent: live */
  find(id: string): Promise<{
    id: string;
    hash: string;
    expiresAt: Date | null;
    revokedAt: Date | null;
    mode?: KeyMode;
  } | null>;
  touch(id: string): Promise<void>;
}

export type AuthFailure =
  | 'missing'
  | 'malformed'
  | 'unknown'
  | 'revoked'
  | 'expired'
  | 'mismatch'
  | 'busy'
  | 'locked_id'
  | 'locked_address';

export type AuthResult =
  | { ok: true; keyId: string; mode: KeyMode }
  | { ok: false; status: 401 | 403 | 503; why: AuthFailure; keyId?: string };

/** What the request adds to the presented value. */
export interface AuthContext {
  /** the client's address (TCP peer), for the per-address failure limit */
  address?: string | undefined;
  /** bounds the database reads (not argon2, nor its queue) by the request's backend deadline */
  backend?: <T>(work: Promise<T>) => Promise<T>;
}

export interface AuthenticatorOptions {
  lookup: ApiKeyLookup;
  now?: () => number;
  /** how long a verified key is trusted before its row is read again (revocation delay) */
  revalidateMs?: number;
  /** argon2 verifications running at once; more wait in a bounded queue */
  maxConcurrentHashes?: number;
  maxQueuedHashes?: number;
  /** how long a failed key is answered 403 without hashing again */
  failureTtlMs?: number;
  maxEntries?: number;
  /** how often last_used_at is written per key */
  touchIntervalMs?: number;
  onTouchError?: (err: unknown) => void;
  /** failed verifications (in flight ones included) per key id, and per client address, within `failureWindowMs` before further ones are refused without argon2 */
  maxFailuresPerId?: number;
  maxFailuresPerAddress?: number;
  failureWindowMs?: number;
  /** while an id is locked, one verification per this interval is still let through, to addresses with no failures of their own */
  lockedProbeMs?: number;
}

interface Verified {
  id: string;
  mode: KeyMode;
  hash: string;
  expiresAt: number | null;
  checkedAt: number;
}

/** Failed verifications of one key id or client address in the current window. */
interface FailureWindow {
  start: number;
  count: number;
  /** when a locked id last let a verification through */
  probedAt: number;
}

/**
 * Checks `X-Api-Key` values. argon2 runs once per key per process: a verified key is cached under
 * an HMAC of the presented value (a process-local secret, so the cache holds no usable key) and
 * its row re-read every `revalidateMs`, so revocation and expiry still apply within that time.
 * Failed values are remembered, and argon2 work is bounded, so junk keys cannot exhaust the CPU.
 * Distinct wrong secrets for one id (or from one address) are limited: past the limit they are
 * refused without argon2. The cache is checked first, so a key already verified keeps working.
 */
export function createApiKeyAuthenticator(options: AuthenticatorOptions) {
  const now = options.now ?? Date.now;
  const revalidateMs = options.revalidateMs ?? 5000;
  const failureTtlMs = options.failureTtlMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 10_000;
  const touchIntervalMs = options.touchIntervalMs ?? 60_000;
  const cacheSecret = randomBytes(32);
  const verified = new LruCache<string, Verified>(maxEntries);
  // when a value failed, and why (the log of a repeated attempt must name the real cause)
  const failures = new LruCache<
    string,
    { at: number; why: 'unknown' | 'revoked' | 'expired' | 'mismatch' }
  >(maxEntries);
  const inflight = new Map<string, Promise<AuthResult>>();
  const touched = new LruCache<string, number>(maxEntries);
  const limiter = createLimiter(options.maxConcurrentHashes ?? 2, options.maxQueuedHashes ?? 64);
  const maxFailuresPerId = options.maxFailuresPerId ?? 10;
  const maxFailuresPerAddress = options.maxFailuresPerAddress ?? 30;
  const failureWindowMs = options.failureWindowMs ?? 60_000;
  const lockedProbeMs = options.lockedProbeMs ?? 1000;
  const idFailures = new LruCache<string, FailureWindow>(maxEntries);
  const addressFailures = new LruCache<string, FailureWindow>(maxEntries);

  const fingerprint = (presented: string) =>
    createHmac('sha256', cacheSecret).update(presented).digest('base64url');

  function windowOf(map: LruCache<string, FailureWindow>, key: string): FailureWindow {
    let w = map.get(key);
    if (!w || now() - w.start >= failureWindowMs)
      w = { start: now(), count: 0, probedAt: w?.probedAt ?? -Infinity };
    map.set(key, w);
    return w;
  }

  /**
   * Counts a verification against its id and address before it runs (so a burst cannot pass the
   * limit while its hashes are queued); what turns out not to be a failure gives it back.
   */
  function admit(
    id: string,
    address: string | undefined,
  ): { ok: true; release(): void } | { ok: false; why: 'locked_id' | 'locked_address' } {
    const byAddress = address === undefined ? undefined : windowOf(addressFailures, address);
    if (byAddress && byAddress.count >= maxFailuresPerAddress)
      return { ok: false, why: 'locked_address' };
    const byId = windowOf(idFailures, id);
    if (byId.count >= maxFailuresPerId) {
      // the owner of the key, from an address that has not failed, still gets in now and then
      const probe =
        (byAddress === undefined || byAddress.count === 0) &&
        now() - byId.probedAt >= lockedProbeMs;
      if (!probe) return { ok: false, why: 'locked_id' };
      byId.probedAt = now();
    }
    byId.count++;
    if (byId.count === maxFailuresPerId) byId.probedAt = now(); // the first probe comes lockedProbeMs after the lock
    if (byAddress) byAddress.count++;
    return {
      ok: true,
      release() {
        byId.count = Math.max(0, byId.count - 1);
        if (byAddress) byAddress.count = Math.max(0, byAddress.count - 1);
      },
    };
  }

  function touch(id: string) {
    const last = touched.get(id) ?? 0;
    if (now() - last < touchIntervalMs) return;
    touched.set(id, now());
    options.lookup.touch(id).catch((err) => options.onTouchError?.(err));
  }

  function liveness(row: {
    expiresAt: Date | null;
    revokedAt: Date | null;
  }): { ok: false; status: 403; why: 'revoked' | 'expired' } | null {
    if (row.revokedAt) return { ok: false, status: 403, why: 'revoked' };
    if (row.expiresAt && row.expiresAt.getTime() <= now())
      return { ok: false, status: 403, why: 'expired' };
    return null;
  }

  /**
   * Reads the row and runs argon2 whatever the row says: an unknown id is checked against a dummy
   * hash and a revoked or expired key against its own, so each costs what a wrong secret costs.
   */
  async function verifyFresh(
    presented: string,
    id: string,
    fp: string,
    backend: Budget,
  ): Promise<AuthResult> {
    const row = await backend(options.lookup.find(id));
    const dead = row ? liveness(row) : null;
    const matches = await limiter.run(() =>
      verifyApiKeyHash(row?.hash ?? DUMMY_API_KEY_HASH, presented),
    );
    if (matches === undefined) return { ok: false, status: 503, why: 'busy', keyId: id };
    if (!row) {
      failures.set(fp, { at: now(), why: 'unknown' });
      return { ok: false, status: 403, why: 'unknown' };
    }
    if (dead) {
      failures.set(fp, { at: now(), why: dead.why });
      return { ...dead, keyId: id };
    }
    if (!matches) {
      failures.set(fp, { at: now(), why: 'mismatch' });
      return { ok: false, status: 403, why: 'mismatch', keyId: id };
    }
    const mode = row.mode ?? 'live';
    verified.set(fp, {
      id,
      mode,
      hash: row.hash,
      expiresAt: row.expiresAt?.getTime() ?? null,
      checkedAt: now(),
    });
    return { ok: true, keyId: id, mode };
  }

  return {
    /** Authenticates one request's header value (undefined when the header is absent). */
    async authenticate(
      presented: string | undefined,
      context: AuthContext = {},
    ): Promise<AuthResult> {
      const backend: Budget = context.backend ?? ((work) => work);
      if (presented === undefined || presented.trim() === '')
        return { ok: false, status: 401, why: 'missing' };
      const parsed = parseApiKey(presented);
      if (!parsed) return { ok: false, status: 403, why: 'malformed' };
      const fp = fingerprint(presented);

      const hit = verified.get(fp);
      if (hit) {
        if (hit.expiresAt !== null && hit.expiresAt <= now()) {
          verified.delete(fp);
          return { ok: false, status: 403, why: 'expired', keyId: hit.id };
        }
        if (now() - hit.checkedAt < revalidateMs) {
          touch(hit.id);
          return { ok: true, keyId: hit.id, mode: hit.mode };
        }
        // revalidate the row (cheap, no argon2): revoked, expired, or replaced keys drop out
        const row = await backend(options.lookup.find(hit.id));
        const dead = row
          ? liveness(row)
          : { ok: false as const, status: 403 as const, why: 'unknown' as const };
        if (dead || !row || row.hash !== hit.hash) {
          verified.delete(fp);
          return {
            ...(dead ?? { ok: false, status: 403, why: 'unknown' }),
            keyId: hit.id,
          } as AuthResult;
        }
        hit.checkedAt = now();
        hit.expiresAt = row.expiresAt?.getTime() ?? null;
        hit.mode = row.mode ?? 'live';
        touch(hit.id);
        return { ok: true, keyId: hit.id, mode: hit.mode };
      }

      const failed = failures.get(fp);
      if (failed !== undefined && now() - failed.at < failureTtlMs)
        return { ok: false, status: 403, why: failed.why, keyId: parsed.id };

      // concurrent first requests with one key share one argon2 run
      let pending = inflight.get(fp);
      if (!pending) {
        const admitted = admit(parsed.id, context.address);
        if (!admitted.ok) return { ok: false, status: 403, why: admitted.why, keyId: parsed.id };
        pending = verifyFresh(presented, parsed.id, fp, backend)
          .then(
            (result) => {
              // busy is no verdict on the secret: it does not count either
              if (result.ok || result.why === 'busy') admitted.release();
              return result;
            },
            (err: unknown) => {
              admitted.release();
              throw err;
            },
          )
          .finally(() => inflight.delete(fp));
        inflight.set(fp, pending);
      }
      const result = await pending;
      if (result.ok) touch(result.keyId);
      return result;
    },

    /**
     * Every cached key is re-read on its next use (no argon2: its row only), as if `revalidateMs`
     * had passed: a change to the keys was announced.
     */
    revalidateAll() {
      for (const [, v] of verified) v.checkedAt = -Infinity;
    },

    /** Drops cached verifications of a key (the revoking process calls it at once). */
    invalidate(keyId: string) {
      for (const [fp, v] of verified) if (v.id === keyId) verified.delete(fp);
    },
  };
}

export type ApiKeyAuthenticator = ReturnType<typeof createApiKeyAuthenticator>;

type Budget = <T>(work: Promise<T>) => Promise<T>;

/** Runs at most `concurrency` tasks at once with at most `queue` waiting; `undefined` when full. */
function createLimiter(concurrency: number, queue: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return {
    async run<T>(task: () => Promise<T>): Promise<T | undefined> {
      if (running < concurrency) running++;
      else if (waiting.length >= queue) return undefined;
      else await new Promise<void>((resolve) => waiting.push(resolve)); // the finisher hands its slot over
      try {
        return await task();
      } finally {
        const next = waiting.shift();
        if (next) next();
        else running--;
      }
    },
  };
}
