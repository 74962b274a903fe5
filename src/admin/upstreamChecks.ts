/**
 * `attest status --check` for the upstreams that need a sealed credential: Play's
 * decodeIntegrityToken with each stored service account, and Apple's receipt endpoints with each
 * stored DeviceCheck key. They run where the database and the master key are (the running server,
 * or the CLI that opened the database itself), so no key leaves that process; only each check's
 * outcome does, and it never quotes a key, a JWT or an access token.
 *
 * What "ok" proves:
 * - play-integrity: Google granted an access token for the stored key (the key is live and the
 *   account exists), and decodeIntegrityToken for the package answered 400 to a token that is not
 *   one: Google got as far as judging the token, so the Play Integrity API is enabled for the
 *   account's project and the account may call it for that package. It does not prove that the
 *   app's own tokens decode (they must come from the Cloud project linked in Play Console).
 * - apple-receipts: the endpoint answered something other than 401/403 to a request signed with
 *   the stored key (ES256 JWT, kid, iss = team): Apple accepted the key and judged the body (a
 *   receipt that is not one). It does not prove any stored receipt refreshes.
 * 429 and 5xx are failing: the upstream did not judge the credential, so nothing was proved.
 */
import { createReceiptClient } from '../upstream/appleReceiptClient.js';
import type { Config } from '../config.js';
import type { GoogleServiceAccount } from '../core/ports.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import { createAppleCredentialRepository } from '../db/appleCredentials.js';
import type { SecretBox } from '../db/secretBox.js';
import type { Database } from '../db/database.js';
import { createPlayIntegrityClient, GoogleFault } from '../upstream/playIntegrityClient.js';

/** One upstream reached by `attest status --check`. */
export interface UpstreamCheck {
  upstream: 'android-status-list' | 'play-integrity' | 'apple-receipts';
  /** the URL reached */
  target: string;
  /** whose credential was used: a service account's email, or `team TEAMID key KEYID` (never the key) */
  credential?: string;
  state: 'ok' | 'failing' | 'not checked';
  detail: string;
}

/** The upstream URLs of the process that runs the checks (its own configuration). */
export type UpstreamEndpoints = Pick<
  Config,
  | 'googleOauthUrl'
  | 'googlePlayIntegrityUrl'
  | 'appleReceiptUrlDevelopment'
  | 'appleReceiptUrlProduction'
>;

/** Checks at once: each holds one outbound connection for at most its time bound. */
export const CHECK_FAN_OUT = 8;
/**
 * No check starts later than this after the first: with each bounded by at most 10 s, all are
 * done well within the admin socket's 30 s bound on one operation.
 */
const START_WINDOW_MS = 10_000;

/** What the probes send: neither is a real token or receipt, so nothing is decoded or refreshed. */
const PROBE_INTEGRITY_TOKEN = 'attest-status-check-not-a-token';
const PROBE_RECEIPT = new TextEncoder().encode('attest status --check: not a receipt');

/**
 * Reaches Play's API with each stored service account and Apple's two receipt endpoints with each
 * stored DeviceCheck key, `fanOut` at once, each within `timeoutMs` (answers read bounded by the
 * clients). Changes nothing: a refused DeviceCheck key is not marked here (the refresher does).
 */
