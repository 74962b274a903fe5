/**
 * The HTTP side of a valid verify whose observed rules failed: the log line names them, the answer
 * and its result token are those of any valid verify, and nothing in them mentions the rules.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import type { VerifyOutcome } from '../../src/core/outcome.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { createTestService, issueKey, verify } from '../support/service.js';
import { b64, token } from '../support/tokens.js';

const DETAILS = {
  keyIdentifier: b64(new Uint8Array(32).fill(7)),
  appId: 'ABCDE12345.com.example.attest',
  environment: 'Production' as const,
  assertionCounter: 3,
  platform: 'iOS' as const,
};
const OBSERVED = ['apple_risk_exceeded', 'apple_distribution_not_allowed'] as const;

/** what verifyToken answers when only observed rules failed */
const observedOutcome = async (): Promise<VerifyOutcome> => ({
  ok: true,
  details: { service: 'apple', appleTokenDetails: DETAILS },
  checks: [],
  facts: { service: 'apple', appId: DETAILS.appId },
  observed: [...OBSERVED],
});

describe.each(backends())('a verify with observed failures on $name', (backend) => {
  const db = useDatabase(backend);
  let service: ReturnType<typeof createTestService>;

  beforeEach(() => {
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: 'https://attest.example.com',
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    service = createTestService(db, { verify: observedOutcome, resultTokens: signer });
  });

  const send = async (key: string) => {
    const nonce = randomBytes(32);
    const res = await verify(service.app, key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    expect(res.status).toBe(200);
    return { text: await res.text(), log: service.logs.last() };
  };

  it('answers valid with the usual details; the log line carries observed', async () => {
    const { key } = await issueKey(db);
    const { text, log } = await send(key);
    expect(JSON.parse(text)).toEqual({ isValid: true, statusCode: 0, appleTokenDetails: DETAILS });
    expect(text).not.toMatch(/observe|apple_risk|apple_distribution/);
    expect(log).toMatchObject({ isValid: true, observed: [...OBSERVED] });
    expect(log.reason).toBeUndefined();
  });

  it('a key with result tokens gets its token as usual, which names no observed rule', async () => {
    const { key } = await issueKey(db, { resultTokens: true });
    const { text, log } = await send(key);
    const body = JSON.parse(text) as { isValid: boolean; resultToken: string };
    expect(body.isValid).toBe(true);
    const claims = decodeJwt(body.resultToken);
    expect(claims.details).toEqual(DETAILS);
    expect(JSON.stringify(claims)).not.toMatch(/observe|apple_risk|apple_distribution/);
    expect(log).toMatchObject({ observed: [...OBSERVED] });
  });
});
