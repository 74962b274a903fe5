import { hash, randomBytes } from 'node:crypto';
import {
  apiKeyCheck,
  isApiKeyHash,
  matchesApiKeyCheck,
  parseApiKey,
  verifyApiKeyHash,
} from '../core/apiKeys.js';
import { LruCache } from '../core/lruCache.js';
import type { KeyMode } from '../core/ports.js';
import { addressPrefix } from './addressPrefix.js';
import type { ApiKeyLookup, AuthContext, AuthResult } from './apiKeyAuthTypes.js';
import { createFairLimiter } from './fairLimiter.js';

export interface AuthenticatorOptions {
  lookup: ApiKeyLookup;
  now?: () => number;
  /** how long a verified key (or a key's row) is trusted before it is read again (revocation delay) */
  revalidateMs?: number;
  /** argon2 verifications running at once; more wait in bounded queues */
  maxConcurrentHashes?: number;
  /** waiting verifications from address prefixes that are not a key's known origins, in all */
  maxQueuedHashes?: number;
  /** ... and per address prefix */
  maxQueuedHashesPerPrefix?: number;
  /** how long a failed key is answered 403 without hashing again */
  failureTtlMs?: number;
  /** entries of each per-value, per-id and per-prefix cache (default 10 000; a few MB in all) */
  maxEntries?: number;
  /**
   * origins a cached row remembers (default 64, what the database returns): those it read plus
   * those this process saw since, the most recent kept
   */
  maxOriginsPerKey?: number;
  /** how long concurrent reads of one key id may share one load before a new read starts afresh */
  sharedLoadMs?: number;
  /** how often last_used_at (and a key's origin) is written per key */
  touchIntervalMs?: number;
  onTouchError?: (err: unknown) => void;
  /** a key's stored hash or pre-check is not as attest makes it (told once per key per failure window) */
  onStoredKeyProblem?: (keyId: string, problem: string) => void;
  /**
   * failed verifications (in flight ones included) within `failureWindowMs` before further ones
   * are refused without argon2: per key id from prefixes that are not its origins, per address
   * prefix, and per (key id, origin) pair
   */
  maxFailuresPerId?: number;
  maxFailuresPerAddress?: number;
  maxFailuresPerOrigin?: number;
  failureWindowMs?: number;
  /** while an id is locked, one verification per this interval is still let through, to prefixes with no failures of their own */
  lockedProbeMs?: number;
}

interface Verified {
  id: string;
  mode: KeyMode;
  resultTokens: boolean;
  rejectionDetails: boolean;
  apps: readonly string[] | null;
  hash: string;
  expiresAt: number | null;
  checkedAt: number;
}

type KeyRow = NonNullable<Awaited<ReturnType<ApiKeyLookup['find']>>>;

