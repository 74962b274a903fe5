/**
 * POST /api/v1/results/consume: a result token of the deployment is consumed once
 * (`alreadyConsumed: false` the first time only, across instances), a token that does not verify
 * with the deployment's keys of the key's mode is `valid: false` with the reason in the log only,
 * a malformed body is 400 with statusCode 268505089, and a jti is pruned an hour past its exp.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { CompactSign, decodeJwt } from 'jose';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { createConsumedResultRepository } from '../../src/db/consumedResults.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { DatabaseUnavailableError } from '../../src/db/errors.js';
import { STATUS_INTERNAL_ERROR, STATUS_INVALID_REQUEST } from '../../src/server/errorBody.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { startSessionPruner, type PruneRun } from '../../src/server/sessionPruner.js';
import { CONSUMED_RESULT_RETENTION_SECONDS } from '../../src/server/consumedResultPruner.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { loadConfig, type Config } from '../../src/config.js';
import { backends, postgresBackend, useDatabase, type TestDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import { BASE, captureLogger, createTestService, issueKey, verify } from '../support/service.js';
import { b64, FAKE_APP_ID, token } from '../support/tokens.js';

const ISSUER = 'https://attest.example.com';
const TTL = 300;
const DETAILS = {
  service: 'apple' as const,
  appleTokenDetails: {
    keyIdentifier: Buffer.from(new Uint8Array(32).fill(7)).toString('base64'),
    appId: FAKE_APP_ID,
    environment: 'Production' as const,
    assertionCounter: 1,
    platform: 'iOS' as const,
  },
};

type App = ReturnType<typeof createTestService>['app'];
type Signer = ReturnType<typeof createResultTokenSigner>;

function signers(db: DatabaseHandle, issuer = ISSUER) {
  const keys = createResultKeyRepository(db.db, TEST_SECRETS);
  const options = { keys, issuer, ttlSeconds: TTL, refreshMs: 5000 };
  return {
    live: createResultTokenSigner(options),
    test: createResultTokenSigner({ ...options, mode: 'test' }),
  };
}

const mint = (signer: Signer, apiKeyId = 'k_rp') =>
  signer.sign({ apiKeyId, approach: 'sessionless', nonce: randomBytes(32), details: DETAILS });

function consume(app: App, key: string | undefined, body: unknown, contentType?: string) {
  return app.request(`${BASE}/api/v1/results/consume`, {
    method: 'POST',
    headers: {
      ...(key !== undefined ? { 'X-Api-Key': key } : {}),
      'Content-Type': contentType ?? 'application/json',
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function consumed(app: App, key: string, resultToken: string) {
  const res = await consume(app, key, { resultToken });
  expect(res.status).toBe(200);
  return { text: await res.text(), status: res.status };
}

describe.each(backends())('consuming result tokens on $name', (backend) => {
  const db = useDatabase(backend);
  let live: Signer;
  let test: Signer;
  let clock: Date | undefined;
  let service: ReturnType<typeof createTestService>;
  let liveKey: { id: string; key: string };
  let testKey: { id: string; key: string };

  beforeEach(async () => {
    ({ live, test } = signers(db));
    clock = undefined;
    service = createTestService(db, {
      resultTokens: live,
      testResultTokens: test,
      testKeys: true,
      now: () => clock ?? new Date(),
    });
    liveKey = await issueKey(db, { name: 'ledger' });
    testKey = await issueKey(db, { name: 'ledger-test', mode: 'test' });
  });

  it('the first consume is alreadyConsumed false with the claims, every later one true; the log has the jti, never the token', async () => {
    // a token from a real verify, of another key: consume checks no audience
    const maker = await issueKey(db, { name: 'rp', resultTokens: true });
    const nonce = randomBytes(32);
    const res = await verify(service.app, maker.key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    const { resultToken } = (await res.json()) as { resultToken: string };
    const claims = decodeJwt(resultToken);
    expect(claims.aud).toBe(maker.id);

    service.logs.clear();
    const first = await consumed(service.app, liveKey.key, resultToken);
    expect(JSON.parse(first.text)).toEqual({ valid: true, alreadyConsumed: false, claims });
    expect(Object.keys(JSON.parse(first.text) as object)).toEqual([
      'valid',
      'alreadyConsumed',
      'claims',
    ]);
    for (const key of [liveKey.key, maker.key, liveKey.key]) {
      const again = await consumed(service.app, key, resultToken);
      expect(JSON.parse(again.text)).toEqual({ valid: true, alreadyConsumed: true, claims });
    }
    const lines = service.logs.requests();
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatchObject({
      route: '/api/v1/results/consume',
      apiKeyId: liveKey.id,
      mode: 'live',
      isValid: true,
      service: 'apple',
      jti: claims.jti,
      alreadyConsumed: false,
      status: 200,
    });
    expect(lines.slice(1).map((l) => l.alreadyConsumed)).toEqual([true, true, true]);
    const raw = service.logs.raw.join('\n');
    for (const part of resultToken.split('.')) expect(raw).not.toContain(part);
    // a replay shows in the metrics: one first consume, three again
    const metrics = await service.metrics.registry.metrics();
    expect(metrics).toMatch(
      /attest_result_consume_total\{outcome="first",reason="none",mode="live"\} 1\n/,
    );
    expect(metrics).toMatch(
      /attest_result_consume_total\{outcome="again",reason="none",mode="live"\} 3\n/,
    );
  });

  it('a token that does not verify is valid false, the reason in the log only', async () => {
    const good = await mint(live);
    const [h, p, s] = good.split('.') as [string, string, string];
    const claims = decodeJwt(good);

    // tampered: another payload under the same signature
    const raised = Buffer.from(
      JSON.stringify({ ...claims, details: { ...DETAILS.appleTokenDetails, assertionCounter: 9 } }),
    ).toString('base64url');
    // another signer: a P-256 key of its own, the same header (kid) and claims
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as Record<string, string>;
    const forged = await new CompactSign(Buffer.from(p, 'base64url'))
      .setProtectedHeader(header as { alg: string })
      .sign(privateKey);
    const otherKid = await new CompactSign(Buffer.from(p, 'base64url'))
      .setProtectedHeader({ ...header, alg: 'ES256', kid: 'not-ours' })
      .sign(privateKey);
    // the deployment's key under another issuer
    const otherIssuer = await mint(signers(db, 'https://elsewhere.example.com').live);
    const flipped = s.startsWith('A') ? `B${s.slice(1)}` : `A${s.slice(1)}`;

    const cases: [string, string][] = [
      [`${h}.${raised}.${s}`, 'result_token_signature_invalid'],
      [`${h}.${p}.${flipped}`, 'result_token_signature_invalid'],
      [forged, 'result_token_signature_invalid'],
      [otherKid, 'result_token_key_unknown'],
      [otherIssuer, 'result_token_issuer_mismatch'],
      ['not a token', 'result_token_malformed'],
      [`${h}.${p}`, 'result_token_malformed'],
    ];
    for (const [bad, reason] of cases) {
      const { text } = await consumed(service.app, liveKey.key, bad);
      expect({ bad, text }).toEqual({ bad, text: '{"valid":false}' });
      expect(service.logs.last()).toMatchObject({ isValid: false, reason, status: 200 });
      expect(service.logs.last().jti).toBeUndefined();
    }
    expect(await service.metrics.registry.metrics()).toMatch(
      /attest_result_consume_total\{outcome="invalid",reason="result_token_signature_invalid",mode="live"\} 3\n/,
    );
    // none of them used up the real one
    expect(JSON.parse((await consumed(service.app, liveKey.key, good)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: false,
    });
  });

  it('a re-encoded token (the other valid ECDSA signature, s to n - s) is refused: the service issues low-S only, so each token has one string', async () => {
    const good = await mint(live);
    const [h, p, s] = good.split('.') as [string, string, string];
    const sig = Buffer.from(s, 'base64url');
    const n = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
    const other = n - BigInt(`0x${sig.subarray(32).toString('hex')}`);
    const twin = `${h}.${p}.${Buffer.concat([
      sig.subarray(0, 32),
      Buffer.from(other.toString(16).padStart(64, '0'), 'hex'),
    ]).toString('base64url')}`;
    expect(twin).not.toBe(good);
    expect((await consumed(service.app, liveKey.key, twin)).text).toBe('{"valid":false}');
    expect(service.logs.last()).toMatchObject({ reason: 'result_token_signature_invalid' });
    expect(JSON.parse((await consumed(service.app, liveKey.key, good)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: false,
    });
    const rows = rowsOf<{ jti: string }>(
      await db.db.execute(sql`select jti from consumed_results`),
    );
    expect(rows.map((r) => r.jti)).toEqual([decodeJwt(good).jti]);
  });

  it('a test token with a live key, and a live token with a test key, are valid false and used up by neither', async () => {
    const testToken = await mint(test);
    const liveToken = await mint(live);
    expect(decodeJwt(testToken).test).toBe(true);

    expect((await consumed(service.app, liveKey.key, testToken)).text).toBe('{"valid":false}');
    expect(service.logs.last()).toMatchObject({ reason: 'result_token_wrong_mode' });
    expect((await consumed(service.app, testKey.key, liveToken)).text).toBe('{"valid":false}');
    expect(service.logs.last()).toMatchObject({ reason: 'result_token_wrong_mode', mode: 'test' });

    // each with the key of its own mode: the first consume of each
    const t = JSON.parse((await consumed(service.app, testKey.key, testToken)).text);
    expect(t).toMatchObject({ valid: true, alreadyConsumed: false, claims: { test: true } });
    const l = JSON.parse((await consumed(service.app, liveKey.key, liveToken)).text);
    expect(l).toMatchObject({ valid: true, alreadyConsumed: false });
    expect(l.claims.test).toBeUndefined();
  });

  it('a key scoped to apps consumes tokens of its apps; another app is valid false and stays unused', async () => {
    const scoped = await issueKey(db, { name: 'ledger-scoped', apps: [FAKE_APP_ID] });
    const elsewhere = await issueKey(db, { name: 'ledger-other', apps: ['com.example.other'] });
    const t = await mint(live);
    expect((await consumed(service.app, elsewhere.key, t)).text).toBe('{"valid":false}');
    expect(service.logs.last()).toMatchObject({
      reason: 'result_token_app_not_in_key_scope',
      apiKeyId: elsewhere.id,
    });
    expect(JSON.parse((await consumed(service.app, scoped.key, t)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: false,
    });
    expect(JSON.parse((await consumed(service.app, liveKey.key, t)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: true,
    });
  });

  it('an expired token is valid false, also one consumed before; its jti is pruned an hour past exp (injected clock)', async () => {
    const repo = createConsumedResultRepository(db.db);
    const once = await mint(live);
    const never = await mint(live);
    const exp = decodeJwt(once).exp!;
    expect(JSON.parse((await consumed(service.app, liveKey.key, once)).text)).toMatchObject({
      alreadyConsumed: false,
    });

    clock = new Date(exp * 1000);
    for (const t of [once, never]) {
      expect((await consumed(service.app, liveKey.key, t)).text).toBe('{"valid":false}');
      expect(service.logs.last()).toMatchObject({ reason: 'result_token_expired' });
    }
    // the last second before exp still verifies, and the record is there
    clock = new Date(exp * 1000 - 1000);
    expect(JSON.parse((await consumed(service.app, liveKey.key, once)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: true,
    });

    const jtis = async () =>
      rowsOf<{ jti: string }>(await db.db.execute(sql`select jti from consumed_results`)).map(
        (r) => r.jti,
      );
    // the pruner with the injected clock: not at exp + 1 h, at exp + 1 h + 1 s
    const runs: PruneRun[] = [];
    const pruneAt = async (atMs: number) => {
      let pruner: ReturnType<typeof startSessionPruner> | undefined;
      const ran = new Promise<void>((resolve) => {
        pruner = startSessionPruner({
          pruneBatch: async (cutoff, limit) => {
            const n = await repo.pruneBatch(cutoff, limit);
            resolve();
            return n;
          },
          retentionSeconds: CONSUMED_RESULT_RETENTION_SECONDS,
          intervalMs: 10,
          now: () => atMs,
          onRun: (r) => runs.push(r),
        });
      });
      await ran;
      await pruner!.stop();
    };
    await pruneAt((exp + CONSUMED_RESULT_RETENTION_SECONDS) * 1000);
    expect(await jtis()).toEqual([decodeJwt(once).jti]);
    await pruneAt((exp + CONSUMED_RESULT_RETENTION_SECONDS + 1) * 1000);
    expect(await jtis()).toEqual([]);
    expect(runs).toEqual([{ deleted: 1, skipped: false }]);

    // pruned: the token is past exp, so it still never counts as a first consume
    clock = new Date((exp + CONSUMED_RESULT_RETENTION_SECONDS + 1) * 1000);
    expect((await consumed(service.app, liveKey.key, once)).text).toBe('{"valid":false}');
    expect(await jtis()).toEqual([]);
  });

  it('pruneBatch deletes at most `limit` records that expired before the cut-off, and nothing else', async () => {
    const repo = createConsumedResultRepository(db.db);
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 5; i++) expect(await repo.record(`old${i}`, now - 7200, 'k')).toBe(true);
    expect(await repo.record('fresh', now + 300, 'k')).toBe(true);
    expect(await repo.record('fresh', now + 300, 'k')).toBe(false);
    const cutoff = new Date((now - 3600) * 1000);
    expect(await repo.pruneBatch(cutoff, 3)).toBe(3);
    expect(await repo.pruneBatch(cutoff, 3)).toBe(2);
    expect(await repo.pruneBatch(cutoff, 3)).toBe(0);
    expect(await repo.record('fresh', now + 300, 'k')).toBe(false);
  });

  it('a consume whose INSERT fails answers 500 and uses nothing up: the retry is the first consume', async () => {
    const t = await mint(live);
    await db.db.execute(sql`alter table consumed_results rename to consumed_results_away`);
    try {
      const res = await consume(service.app, liveKey.key, { resultToken: t });
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({
        statusCode: STATUS_INTERNAL_ERROR,
        errorMessage: 'Internal error',
      });
      expect(service.logs.last()).toMatchObject({ status: 500 });
      expect(service.logs.last().alreadyConsumed).toBeUndefined();
      // the fault's log line keeps the driver's message, never the statement's parameters
      for (const part of t.split('.')) expect(service.logs.raw.join('\n')).not.toContain(part);
    } finally {
      await db.db.execute(sql`alter table consumed_results_away rename to consumed_results`);
    }
    expect(JSON.parse((await consumed(service.app, liveKey.key, t)).text)).toMatchObject({
      valid: true,
      alreadyConsumed: false,
    });
  });

  it('while the database is known to be down a consume answers 503 at once with Retry-After', async () => {
    const t = await mint(live);
    const down = createTestService(db, {
      resultTokens: live,
      breaker: {
        isOpen: () => true,
        check: () => {
          throw new DatabaseUnavailableError('the database cannot be reached');
        },
        failed: () => {},
        suspect: () => {},
        onOpen: () => () => {},
      },
    });
    const res = await consume(down.app, liveKey.key, { resultToken: t });
    expect(res.status).toBe(503);
    expect(res.headers.get('Retry-After')).toBe('1');
    expect(((await res.json()) as { statusCode: number }).statusCode).toBe(STATUS_INTERNAL_ERROR);
    expect(JSON.parse((await consumed(service.app, liveKey.key, t)).text)).toMatchObject({
      alreadyConsumed: false,
    });
  });

  it('malformed bodies are 400 with statusCode 268505089, and say what is wrong', async () => {
    const cases: [unknown, RegExp, string?][] = [
      ['{"resultToken":', /not valid JSON/],
      ['', /not valid JSON/],
      [[], /JSON object/],
      ['"a.b.c"', /JSON object/],
      [null, /JSON object/],
      [{}, /resultToken is required/],
      [{ resultToken: null }, /resultToken is required/],
      [{ resultToken: 42 }, /must be a string/],
      [{ resultToken: ['a.b.c'] }, /must be a string/],
      [{ resultToken: '' }, /must not be empty/],
      [{ resultToken: 'a'.repeat(8193) }, /at most 8192 characters/],
      [{ resultToken: 'a'.repeat(20_000) }, /larger than 16384 bytes/],
      [{ resultToken: 'a.b.c' }, /Content-Type/, 'text/plain'],
    ];
    for (const [body, message, contentType] of cases) {
      const res = await consume(service.app, liveKey.key, body, contentType);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      const json = (await res.json()) as { statusCode: number; errorMessage: string };
      expect(json.statusCode).toBe(STATUS_INVALID_REQUEST);
      expect(json.errorMessage).toMatch(message);
    }
    // the longest token accepted is a consume, not a 400
    expect((await consumed(service.app, liveKey.key, 'a'.repeat(8192))).text).toBe(
      '{"valid":false}',
    );
  });

  it('needs an API key as every /api route; GET is 405; without an issuer the route is 404', async () => {
    const t = await mint(live);
    expect((await consume(service.app, undefined, { resultToken: t })).status).toBe(401);
    expect((await consume(service.app, 'attest_nope', { resultToken: t })).status).toBe(403);
    const get = await service.app.request(`${BASE}/api/v1/results/consume`, {
      headers: { 'X-Api-Key': liveKey.key },
    });
    expect(get.status).toBe(405);
    const bare = createTestService(db);
    const res = await consume(bare.app, liveKey.key, { resultToken: t });
    expect(res.status).toBe(404);
    // nothing was recorded: the token is still unused
    expect(JSON.parse((await consumed(service.app, liveKey.key, t)).text)).toMatchObject({
      alreadyConsumed: false,
    });
  });
});

describe.each(backends())('50 parallel consumes across two instances on $name', (backend) => {
  let db: TestDatabase;
  let second: DatabaseHandle | undefined;
  beforeAll(async () => {
    db = await backend.open();
    // on PostgreSQL the second instance has its own pool; PGlite belongs to one process
    if (db.url)
      second = await openDatabase({ url: db.url, dataDir: '', role: 'server', poolSize: 20 });
  });
  afterAll(async () => {
    await second?.close();
    await db?.close();
  });

  it('exactly one answer is alreadyConsumed false (5 rounds)', async () => {
    const { key } = await issueKey(db);
    // each instance with its own signers (own key caches) over the shared database
    const a = createTestService(db, { resultTokens: signers(db).live });
    const b = createTestService(second ?? db, { resultTokens: signers(second ?? db).live });
    const maker = signers(db).live;
    for (let round = 0; round < 5; round++) {
      const resultToken = await mint(maker);
      const answers = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const res = await consume((i % 2 ? b : a).app, key, { resultToken });
          expect(res.status).toBe(200);
          return (await res.json()) as { valid: boolean; alreadyConsumed: boolean };
        }),
      );
      expect(answers.every((x) => x.valid)).toBe(true);
      expect(answers.filter((x) => !x.alreadyConsumed)).toHaveLength(1);
    }
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('two attest serve instances on one PostgreSQL database', () => {
  let db: TestDatabase;
  const servers: RunningServer[] = [];
  beforeAll(async () => {
    db = await pg!.open();
    for (let i = 0; i < 2; i++) {
      const config: Config = {
        ...loadConfig({}, {}),
        databaseUrl: db.url!,
        port: 0,
        host: '127.0.0.1',
        masterKey: TEST_MASTER_KEY_ENV,
        logLevel: 'warn',
        issuer: ISSUER,
      };
      servers.push(await startServer(config, captureLogger('warn').logger, { migrate: true }));
    }
  }, 60_000);
  afterAll(async () => {
    for (const s of servers) await s.close();
    await db?.close();
  });

  it('50 parallel consumes of one token over both: exactly one alreadyConsumed false (5 rounds)', async () => {
    const { key } = await issueKey(db);
    // the servers made the first live key at start; this signer signs with it, as either would
    const signer = signers(db).live;
    for (let round = 0; round < 5; round++) {
      const resultToken = await mint(signer);
      const answers = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const res = await fetch(`${servers[i % 2]!.url}/api/v1/results/consume`, {
            method: 'POST',
            headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
            body: JSON.stringify({ resultToken }),
          });
          expect(res.status).toBe(200);
          return (await res.json()) as { valid: boolean; alreadyConsumed: boolean };
        }),
      );
      expect(answers.every((x) => x.valid)).toBe(true);
      expect(answers.filter((x) => !x.alreadyConsumed)).toHaveLength(1);
    }
  });
});
