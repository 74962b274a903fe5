/**
 * What the verify route counts for `attest stats` and /metrics: valid, rejected with its reason,
 * error on a 5xx, nothing for a request that is not a verification; and the app named only when
 * allowlisted (or proved by a valid verify), else `other`.
 */
import { describe, expect, it } from 'vitest';
import type { VerifyOutcome } from '../../src/core/outcome.js';
import type { CountedVerify } from '../../src/server/statsRecorder.js';
import { backends, useDatabase } from '../support/databases.js';
import { createTestService, issueKey, verify } from '../support/service.js';

const ALLOWED = 'ABCDE12345.com.example.bank';
const BODY = { attestationToken: 'AAAA', expectedNonce: Buffer.alloc(32, 7).toString('base64') };

const outcomes: Record<string, VerifyOutcome> = {
  valid: {
    ok: true,
    details: { service: 'apple', appleTokenDetails: { appId: ALLOWED } },
    checks: [],
    facts: { service: 'apple', appId: ALLOWED },
  } as never,
  rejectedKnown: {
    ok: false,
    reason: 'apple_counter_replay',
    detail: 'counter',
    checks: [],
    facts: { service: 'apple', appId: ALLOWED },
  },
  rejectedChosen: {
    ok: false,
    reason: 'apple_app_not_allowed',
    detail: 'not allowlisted',
    checks: [],
    facts: { service: 'apple', appId: 'ZZZZZ99999.com.attacker.random1' },
  } as never,
  rejectedPackage: {
    ok: false,
    reason: 'gms_play_protect',
    detail: 'play protect',
    checks: [],
    facts: { service: 'gms', packageName: 'com.example.unknown' },
  } as never,
};

describe.each(backends())('counting verifications on $name', (backend) => {
  const db = useDatabase(backend);

  async function setup() {
    const counted: CountedVerify[] = [];
    let next: VerifyOutcome | 'throw' = outcomes.valid!;
    const service = createTestService(db, {
      verify: async () => {
        if (next === 'throw') throw new Error('backend fault');
        return next;
      },
      stats: { record: (v) => counted.push(v) },
      allowlisted: (app) => app === ALLOWED,
    });
    const { id, key } = await issueKey(db, { mode: 'test' });
    return {
      ...service,
      counted,
      keyId: id,
      run: async (outcome: VerifyOutcome | 'throw', body: unknown = BODY, apiKey = key) => {
        next = outcome;
        return verify(service.app, apiKey, body);
      },
    };
  }

  it('valid, rejected (with its reason), error on a 5xx; app ids not allowlisted count as other', async () => {
    const s = await setup();
    expect((await s.run(outcomes.valid!)).status).toBe(200);
    expect((await s.run(outcomes.rejectedKnown!)).status).toBe(200);
    expect((await s.run(outcomes.rejectedChosen!)).status).toBe(200);
    expect((await s.run(outcomes.rejectedPackage!)).status).toBe(200);
    expect((await s.run('throw')).status).toBe(500);
    const base = { apiKeyId: s.keyId, mode: 'test' };
    expect(s.counted).toEqual([
      {
        ...base,
        service: 'apple',
        app: ALLOWED,
        result: { outcome: 'valid', observed: [] },
      },
      {
        ...base,
        service: 'apple',
        app: ALLOWED,
        result: { outcome: 'rejected', reason: 'apple_counter_replay' },
      },
      {
        ...base,
        service: 'apple',
        app: 'other',
        result: { outcome: 'rejected', reason: 'apple_app_not_allowed' },
      },
      {
        ...base,
        service: 'gms',
        app: 'other',
        result: { outcome: 'rejected', reason: 'gms_play_protect' },
      },
      { ...base, service: undefined, app: undefined, result: { outcome: 'error' } },
    ]);
  });

  it('a valid verify whose observed rules failed is counted with those reasons', async () => {
    const s = await setup();
    const observed: VerifyOutcome = {
      ...(outcomes.valid as Extract<VerifyOutcome, { ok: true }>),
      observed: ['apple_risk_exceeded', 'apple_distribution_not_allowed'],
    };
    const res = await s.run(observed);
    expect(await res.json()).toMatchObject({ isValid: true });
    expect(s.counted).toEqual([
      {
        apiKeyId: s.keyId,
        mode: 'test',
        service: 'apple',
        app: ALLOWED,
        result: {
          outcome: 'valid',
          observed: ['apple_risk_exceeded', 'apple_distribution_not_allowed'],
        },
      },
    ]);
  });

  it('a request that is not a verification (bad body, no key, bad key) is not counted', async () => {
    const s = await setup();
    expect((await s.run(outcomes.valid!, '{not json')).status).toBe(400);
    expect((await s.run(outcomes.valid!, { attestationToken: 'AAAA' })).status).toBe(400);
    expect((await verify(s.app, undefined, BODY)).status).toBe(401);
    const refused = (await s.run(outcomes.valid!, BODY, `${(await issueKey(db)).key}x`)).status;
    expect([401, 403]).toContain(refused);
    expect(s.counted).toEqual([]);
  });

  it('/metrics: attest_verifications_total labels only allowlisted apps, however many ids clients send', async () => {
    const s = await setup();
    await s.run(outcomes.valid!);
    await s.run(outcomes.rejectedKnown!);
    for (let i = 0; i < 20; i++)
      await s.run({
        ...outcomes.rejectedChosen!,
        facts: { service: 'apple', appId: `ZZZZZ99999.com.attacker.random${i}` },
      } as VerifyOutcome);
    await s.run('throw');
    const text = await s.metrics.registry.metrics();
    const series = text
      .split('\n')
      .filter((l) => l.startsWith('attest_verifications_total{'))
      .sort();
    expect(series).toEqual(
      [
        `attest_verifications_total{service="apple",app="${ALLOWED}",outcome="valid",reason="none",mode="test"} 1`,
        `attest_verifications_total{service="apple",app="${ALLOWED}",outcome="rejected",reason="apple_counter_replay",mode="test"} 1`,
        'attest_verifications_total{service="apple",app="other",outcome="rejected",reason="apple_app_not_allowed",mode="test"} 20',
        'attest_verifications_total{service="unknown",app="unknown",outcome="error",reason="none",mode="test"} 1',
      ].sort(),
    );
    expect(text).not.toContain('attacker');
  });
});
