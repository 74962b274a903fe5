import { createHash } from 'node:crypto';
import { createMiddleware } from 'hono/factory';
import type { AppEnv } from '../appEnv.js';
import type { Metrics } from '../metrics.js';
import type { CountedVerify, StatsRecorder } from '../statsRecorder.js';

/** The app name counted for apps that are not allowlisted (bounded labels and rows). */
export const OTHER_APP = 'other';

/**
 * Counts each answered verify, after the answer is made (whatever threw on the way): valid,
 * observed (the `observed` reasons of the request's log line), rejected with its reason, or error (5xx).
 * Only a map in memory is touched here; the statistics reach the database in the background.
 * A 4xx (bad body, refused key) is not a verification and is not counted.
 */
export const verifyCounter = (opts: {
  stats?: Pick<StatsRecorder, 'record'> | undefined;
  metrics: Pick<Metrics, 'observeVerification'>;
  /**
   * whether an app ID or package is allowlisted now (the allowlist the verifiers read, so a rule
   * change or a new app counts right from the first verify after it); without it every app of a
   * failure is `other`
   */
  allowlisted?: ((app: string) => boolean | Promise<boolean>) | undefined;
}) =>
  createMiddleware<AppEnv>(async (c, next) => {
    try {
      await next();
    } finally {
      const status = c.res.status;
      const log = c.get('log');
      let result: CountedVerify['result'] | undefined;
      if (status >= 500) result = { outcome: 'error' };
      else if (log.isValid === true) result = { outcome: 'valid', observed: log.observed ?? [] };
      else if (log.isValid === false && log.reason)
        result = { outcome: 'rejected', reason: log.reason };
      if (result) {
        const named = log.appId ?? log.packageName;
        // a valid verify proves its app allowlisted; any other app id is the client's to choose,
        // and one row or label per value would let a client grow them without limit
        const app =
          named === undefined
            ? undefined
            : result.outcome === 'valid' || (await isAllowlisted(opts.allowlisted, named))
              ? named
              : OTHER_APP;
        // only an authenticated key id: a refused request's claimed id is the client's text
        const apiKeyId = c.get('keyId') ?? '';
        const counted: CountedVerify = {
          apiKeyId,
          mode: apiKeyId ? c.get('mode') : '',
          service: log.service,
          app,
          ...(result.outcome === 'valid' && log.keyId && log.service
            ? { device: deviceOf(log.service, log.keyId) }
            : {}),
          result,
        };
        opts.stats?.record(counted);
        const reason = result.outcome === 'rejected' ? result.reason : '';
        const { mode } = counted;
        opts.metrics.observeVerification(
          log.service ?? '',
          app ?? '',
          result.outcome,
          reason,
          mode,
        );
        if (result.outcome === 'valid')
          for (const observed of new Set(result.observed))
            opts.metrics.observeVerification(
              log.service ?? '',
              app ?? '',
              'observed',
              observed,
              mode,
            );
      }
    }
  });

async function isAllowlisted(
  allowlisted: ((app: string) => boolean | Promise<boolean>) | undefined,
  app: string,
): Promise<boolean> {
  try {
    return (await allowlisted?.(app)) === true;
  } catch {
    // the allowlist could not be read (the database is down): the bounded label
    return false;
  }
}

/**
 * The device a verify names, for the rollout's distinct devices: the evidence's key (App Attest
 * key id, android-key key id) hashed with its service and cut to 128 bits, so the statistics
 * hold no key id. Play Integrity names no device.
 */
export function deviceOf(service: string, keyId: string): string {
  return createHash('sha256').update(`${service}\u0000${keyId}`).digest('hex').slice(0, 32);
}
