/**
 * The scheduled refresh of Google's Android attestation status list (`serve`): fetch it, parse it,
 * store it for every instance (a list older than the stored one is never put back), and warn in
 * the log while the list in use is more than 7 days old. Failures are logged, never fatal: the
 * stored list (or the shipped snapshot) stays in use.
 *
 * The answer is trusted no further than it must be: no redirects are followed (the URL must be
 * the list itself, as Google's is: a redirect elsewhere could hand over a list that revokes
 * nothing), the body is read as it streams and cut at 16 MiB, and a list that is empty or has
 * fewer than half the entries of the stored one is refused (Google's list only grows, bar a few
 * lifted suspensions; an empty or halved one is a broken mirror or a tampered answer, and taking
 * it would silently un-revoke keys).
 */
import { parseRevocationDocument } from '../core/androidKey/revocationList.js';
import type { RevocationRepository } from '../db/androidRevocations.js';
import { BodyTooLargeError, readBoundedText } from '../readBoundedBody.js';

export const REVOCATION_STALE_MS = 7 * 24 * 3_600_000;
const MAX_BYTES = 16 * 1024 * 1024;

export interface RevocationRefreshDeps {
  url: string;
  intervalMs: number;
  repo: RevocationRepository;
  fetch?: typeof fetch;
  timeoutMs?: number;
  now?: () => Date;
  onUpdate?: (result: { entries: number; stored: boolean }) => void;
  onError?: (err: Error) => void;
  /** the list in use is older than 7 days (called after every attempt while it is) */
  onStale?: (info: { takenAt: Date; source: string; ageDays: number }) => void;
}

/**
 * Fetches the list once and stores it.
 * @returns the number of entries and whether it replaced the stored list
 */
export async function refreshRevocations(
  deps: Omit<RevocationRefreshDeps, 'intervalMs'>,
  signal?: AbortSignal,
): Promise<{ entries: number; stored: boolean }> {
  const get = deps.fetch ?? fetch;
  const now = deps.now ?? (() => new Date());
  const timeout = AbortSignal.timeout(deps.timeoutMs ?? 30_000);
  let res: Response;
  try {
    res = await get(deps.url, {
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      headers: { Accept: 'application/json' },
      redirect: 'error',
    });
  } catch (err) {
    throw new Error(`${deps.url} could not be fetched (${causeOf(err)})`, { cause: err });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new Error(`${deps.url} answered HTTP ${res.status}`);
  }
  let text: string;
  try {
    text = await readBoundedText(res, MAX_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      throw new Error(`${deps.url} sent more than ${MAX_BYTES} bytes`);
    throw err;
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error(`${deps.url} did not send JSON`);
  }
  const { entries } = parseRevocationDocument(document);
  if (entries.size === 0) throw new Error(`${deps.url} sent an empty list: the stored one is kept`);
  const current = await deps.repo.info();
  if (current && entries.size < current.entryCount / 2)
    throw new Error(
      `${deps.url} sent ${entries.size} entries, fewer than half of the ${current.entryCount} stored: the stored list is kept`,
    );
  const stored = await deps.repo.replace(entries, deps.url, now());
  return { entries: entries.size, stored };
}

/** Warns through `onStale` when the stored list is older than 7 days. */
export async function checkRevocationAge(
  repo: RevocationRepository,
  now: Date,
  onStale: NonNullable<RevocationRefreshDeps['onStale']>,
): Promise<void> {
  const info = await repo.info();
  if (!info) return;
  const age = now.getTime() - info.takenAt.getTime();
  if (age > REVOCATION_STALE_MS)
    onStale({ takenAt: info.takenAt, source: info.source, ageDays: Math.floor(age / 86_400_000) });
}

/**
 * Refreshes at once and then every `intervalMs`; `stop` ends it (and waits for a run under way).
 */
export function startRevocationRefresh(deps: RevocationRefreshDeps): { stop(): Promise<void> } {
  const now = deps.now ?? (() => new Date());
  let running: Promise<void> | null = null;
  let stopped = false;
  const stopping = new AbortController();
  const run = () => {
    if (running || stopped) return;
    running = (async () => {
      try {
        // evaluated first: `onUpdate?.(await ...)` would skip the refresh without a listener
        const result = await refreshRevocations(deps, stopping.signal);
        deps.onUpdate?.(result);
        await deps.repo.recordRefresh(null).catch((err: Error) => deps.onError?.(err));
      } catch (err) {
        if (!stopped) {
          deps.onError?.(err as Error);
          // kept in the database, so `attest status` shows it and not only this server's log
          await deps.repo
            .recordRefresh((err as Error).message)
            .catch((e: Error) => deps.onError?.(e));
        }
      }
      if (stopped) return;
      try {
        if (deps.onStale) await checkRevocationAge(deps.repo, now(), deps.onStale);
      } catch (err) {
        deps.onError?.(err as Error);
      }
    })().finally(() => {
      running = null;
    });
  };
  run();
  const timer = setInterval(run, deps.intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}

/** What failed underneath fetch (its TypeError says only "fetch failed"). */
function causeOf(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return String(e?.cause?.message ?? e?.cause?.code ?? e?.message ?? err).slice(0, 200);
}

/** ATTEST_ANDROID_REVOCATION_URL=off: no refresh, but the age warning still runs on schedule. */
export function startAgeCheck(
  check: () => Promise<void>,
  intervalMs: number,
): { stop(): Promise<void> } {
  const run = () => void check().catch(() => {});
  run();
  const timer = setInterval(run, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
    },
  };
}
