// The cost of a result token: signing one (claims, ES256 with the cached key) beside what a valid
// verify costs without it, and a verifier's check of one. Run:
// npx vitest bench --run --project shared bench/resultToken.bench.ts
import { randomBytes, randomUUID } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { bench, describe } from 'vitest';
import { resultClaims } from '../src/core/resultToken.js';
import type { PlatformDetails } from '../src/core/kinds.js';
import { backends } from '../test/support/databases.js';
import { runMigrations } from '../src/db/migrate.js';
import { createResultKeyRepository } from '../src/db/resultKeys.js';
import { createSecretBox, toMasterKey } from '../src/db/secretBox.js';
import pino from 'pino';
import { createApp } from '../src/server/app.js';
import { createMetrics } from '../src/server/metrics.js';
import { createResultTokenSigner } from '../src/server/resultTokenSigner.js';

// the run's embedded server (test/support/embeddedServer.ts), a migrated database of its own
const handle = await backends()[0]!.open();
const signer = createResultTokenSigner({
  keys: createResultKeyRepository(handle.db, createSecretBox([toMasterKey(randomBytes(32))])),
  issuer: 'https://attest.bench.example',
  ttlSeconds: 300,
  // one read of the keys for the whole run: what is measured is the signature, not the poll
  refreshMs: Number.POSITIVE_INFINITY,
});
const details: PlatformDetails = {
  service: 'gms',
  googleTokenDetails: {
    packageName: 'com.example.bank',
    deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY', 'MEETS_BASIC_INTEGRITY'],
    timestampMillis: Date.now(),
  },
};
const input = {
  apiKeyId: '0h3k5x9q2m7c1b4n',
  approach: 'sessionless' as const,
  nonce: randomBytes(32),
  details,
};
const token = await signer.sign(input);
const jwks = createLocalJWKSet(await signer.jwks());

// the app with the verification itself stubbed out: what differs between the two keys is the token
const appFor = (resultTokens: boolean) =>
  createApp({
    logger: pino({ level: 'silent' }),
    auth: {
      authenticate: async () => ({ ok: true, keyId: input.apiKeyId, mode: 'live', resultTokens }),
    },
    sessions: {
      create: async () => ({ expiresAt: new Date() }),
      consume: async () => ({ ok: false, reason: 'session_unknown' }),
    },
    verify: async () => ({ ok: true, details, checks: [], facts: { service: 'gms' } }),
    metrics: createMetrics(),
    ready: async () => true,
    sessionTtlSeconds: 300,
    resultTokens: signer,
  });
const plainApp = appFor(false);
const tokenApp = appFor(true);
const body = JSON.stringify({
  attestationToken: randomBytes(64).toString('base64'),
  expectedNonce: randomBytes(32).toString('base64'),
});
const post = async (app: ReturnType<typeof createApp>, expect: string) => {
  const res = await app.request('/api/v1/attestation/verify', {
    method: 'POST',
    headers: { 'X-Api-Key': 'attest_x', 'Content-Type': 'application/json' },
    body,
  });
  if (!(await res.text()).includes(expect)) throw new Error('unexpected answer');
};

describe('a valid verify through the app (verification stubbed)', () => {
  bench('plain key', () => post(plainApp, '"isValid":true'));
  bench('result-token key', () => post(tokenApp, '"resultToken"'));
});

describe('result tokens', () => {
  bench('claims only (no signature)', () => {
    resultClaims({
      issuer: 'https://attest.bench.example',
      apiKeyId: input.apiKeyId,
      approach: input.approach,
      nonce: input.nonce,
      details,
      now: Math.floor(Date.now() / 1000),
      ttlSeconds: 300,
      jti: randomUUID(),
    });
  });
  bench('sign one token (claims + ES256, key imported once)', async () => {
    await signer.sign(input);
  });
  bench('verify one token (jose, local JWKS)', async () => {
    await jwtVerify(token, jwks, { audience: input.apiKeyId });
  });
});
