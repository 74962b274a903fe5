// Test mode apart in the rollout's figures (PGlite and PostgreSQL): an observed rule, 4 live
// verifies of which 1 fails it and 6 test-key verifies that all fail it. The live share (what
// `attest stats` shows and `allowlist add --enforce` reports by default) is 1 of 4; the test
// keys' share, asked for with --mode test, is 6 of 6; --mode all sums both.
import { beforeAll, describe, expect, it } from 'vitest';
import { runOperation } from '../../src/admin/operations.js';
import type { OperationContext } from '../../src/admin/operation.js';
import { rolloutNote } from '../../src/cli/kinds/observeOptions.js';
import { statsJson } from '../../src/cli/commands/stats.js';
import { rolloutText } from '../../src/cli/stats/statsSummary.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { Auditor } from '../../src/db/audit.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { createStatsRecorder } from '../../src/server/statsRecorder.js';
import {
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
  type AttestationOptions,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';

const CODE = 'apple_environment_not_allowed';
const auditor: Auditor = { actor: 'test', log: () => {} };

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

describe.each(backends())('live and test figures apart in the rollout, on $name', (backend) => {
  const db = useDatabase(backend);

  it('4 live verifies (1 fails the observed rule) and 6 test ones (all fail it): 25% live, 100% --mode test, --enforce reports 1 of 4', async () => {
    const live = await issueKey(db, { name: 'live' });
    const test = await issueKey(db, { name: 'rehearsal', mode: 'test' });
    const recorder = createStatsRecorder({
      write: (batch) => createVerificationStatsRepository(db.db).add(batch),
      retentionSeconds: 86_400,
    });
    const service = createPlatformService(db, {
      now: TEST_NOW,
      appleRoots: ca.roots,
      stats: recorder,
    });
    const allowlist = createAllowlistRepository(db.db, null);
    await allowlist.addApple(TEST_APP_ID, 'production', auditor);
    await allowlist.addApple(TEST_APP_ID, undefined, auditor, {
      observeChange: { observe: [CODE] },
    });

    const register = async (key: string, options: AttestationOptions = {}) => {
      const device = await createDeviceKey();
      const res = await verifySessionless(service.app, key, async (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(ca, device, { ...options, nonce })).attestation,
        }),
      );
      return ((await res.json()) as { isValid: boolean }).isValid;
    };
    const dev = { environment: 'Development' } as const;
    // observed, not enforced: every one of them is valid
    for (let i = 0; i < 3; i++) expect(await register(live.key)).toBe(true);
    expect(await register(live.key, dev)).toBe(true);
    for (let i = 0; i < 6; i++) expect(await register(test.key, dev)).toBe(true);
    await recorder.flush();

    const until = new Date(Date.now() + 60_000);
    const stats = createVerificationStatsRepository(db.db);
    const liveRule = { app: TEST_APP_ID, reason: CODE, verifies: 4, valid: 4, wouldReject: 1 };
    expect(await stats.rollout({ until })).toMatchObject([
      { ...liveRule, mode: 'live', share: 0.25, devices: 4, wouldRejectDevices: 1 },
    ]);
    expect(await stats.rollout({ until, mode: 'test' })).toMatchObject([
      { mode: 'test', verifies: 6, valid: 6, wouldReject: 6, share: 1, devices: 6 },
    ]);
    expect(await stats.rollout({ until, mode: 'all' })).toMatchObject([
      { mode: 'all', valid: 10, wouldReject: 7, share: 0.7, devices: 10, wouldRejectDevices: 7 },
    ]);

    // through the admin operation `attest stats` runs, as it prints them
    const ctx: OperationContext = {
      handle: db,
      secrets: async () => TEST_SECRETS,
      auditor: { actor: 'test', log: () => {} },
    };
    const since = new Date(Date.now() - 3600_000);
    const asked = async (mode?: 'live' | 'test' | 'all') => {
      const request = { since, until, by: 'app' as const, mode: mode ?? ('live' as const) };
      const input = mode === undefined ? { since, until, by: 'app' } : { ...request };
      const totals = await runOperation('stats.totals', input, ctx);
      const rules = await runOperation(
        'stats.rollout',
        mode === undefined ? { until } : { until, mode },
        ctx,
      );
      return { json: statsJson(request, totals, rules), text: rolloutText(rules), rules };
    };
    const byDefault = await asked();
    expect(byDefault.json.rules).toMatchObject([{ mode: 'live', share: 0.25, wouldReject: 1 }]);
    expect(byDefault.json.rows).toEqual([
      { app: TEST_APP_ID, mode: 'live', outcome: 'observed', reason: CODE, count: 1 },
      { app: TEST_APP_ID, mode: 'live', outcome: 'valid', reason: null, count: 4 },
    ]);
    expect(byDefault.text).toContain('(live keys, all instances');
    expect(byDefault.text).toMatch(/\s4\s+4\s+1\s+25\.0%\s+1\/4$/m);
    const rehearsal = await asked('test');
    expect(rehearsal.json.rules).toMatchObject([{ mode: 'test', share: 1, wouldReject: 6 }]);
    expect(rehearsal.json.rows.every((r) => r.mode === 'test')).toBe(true);
    expect(rehearsal.text).toMatch(/\s6\s+6\s+6\s+100\.0%\s+6\/6$/m);
    expect((await asked('all')).json.rows).toContainEqual({
      app: TEST_APP_ID,
      mode: 'test',
      outcome: 'valid',
      reason: null,
      count: 6,
    });

    // `allowlist add --enforce` reports what it read before the change: the live figure
    expect(rolloutNote(TEST_APP_ID, { enforce: [CODE] }, byDefault.rules)).toMatch(
      /^apple_environment_not_allowed enforced: while observed \(since \S+Z\) it would have rejected 1 of 4 valid verifies of live keys \(25\.0%\), 1 of 4 devices\n$/,
    );
    expect(rolloutNote(TEST_APP_ID, { enforce: 'all' }, rehearsal.rules, 'test')).toContain(
      'it would have rejected 6 of 6 valid verifies of test keys (100.0%)',
    );
  });
});
