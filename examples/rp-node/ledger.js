// @ts-check
/**
 * A second service behind the RP (a payments ledger): it never calls the attestation service.
 * The RP hands it the result token of a login; the ledger checks it offline against the
 * deployment's published keys (fetched once, then cached) and accepts the device check only when
 * the token is genuine, current, made by attest for this RP's API key, and about the device the
 * request names.
 */
import { Hono } from 'hono';
import { AttestResultTokenError, verifyResultToken } from 'attest-client';

/**
 * @typedef {object} LedgerOptions
 * @property {string} issuer the attest deployment's ATTEST_ISSUER
 * @property {string} audience the id of the RP's API key (a token made for another RP is refused)
 * @property {string} [jwksUrl] where the keys are; default `<issuer>/.well-known/jwks.json`
 * @property {boolean} [acceptTestTokens] a ledger in a test environment only: accept test-mode
 *   API keys' tokens (`test: true`, which prove nothing about a device); default false
 * @property {string} [testJwksUrl] where the test keys are; default `<issuer>/.well-known/jwks-test.json`
 * @property {(line: Record<string, unknown>) => void} [log]
 */

/**
 * The ledger's HTTP app: `POST /device-checks` with `Authorization: Bearer <resultToken>`.
 * @param {LedgerOptions} options
 */
export function createLedgerApp(options) {
  const app = new Hono();
  const log = options.log ?? (() => {});

  app.post('/device-checks', async (c) => {
    const match = /^Bearer (\S+)$/.exec(c.req.header('authorization') ?? '');
    if (!match) return c.json({ error: 'a result token is required' }, 401);
    try {
      const claims = await verifyResultToken(match[1] ?? '', {
        issuer: options.issuer,
        audience: options.audience,
        ...(options.jwksUrl ? { jwksUrl: options.jwksUrl } : {}),
        ...(options.acceptTestTokens ? { acceptTestTokens: true } : {}),
        ...(options.testJwksUrl ? { testJwksUrl: options.testJwksUrl } : {}),
      });
      return c.json({
        accepted: true,
        device: claims.sub,
        service: claims.service,
        expiresAt: new Date(claims.exp * 1000).toISOString(),
      });
    } catch (err) {
      if (!(err instanceof AttestResultTokenError)) throw err;
      // the reason stays here: the caller learns only that the check was refused
      log({ msg: 'device check refused', problem: err.problem, error: err.message });
      return c.json({ accepted: false }, err.problem === 'keys_unavailable' ? 503 : 403);
    }
  });

  return app;
}
