import { createMiddleware } from 'hono/factory';
import type { KeyMode } from '../../core/ports.js';
import type { ApiKeyAuthenticator } from '../apiKeyAuthenticator.js';
import type { AuthResult } from '../apiKeyAuthTypes.js';
import type { AppEnv } from '../appEnv.js';
import { errorBody, STATUS_INTERNAL_ERROR } from '../errorBody.js';
import type { ClientAddress } from '../clientAddress.js';
import { requestHeader } from '../requestHeader.js';

/**
 * Checks `X-API-Key` before anything else it guards and sets `keyId`, `mode`, `resultTokens`,
 * `rejectionDetails` and `apps` (the key's scope, null for every app) for the handlers.
 * A refused key answers the authenticator's status with no body (401/403), a busy hash queue 503
 * with Retry-After, a test-mode key 403 when `testKeys` is false. Only the key's database reads
 * count against the backend budget (needs backendBudget first): time queued for argon2 is bounded
 * by the hash queue itself.
 */
export const apiKeyAuth = (opts: {
  auth: Pick<ApiKeyAuthenticator, 'authenticate'>;
  testKeys?: boolean | undefined;
  /**
   * ATTEST_TRUSTED_PROXIES (clientAddress.ts): the client behind a trusted proxy, from the peer
   * and the forwarding headers; also written to the log line (`client`). Absent: the TCP peer.
   */
  clientAddress?: ClientAddress | undefined;
}) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const peer = c.env?.incoming?.socket?.remoteAddress;
    const address = opts.clientAddress
      ? opts.clientAddress(peer, {
          xff: requestHeader(c, 'x-forwarded-for'),
          forwarded: requestHeader(c, 'forwarded'),
        })
      : peer;
    if (opts.clientAddress && address !== undefined) c.get('log').client = address;
    const log = c.get('log');
    let known: { keyId: string; mode: KeyMode } | undefined;
    let result: AuthResult;
    try {
      result = await opts.auth.authenticate(requestHeader(c, 'x-api-key'), {
        address,
        backend: c.get('backend'),
        known: (keyId, mode) => (known = { keyId, mode }),
      });
    } catch (err) {
      // a fault (the database away) re-reading a key this process had verified: the 500 is
      // that key's, in its statistics and its log line, as it would be a moment later
      if (known) {
        log.apiKeyId = known.keyId;
        log.mode = known.mode;
        c.set('keyId', known.keyId);
        c.set('mode', known.mode);
      }
      throw err;
    }
    if (!result.ok) {
      log.auth = result.why;
      if (result.keyId) log.apiKeyId = result.keyId;
      if (result.status === 503) {
        c.header('Retry-After', '1');
        return errorBody(c, 503, STATUS_INTERNAL_ERROR, 'Busy, retry shortly');
      }
      return c.body(null, result.status);
    }
    log.apiKeyId = result.keyId;
    log.mode = result.mode;
    if (result.mode === 'test' && opts.testKeys === false) {
      log.auth = 'test_keys_disabled';
      return c.body(null, 403);
    }
    c.set('keyId', result.keyId);
    c.set('mode', result.mode);
    c.set('resultTokens', result.resultTokens === true);
    c.set('rejectionDetails', result.rejectionDetails === true);
    c.set('apps', result.apps ?? null);
    await next();
  });