export async function checkCredentialUpstreams(options: {
  db: Database;
  box: SecretBox;
  endpoints: UpstreamEndpoints;
  timeoutMs: number;
  fanOut?: number;
}): Promise<UpstreamCheck[]> {
  const { db, box, endpoints, timeoutMs } = options;
  const android = await createAllowlistRepository(db, box).listAndroid();
  const accounts = android.flatMap((p) =>
    p.serviceAccount ? [{ packageName: p.packageName, account: p.serviceAccount }] : [],
  );
  const credentials = createAppleCredentialRepository(db, box);
  const teams = await credentials.list();
  const google = createPlayIntegrityClient({
    oauthUrl: endpoints.googleOauthUrl,
    playIntegrityUrl: endpoints.googlePlayIntegrityUrl,
    timeoutMs,
    // the fan-out below bounds the calls in flight
    maxInFlight: Number.MAX_SAFE_INTEGER,
  });
  const apple = createReceiptClient({
    developmentUrl: endpoints.appleReceiptUrlDevelopment,
    productionUrl: endpoints.appleReceiptUrlProduction,
    timeoutMs,
  });
  const decodeUrl = (pkg: string) =>
    `${endpoints.googlePlayIntegrityUrl.replace(/\/+$/, '')}/v1/${encodeURIComponent(pkg)}:decodeIntegrityToken`;

  const tasks: { placeholder: UpstreamCheck; run: () => Promise<UpstreamCheck> }[] = [];
  for (const { packageName, account } of accounts) {
    const placeholder: UpstreamCheck = {
      upstream: 'play-integrity',
      target: decodeUrl(packageName),
      credential: account.clientEmail,
      state: 'failing',
      detail: '',
    };
    tasks.push({ placeholder, run: () => checkPlay(placeholder, packageName, account) });
  }
  for (const team of teams) {
    for (const environment of ['Production', 'Development'] as const) {
      const placeholder: UpstreamCheck = {
        upstream: 'apple-receipts',
        target:
          environment === 'Production'
            ? endpoints.appleReceiptUrlProduction
            : endpoints.appleReceiptUrlDevelopment,
        credential: `team ${team.teamId} key ${team.keyId}`,
        state: 'failing',
        detail: '',
      };
      tasks.push({ placeholder, run: () => checkApple(placeholder, team.teamId, environment) });
    }
  }

  async function checkPlay(
    base: UpstreamCheck,
    packageName: string,
    serviceAccount: GoogleServiceAccount,
  ): Promise<UpstreamCheck> {
    try {
      const { status, detail } = await google.probe({
        packageName,
        serviceAccount,
        integrityToken: PROBE_INTEGRITY_TOKEN,
      });
      if (status === 400)
        return {
          ...base,
          state: 'ok',
          detail: `access token granted; decodeIntegrityToken refused the probe token (${detail})`,
        };
      return { ...base, detail: `decodeIntegrityToken answered ${detail}` };
    } catch (err) {
      if (err instanceof GoogleFault) return { ...base, detail: err.message };
      throw err;
    }
  }

  async function checkApple(
    base: UpstreamCheck,
    teamId: string,
    environment: 'Production' | 'Development',
  ): Promise<UpstreamCheck> {
    const credential = await credentials.get(teamId);
    // removed since the list: nothing to check
    if (!credential) return { ...base, state: 'not checked', detail: 'the key was removed' };
    const answer = await apple.refresh({
      environment,
      receipt: PROBE_RECEIPT,
      credential,
      now: new Date(),
    });
    switch (answer.outcome) {
      case 'unauthorized':
        return { ...base, detail: `Apple refused the key: HTTP ${answer.status}` };
      case 'network_error':
        return {
          ...base,
          detail:
            answer.problem === 'no answer in time'
              ? `no answer within ${timeoutMs} ms`
              : answer.problem,
        };
      case 'rate_limited':
        return { ...base, detail: 'HTTP 429: Apple did not judge the key; try again later' };
      case 'server_error':
        return { ...base, detail: `HTTP ${answer.status}: Apple did not judge the key` };
      case 'bad_request':
      case 'not_found':
      case 'not_modified':
      case 'refreshed': {
        const status =
          'status' in answer
            ? answer.status
            : { not_found: 404, not_modified: 304, refreshed: 200 }[answer.outcome];
        return {
          ...base,
          state: 'ok',
          detail: `key accepted; Apple answered HTTP ${status} to the probe receipt`,
        };
      }
    }
  }

  const results: UpstreamCheck[] = tasks.map((t) => t.placeholder);
  const started = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      if (Date.now() - started > START_WINDOW_MS) {
        results[i] = {
          ...tasks[i]!.placeholder,
          detail: `not reached: the other checks took the whole ${START_WINDOW_MS} ms window`,
        };
        continue;
      }
      try {
        results[i] = await tasks[i]!.run();
      } catch (err) {
        // e.g. a sealed key that no longer opens: this check fails, the others still run
        results[i] = {
          ...tasks[i]!.placeholder,
          detail: oneLine(String((err as Error)?.message ?? err)),
        };
      }
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(options.fanOut ?? CHECK_FAN_OUT, tasks.length) }, worker),
  );

  if (accounts.length === 0)
    results.unshift({
      upstream: 'play-integrity',
      target: endpoints.googlePlayIntegrityUrl,
      state: 'not checked',
      detail: 'no allowlisted package has a service account',
    });
  if (teams.length === 0)
    results.push({
      upstream: 'apple-receipts',
      target: endpoints.appleReceiptUrlProduction,
      state: 'not checked',
      detail: 'no DeviceCheck key is stored',
    });
  return results;
}

function oneLine(text: string): string {
  const t = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}
