/**
 * Refreshes stored App Attest receipts at Apple's data endpoint, so each key's risk metric stays
 * current ("Assessing fraud risk"). Timing: a key is due no sooner than its receipt's not-before
 * time and about once a day after a refresh; only keys used within the last 30 days; a bounded
 * batch per run, claimed atomically (several instances on one PostgreSQL never send the same
 * receipt twice); exponential back-off on 429, 5xx and network failures. A 304 keeps the receipt,
 * a 404 marks it as no longer refreshable, a 401/403 says once which team's key Apple refused.
 * A refreshed receipt is kept only when it passes the same checks as at registration (type RECEIPT).
 */
import type { ReceiptClient, ReceiptRefreshAnswer } from '../upstream/appleReceiptClient.js';
import { readReceiptFacts, type ReceiptVerifier } from '../core/apple/verifyReceipt.js';
import type { AppleCredential } from '../db/appleCredentials.js';
import type { DueReceipt, ReceiptRefreshQueue } from '../db/receiptRefreshQueue.js';

const DAY_MS = 86_400_000;
const BACKOFF_BASE_MS = 60_000;

/** What one attempt came to (the `outcome` label of attest_apple_receipt_refresh_total). */
export type RefreshOutcome = ReceiptRefreshAnswer['outcome'] | 'invalid' | 'skipped';

export interface ReceiptRefresherDeps {
  queue: ReceiptRefreshQueue;
  credentials: {
    get(teamId: string): Promise<AppleCredential | null>;
    markRejected(teamId: string, keyId: string): Promise<boolean>;
    markAccepted(teamId: string): Promise<void>;
  };
  client: ReceiptClient;
  receipts: ReceiptVerifier;
  now?: () => Date;
  /** receipts claimed per run (default 100) */
  batchSize?: number;
  /** how long a claimed key is held from other instances (default 10 minutes) */
  leaseMs?: number;
  /** each attempt, for metrics */
  onAttempt?(outcome: RefreshOutcome, riskMetric: number | null): void;
  /** Apple refused a team's DeviceCheck key: said once until it works again */
  onCredentialRefused?(teamId: string, keyId: string, status: number): void;
  /** a refreshed receipt failed its checks (kept the old one) */
  onInvalid?(keyId: Uint8Array, problem: string): void;
}

/** The counts of one run. */
export type RefreshRun = Partial<Record<RefreshOutcome, number>> & { claimed: number };

/**
 * The refresher's single run, for `serve`'s schedule and for tests.
 * @param deps the queue, the team credentials, Apple's endpoint, the receipt checks and the clock
 */
