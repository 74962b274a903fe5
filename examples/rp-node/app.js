// @ts-check
/**
 * A minimal relying party: a login gated on the attestation service. The device asks for a
 * challenge, binds its nonce into App Attest or Play Integrity evidence, and logs in with the
 * token; the RP grants the login only when verify answers isValid true for an app it expects.
 * Plain JavaScript (checked by TypeScript through @ts-check) so it runs with `node` as it is.
 */
import { randomBytes } from 'node:crypto';
import { Hono } from 'hono';
import { AttestError, AttestHttpError, createAttestClient } from 'attest-client';

/**
 * @typedef {object} RpOptions
 * @property {import('attest-client').AttestClientOptions} attest where the service is, this RP's API key, timeout and retries
 * @property {readonly string[]} appleAppIds App Attest app IDs (`TEAMID.bundle`) this RP accepts
 * @property {readonly string[]} androidPackages Android package names this RP accepts
 * @property {number} [challengeTtlMs] how long a challenge waits for its login (the service's session expires on its own too)
 * @property {() => number} [now]
 * @property {(line: Record<string, unknown>) => void} [log] where denials are explained (never to the device)
 * @property {string} [ledgerUrl] a second service (ledger.js) the login's result token is forwarded to; needs an API key with result tokens on
 */

/**
 * The RP's own policy on top of isValid: the service checked its allowlist; this RP accepts its own apps only.
 * @param {import('attest-client').VerifyResult} result
 * @param {RpOptions} options
 */
function expectedApp(result, options) {
  if (!result.isValid) return false;
  if (result.service === 'apple')
    return options.appleAppIds.includes(result.appleTokenDetails.appId);
  if (result.service === 'android-key')
    return options.androidPackages.includes(result.androidKeyDetails.packageName);
  if (result.service === 'gms-pc')
    return options.androidPackages.includes(result.googlePcTokenDetails.packageName);
  return options.androidPackages.includes(result.googleTokenDetails.packageName);
}

/**
 * The RP's HTTP app: `POST /login/challenge` and `POST /login`.
 * @param {RpOptions} options
 */
export function createRpApp(options) {
  const attest = createAttestClient(options.attest);
  const app = new Hono();
  const now = options.now ?? Date.now;
  const ttl = options.challengeTtlMs ?? 5 * 60_000;
  const log = options.log ?? (() => {});
  // in memory for the example; a real RP keeps this with its login attempt (database, cache)
  /** @type {Map<string, { sessionReference: string; expiresAt: number }>} */
  const challenges = new Map();

  app.post('/login/challenge', async (c) => {
    try {
      const session = await attest.init();
      for (const [id, old] of challenges) if (old.expiresAt <= now()) challenges.delete(id);
      const challengeId = randomBytes(16).toString('base64url');
      challenges.set(challengeId, {
        sessionReference: session.sessionReference,
        expiresAt: now() + ttl,
      });
      // the device needs the nonce only; the session reference stays with the RP
      return c.json({ challengeId, nonce: session.serverNonce });
    } catch (err) {
      if (!(err instanceof AttestError)) throw err;
      log({
        msg: 'challenge unavailable',
        code: err.code,
        error: err.message,
        requestId: err.requestId,
      });
      return c.json({ error: 'try again later' }, 503);
    }
  });

  app.post('/login', async (c) => {
    /** @type {{ challengeId?: unknown; attestationToken?: unknown } | null} */
    const body = await c.req.json().catch(() => null);
    if (
      !body ||
      typeof body.challengeId !== 'string' ||
      typeof body.attestationToken !== 'string'
    ) {
      return c.json({ error: 'challengeId and attestationToken are required' }, 400);
    }
    const challenge = challenges.get(body.challengeId);
    // single use whatever happens next, as the service's session is
    challenges.delete(body.challengeId);
    if (!challenge || challenge.expiresAt <= now())
      return c.json({ error: 'unknown or expired challenge' }, 403);

    /** @type {import('attest-client').VerifyResult} */
    let result;
    try {
      result = await attest.verify({
        attestationToken: body.attestationToken,
        sessionReference: challenge.sessionReference,
      });
    } catch (err) {
      if (!(err instanceof AttestError)) throw err;
      // every error denies: a 4xx, a 5xx, a timeout, an answer off the contract
      log({
        msg: 'login denied',
        why: 'attestation service error',
        code: err.code,
        error: err.message,
        requestId: err.requestId,
      });
      if (err instanceof AttestHttpError && err.status === 400)
        return c.json({ error: 'the token is not base64' }, 400);
      return c.json({ error: 'device check unavailable' }, 503);
    }
    if (!result.isValid) {
      log({ msg: 'login denied', why: 'token rejected' });
      return c.json({ error: 'device check failed' }, 403);
    }
    if (!expectedApp(result, options)) {
      log({ msg: 'login denied', why: 'another app', service: result.service });
      return c.json({ error: 'device check failed' }, 403);
    }
    const device =
      result.service === 'apple'
        ? {
            platform: 'ios',
            appId: result.appleTokenDetails.appId,
            environment: result.appleTokenDetails.environment,
          }
        : result.service === 'android-key'
          ? {
              platform: 'android',
              packageName: result.androidKeyDetails.packageName,
              securityLevel: result.androidKeyDetails.securityLevel,
            }
          : result.service === 'gms-pc'
            ? {
                platform: 'pc',
                packageName: result.googlePcTokenDetails.packageName,
                verdicts: result.googlePcTokenDetails.deviceRecognitionVerdict,
              }
            : {
                platform: 'android',
                packageName: result.googleTokenDetails.packageName,
                verdicts: result.googleTokenDetails.deviceIntegrityVerdicts,
              };
    if (!options.ledgerUrl) return c.json({ loggedIn: true, device });
    // the ledger trusts the signed result, not this RP's word: forward the token as it came
    if (!result.resultToken) {
      log({ msg: 'login denied', why: 'no result token (is --result-tokens on for this key?)' });
      return c.json({ error: 'device check unavailable' }, 503);
    }
    /** @type {Response} */
    let answer;
    try {
      answer = await fetch(new URL('/device-checks', options.ledgerUrl), {
        method: 'POST',
        headers: { Authorization: `Bearer ${result.resultToken}` },
        signal: AbortSignal.timeout(5_000),
      });
    } catch (err) {
      log({ msg: 'login denied', why: 'ledger unreachable', error: String(err) });
      return c.json({ error: 'device check unavailable' }, 503);
    }
    const ledger = /** @type {Record<string, unknown>} */ (await answer.json().catch(() => ({})));
    if (answer.status !== 200 || ledger.accepted !== true) {
      log({ msg: 'login denied', why: 'ledger refused the result token', status: answer.status });
      return c.json({ error: 'device check failed' }, 403);
    }
    return c.json({ loggedIn: true, device, ledger });
  });

  return app;
}