/** Adds `value` as the newest member of `set`, dropping the oldest beyond `max`. */
function addRecent(set: Set<string>, value: string, max: number): void {
  set.delete(value);
  set.add(value);
  if (set.size > max) set.delete(set.values().next().value!);
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
 * A key id with no live row is refused from its row alone, without argon2. Wrong secrets are
 * limited per key id and per client address prefix; but a prefix that authenticated the key
 * recently (its origins, kept in the database so every instance knows them) has a budget and a
 * hash queue of its own, so an attacker who knows the key id, however many addresses it owns,
 * can neither lock the key's owner out nor make it wait behind its own hashes.
 */
export function createApiKeyAuthenticator(options: AuthenticatorOptions) {
  const now = options.now ?? Date.now;
  const revalidateMs = options.revalidateMs ?? 5000;
  const failureTtlMs = options.failureTtlMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 10_000;
  const maxOrigins = options.maxOriginsPerKey ?? 64;
  const touchIntervalMs = options.touchIntervalMs ?? 60_000;
  const sharedLoadMs = options.sharedLoadMs ?? 1000;
  const cacheSecret = randomBytes(32).toString('base64');
  const verified = new LruCache<string, Verified>(maxEntries);
  // when a value failed, and why (the log of a repeated attempt must name the real cause)
  const failures = new LruCache<
    string,
    { at: number; why: 'unknown' | 'revoked' | 'expired' | 'mismatch' }
  >(maxEntries);
  const inflight = new Map<string, Promise<AuthResult>>();
  const touched = new LruCache<string, number>(maxEntries);
  const originTouched = new LruCache<string, number>(maxEntries);
  // rows of live ids, so a flood for one id costs one read per revalidateMs, not one per request
  const rows = new LruCache<string, { row: KeyRow; at: number; origins: Set<string> }>(maxEntries);
  const rowLoads = new Map<string, Promise<KeyRow | null>>();
  const hashes = createFairLimiter(
    options.maxConcurrentHashes ?? 2,
    options.maxQueuedHashes ?? 64,
    options.maxQueuedHashesPerPrefix ?? 4,
  );
  const maxFailuresPerId = options.maxFailuresPerId ?? 10;
  const maxFailuresPerAddress = options.maxFailuresPerAddress ?? 30;
  const maxFailuresPerOrigin = options.maxFailuresPerOrigin ?? 10;
  const failureWindowMs = options.failureWindowMs ?? 60_000;
  const lockedProbeMs = options.lockedProbeMs ?? 1000;
  const idFailures = new LruCache<string, FailureWindow>(maxEntries);
  const addressFailures = new LruCache<string, FailureWindow>(maxEntries);
  const originFailures = new LruCache<string, FailureWindow>(maxEntries);
  const problemsTold = new LruCache<string, number>(1000);

  function storedKeyProblem(id: string, problem: string): void {
    const key = `${id} ${problem}`;
    if (now() - (problemsTold.get(key) ?? -Infinity) < failureWindowMs) return;
    problemsTold.set(key, now());
    options.onStoredKeyProblem?.(id, problem);
  }

  // a per-process secret prefix keeps presented keys out of the maps; the one-shot hash costs a
  // fifth of an HMAC object, and every request pays it
  const fingerprint = (presented: string) => hash('sha256', cacheSecret + presented, 'base64url');

  function windowOf(map: LruCache<string, FailureWindow>, key: string): FailureWindow {
    let w = map.get(key);
    if (!w || now() - w.start >= failureWindowMs)
      w = { start: now(), count: 0, probedAt: w?.probedAt ?? -Infinity };
    map.set(key, w);
    return w;
  }

  /**
   * Counts a verification against its budget before it runs (so a burst cannot pass the limit
   * while its hashes are queued); what turns out not to be a failure gives it back. A known
   * origin of the key spends its own budget only; any other prefix spends its own and the id's.
   */
  function admit(
    id: string,
    prefix: string | undefined,
    origin: boolean,
  ):
    | { ok: true; release(): void }
    | { ok: false; why: 'locked_id' | 'locked_address' | 'locked_origin' } {
    const counted: FailureWindow[] = [];
    if (origin && prefix !== undefined) {
      const byOrigin = windowOf(originFailures, `${id} ${prefix}`);
      if (byOrigin.count >= maxFailuresPerOrigin) return { ok: false, why: 'locked_origin' };
      counted.push(byOrigin);
    } else {
      const byAddress = prefix === undefined ? undefined : windowOf(addressFailures, prefix);
      if (byAddress && byAddress.count >= maxFailuresPerAddress)
        return { ok: false, why: 'locked_address' };
      const byId = windowOf(idFailures, id);
      if (byId.count >= maxFailuresPerId) {
        // a new address of the key's owner still gets in now and then
        const probe =
          (byAddress === undefined || byAddress.count === 0) &&
          now() - byId.probedAt >= lockedProbeMs;
        if (!probe) return { ok: false, why: 'locked_id' };
        byId.probedAt = now();
      }
      counted.push(byId);
      if (byId.count + 1 === maxFailuresPerId) byId.probedAt = now(); // the first probe comes lockedProbeMs after the lock
      if (byAddress) counted.push(byAddress);
    }
    for (const w of counted) w.count++;
    return {
      ok: true,
      release() {
        for (const w of counted) w.count = Math.max(0, w.count - 1);
      },
    };
  }

  function touch(id: string, prefix: string | undefined) {
    const last = touched.get(id) ?? 0;
    if (now() - last >= touchIntervalMs) {
      touched.set(id, now());
      options.lookup.touch(id).catch((err) => options.onTouchError?.(err));
    }
    if (prefix === undefined || !options.lookup.rememberOrigin) return;
    const key = `${id} ${prefix}`;
    const lastOrigin = originTouched.get(key) ?? -Infinity;
    if (now() - lastOrigin < touchIntervalMs) return;
    originTouched.set(key, now());
    const cachedRow = rows.get(id);
    if (cachedRow) addRecent(cachedRow.origins, prefix, maxOrigins);
    options.lookup.rememberOrigin(id, prefix).catch((err) => options.onTouchError?.(err));
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

  /** The id's row: live rows are kept `revalidateMs`; concurrent reads of one id share one. */
  async function rowOf(
    id: string,
    backend: Budget,
  ): Promise<{ row: KeyRow; origins: Set<string> } | null> {
    const cached = rows.get(id);
    if (cached && now() - cached.at < revalidateMs) return cached;
    let load = rowLoads.get(id);
    if (!load) {
      const mine: Promise<KeyRow | null> = options.lookup.find(id).finally(() => forget());
      // a load that has not settled by then (a hung connection) is shared no longer: the next
      // request starts a fresh one instead of waiting on it for good (its waiters keep their budget)
      const limit = setTimeout(() => forget(), sharedLoadMs);
      limit.unref();
      const forget = () => {
        clearTimeout(limit);
        if (rowLoads.get(id) === mine) rowLoads.delete(id);
      };
      load = mine;
      rowLoads.set(id, load);
    }
    const row = await backend(load);
    if (!row) {
      rows.delete(id);
      return null;
    }
    // the row lists its origins most recent first; the set keeps the most recent last
    const entry = { row, at: now(), origins: new Set([...(row.origins ?? [])].reverse()) };
    // what this process learnt since it last read the row stays known
    for (const o of cached?.origins ?? []) addRecent(entry.origins, o, maxOrigins);
    rows.set(id, entry);
    return entry;
  }

  /** argon2 for a live row's key, in the queue of the request's class and prefix. */
  async function verifyFresh(
    presented: string,
    row: KeyRow,
    fp: string,
    prefix: string | undefined,
    origin: boolean,
  ): Promise<AuthResult> {
    const id = row.id;
    let matches: boolean | undefined;
    try {
      matches = await hashes.run(() => verifyApiKeyHash(row.hash, presented), {
        lane: prefix ?? '',
        priority: origin,
      });
    } catch (err) {
      // a stored hash argon2 cannot read is the key's fault, not the request's: refused, told
      storedKeyProblem(id, `argon2 cannot check the stored hash (${(err as Error).message})`);
      return { ok: false, status: 403, why: 'bad_hash', keyId: id };
    }
    if (matches === undefined) return { ok: false, status: 503, why: 'busy', keyId: id };
    if (!matches) {
      failures.set(fp, { at: now(), why: 'mismatch' });
      return { ok: false, status: 403, why: 'mismatch', keyId: id };
    }
    const mode = row.mode ?? 'live';
    const resultTokens = row.resultTokens === true;
    const rejectionDetails = row.rejectionDetails === true;
    const apps = row.apps ?? null;
    verified.set(fp, {
      id,
      mode,
      resultTokens,
      rejectionDetails,
      apps,
      hash: row.hash,
      expiresAt: row.expiresAt?.getTime() ?? null,
      checkedAt: now(),
    });
    if (!row.precheck || matchesApiKeyCheck(row.precheck, presented) !== true)
      rememberPrecheck(row, presented);
    return granted({ id, mode, resultTokens, rejectionDetails, apps });
  }

  /**
   * A key made before pre-checks (or with a damaged one) gets its pre-check from its next
   * verification by argon2, written to the database; every instance (this one too) uses it from
   * its next read of the row, within `revalidateMs`. A failed write is retried by the next
   * verification.
   */
  function rememberPrecheck(row: KeyRow, presented: string): void {
    const precheck = apiKeyCheck(presented);
    options.lookup
      .setPrecheck?.(row.id, row.hash, precheck)
      .catch((err) => options.onTouchError?.(err));
  }

  return {
    /** Authenticates one request's header value (undefined when the header is absent). */
    async authenticate(
      presented: string | undefined,
      context: AuthContext = {},
    ): Promise<AuthResult> {
      const backend: Budget =
        context.backend ?? ((work) => (typeof work === 'function' ? work() : work));
      if (presented === undefined || presented.trim() === '')
        return { ok: false, status: 401, why: 'missing' };
      const parsed = parseApiKey(presented);
      if (!parsed) return { ok: false, status: 403, why: 'malformed' };
      const fp = fingerprint(presented);
      const prefix = addressPrefix(context.address);

      const hit = verified.get(fp);
      if (hit) {
        if (hit.expiresAt !== null && hit.expiresAt <= now()) {
          verified.delete(fp);
          return { ok: false, status: 403, why: 'expired', keyId: hit.id };
        }
        if (now() - hit.checkedAt < revalidateMs) {
          touch(hit.id, prefix);
          return granted(hit);
        }
        // revalidate the row (cheap, no argon2); nothing is queued while the database is down
        context.known?.(hit.id, hit.mode);
        const row = await backend(() => options.lookup.find(hit.id));
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
        hit.resultTokens = row.resultTokens === true;
        hit.rejectionDetails = row.rejectionDetails === true;
        // a scope change applies like every other change of the row: at this re-read
        hit.apps = row.apps ?? null;
        touch(hit.id, prefix);
        return granted(hit);
      }

      const failed = failures.get(fp);
      if (failed !== undefined && now() - failed.at < failureTtlMs)
        return { ok: false, status: 403, why: failed.why, keyId: parsed.id };

      // concurrent first requests with one key share one argon2 run
      let pending = inflight.get(fp);
      if (!pending) {
        const entry = await rowOf(parsed.id, backend);
        // no live row: refused from the row alone (ids are 16 random characters, not a secret to
        // guess, so a quicker answer tells nothing worth hiding; argon2 is kept for real keys)
        if (!entry) {
          failures.set(fp, { at: now(), why: 'unknown' });
          return { ok: false, status: 403, why: 'unknown' };
        }
        const dead = liveness(entry.row);
        if (dead) {
          failures.set(fp, { at: now(), why: dead.why });
          return { ...dead, keyId: parsed.id };
        }
        const row = entry.row;
        // a stored hash not as attest makes it never reaches argon2 (its cost is bounded by the rule)
        if (!isApiKeyHash(row.hash)) {
          storedKeyProblem(row.id, 'the stored hash is not an argon2id hash as attest makes it');
          return { ok: false, status: 403, why: 'bad_hash', keyId: parsed.id };
        }
        // the pre-check: a wrong secret costs one HMAC and spends no budget, so however many
        // wrong secrets arrive, from however many addresses, the right one is never refused for them
        const pre = row.precheck ? matchesApiKeyCheck(row.precheck, presented) : undefined;
        if (pre === null) storedKeyProblem(row.id, 'the stored pre-check is malformed');
        if (pre === false) return { ok: false, status: 403, why: 'mismatch', keyId: parsed.id };
        const origin = prefix !== undefined && entry.origins.has(prefix);
        pending = inflight.get(fp); // another request with this value may have started meanwhile
        if (!pending) {
          // past the pre-check the secret is right: no budget to pass, argon2 in the first queue
          const admitted =
            pre === true ? { ok: true as const, release() {} } : admit(parsed.id, prefix, origin);
          if (!admitted.ok) return { ok: false, status: 403, why: admitted.why, keyId: parsed.id };
          pending = verifyFresh(presented, row, fp, prefix, origin || pre === true)
            .then(
              (result) => {
                // busy and a bad stored hash are no verdict on the secret: they do not count either
                if (result.ok || result.why === 'busy' || result.why === 'bad_hash')
                  admitted.release();
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
      }
      const result = await pending;
      if (result.ok) touch(result.keyId, prefix);
      return result;
    },

    /** Drops cached verifications of a key (the revoking process calls it at once). */
    invalidate(keyId: string) {
      for (const [fp, v] of verified) if (v.id === keyId) verified.delete(fp);
      rows.delete(keyId);
    },

    /**
     * Every cached key's row is re-read on its next use (no argon2 again), and remembered failures
     * are forgotten: a change made through this process, or announced by another instance,
     * applies at once.
     */
    revalidateAll() {
      for (const [, v] of verified) v.checkedAt = -Infinity;
      rows.clear();
      failures.clear();
    },
  };
}

export type ApiKeyAuthenticator = ReturnType<typeof createApiKeyAuthenticator>;

type Budget = <T>(work: Promise<T> | (() => Promise<T>)) => Promise<T>;

/** A verified key's result: each option only when on, `apps` only for a scoped key (a plain key's result is what it always was). */
const granted = (
  v: Pick<Verified, 'id' | 'mode' | 'resultTokens' | 'rejectionDetails' | 'apps'>,
): AuthResult => ({
  ok: true,
  keyId: v.id,
  mode: v.mode,
  ...(v.resultTokens ? { resultTokens: true } : {}),
  ...(v.rejectionDetails ? { rejectionDetails: true } : {}),
  ...(v.apps ? { apps: v.apps } : {}),
});