export function createReceiptRefresher(deps: ReceiptRefresherDeps) {
  const now = deps.now ?? (() => new Date());
  const batchSize = deps.batchSize ?? 100;
  const leaseMs = deps.leaseMs ?? 10 * 60_000;

  async function runOnce(): Promise<RefreshRun> {
    const at = now();
    const due = await deps.queue.claim({ now: at, limit: batchSize, leaseMs, horizonDays: 30 });
    const run: RefreshRun = { claimed: due.length };
    const count = (o: RefreshOutcome, risk: number | null = null) => {
      run[o] = (run[o] ?? 0) + 1;
      deps.onAttempt?.(o, risk);
    };
    const teams = new Map<string, AppleCredential | null>();
    const refusedTeams = new Set<string>();
    let pausedUntil: Date | null = null;

    for (const key of due) {
      const teamId = key.appId.split('.')[0]!;
      if (pausedUntil || refusedTeams.has(teamId)) {
        // Apple asked to slow down, or refused this team's key: the rest waits, without a failure
        await deps.queue.reschedule(key.keyId, {
          next: pausedUntil ?? new Date(at.getTime() + DAY_MS),
          outcome: pausedUntil ? 'rate_limited' : 'unauthorized',
          failures: 'keep',
        });
        count('skipped');
        continue;
      }
      if (!teams.has(teamId)) teams.set(teamId, await deps.credentials.get(teamId));
      const credential = teams.get(teamId)!;
      if (!credential) {
        await deps.queue.reschedule(key.keyId, {
          next: new Date(at.getTime() + DAY_MS),
          outcome: 'no_credential',
          failures: 'keep',
        });
        count('skipped');
        continue;
      }
      const answer = await deps.client.refresh({
        environment: key.environment,
        receipt: key.receipt,
        credential,
        now: at,
      });
      const outcome = await apply(key, answer, at, teamId, credential);
      if (answer.outcome === 'unauthorized') refusedTeams.add(teamId);
      if (answer.outcome === 'rate_limited')
        pausedUntil = new Date(
          at.getTime() + backoffMs(key.failures + 1, answer.retryAfterSeconds),
        );
      count(outcome.outcome, outcome.riskMetric);
    }
    return run;
  }

  async function apply(
    key: DueReceipt,
    answer: ReceiptRefreshAnswer,
    at: Date,
    teamId: string,
    credential: AppleCredential,
  ): Promise<{ outcome: RefreshOutcome; riskMetric: number | null }> {
    const later = (ms: number) => new Date(at.getTime() + ms);
    switch (answer.outcome) {
      case 'refreshed': {
        const previous = readReceiptFacts(key.receipt);
        const verdict = await deps.receipts.verify(
          answer.receipt,
          {
            type: 'RECEIPT',
            appId: key.appId,
            ...(previous ? { attestedCertificate: previous.attestedCertificate } : {}),
          },
          at,
        );
        await deps.credentials.markAccepted(teamId);
        if (!verdict.valid) {
          deps.onInvalid?.(key.keyId, verdict.problem);
          await deps.queue.reschedule(key.keyId, {
            next: later(DAY_MS),
            outcome: 'invalid',
            failures: 'increment',
          });
          return { outcome: 'invalid', riskMetric: null };
        }
        const facts = verdict.facts;
        // about once a day, and never before Apple's not-before time
        const notBefore = facts.notBefore?.getTime() ?? 0;
        const next = new Date(Math.max(notBefore, at.getTime() + DAY_MS));
        await deps.queue.stored(key.keyId, answer.receipt, facts, at, next);
        return { outcome: 'refreshed', riskMetric: facts.riskMetric };
      }
      case 'not_modified':
        await deps.credentials.markAccepted(teamId);
        await deps.queue.reschedule(key.keyId, {
          next: later(DAY_MS),
          outcome: 'not_modified',
          failures: 'reset',
        });
        return { outcome: 'not_modified', riskMetric: null };
      case 'not_found':
        await deps.queue.reschedule(key.keyId, {
          next: null,
          outcome: 'not_found',
          failures: 'keep',
          refreshable: false,
        });
        return { outcome: 'not_found', riskMetric: null };
      case 'unauthorized':
        if (await deps.credentials.markRejected(teamId, credential.keyId))
          deps.onCredentialRefused?.(teamId, credential.keyId, answer.status);
        await deps.queue.reschedule(key.keyId, {
          next: later(DAY_MS),
          outcome: 'unauthorized',
          failures: 'keep',
        });
        return { outcome: 'unauthorized', riskMetric: null };
      case 'rate_limited':
      case 'server_error':
      case 'network_error':
        await deps.queue.reschedule(key.keyId, {
          next: later(
            backoffMs(
              key.failures + 1,
              answer.outcome === 'rate_limited' ? answer.retryAfterSeconds : null,
            ),
          ),
          outcome: answer.outcome,
          failures: 'increment',
        });
        return { outcome: answer.outcome, riskMetric: null };
      case 'bad_request':
        await deps.queue.reschedule(key.keyId, {
          next: later(DAY_MS),
          outcome: 'bad_request',
          failures: 'increment',
        });
        return { outcome: 'bad_request', riskMetric: null };
    }
  }

  return { runOnce };
}

/**
 * The wait after the `failures`-th failure in a row: 1, 2, 4... minutes, at most a day, and at
 * least what Apple's Retry-After asked.
 */
export function backoffMs(failures: number, retryAfterSeconds: number | null): number {
  const exponential = Math.min(DAY_MS, BACKOFF_BASE_MS * 2 ** Math.min(failures - 1, 20));
  return Math.max(exponential, (retryAfterSeconds ?? 0) * 1000);
}

/**
 * Runs the refresher every `intervalMs` (first run soon after start) until stopped.
 * @param refresher what `createReceiptRefresher` made
 * @param options interval and what to do with each run's counts and failures
 */
export function startReceiptRefresher(
  refresher: ReturnType<typeof createReceiptRefresher>,
  options: {
    intervalMs?: number;
    onRun?(run: RefreshRun): void;
    onError?(err: unknown): void;
  } = {},
) {
  const intervalMs = options.intervalMs ?? 10 * 60_000;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = refresher
        .runOnce()
        .then(
          (run) => {
            if (run.claimed > 0) options.onRun?.(run);
          },
          (err: unknown) => options.onError?.(err),
        )
        .finally(() => {
          running = undefined;
          schedule(intervalMs);
        });
    }, ms);
    timer.unref();
  };
  schedule(Math.min(intervalMs, 5000));
  return {
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
