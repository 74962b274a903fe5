// The rollout question answered from counts (PGlite and PostgreSQL): a known mix of minted App
// Attest registrations before and after a rule is observed gives exact verifies, would-reject
// counts and share, each rule counted from its own time in the audit trail; and a rejection right
// after the rule is enforced is counted under its app, not `other`.
import { beforeAll, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { ApplePolicyInput } from '../../src/db/appleAppRows.js';
import type { Auditor } from '../../src/db/audit.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { createStatsRecorder } from '../../src/server/statsRecorder.js';
import {
  createAssertion,
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
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';

const CODE = 'apple_environment_not_allowed';
const auditor: Auditor = { actor: 'test', log: () => {} };

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

describe.each(backends())('the share an observed rule would turn away, on $name', (backend) => {
  const db = useDatabase(backend);

  it('exact counts from a known mix, from the time the rule was observed; attribution right after --enforce', async () => {
    const { key, id: keyId } = await issueKey(db);
    // the counts' clock: the verifies before the rule go to a minute well before it
    let statsNow = Date.now() - 10 * 60_000;
    const recorder = createStatsRecorder({
      write: (rows) => createVerificationStatsRepository(db.db).add(rows),
      retentionSeconds: 86_400,
      now: () => statsNow,
    });
    const service = createPlatformService(db, {
      now: TEST_NOW,
      appleRoots: ca.roots,
      stats: recorder,
    });
    const change = (policy: ApplePolicyInput) =>
      createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, undefined, auditor, policy);
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production', auditor);

    const devices: Awaited<ReturnType<typeof createDeviceKey>>[] = [];
    const register = async (options: AttestationOptions = {}, wrongNonce = false) => {
      const device = await createDeviceKey();
      devices.push(device);
      const res = await verifySessionless(service.app, key, async (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (
            await createAttestation(ca, device, {
              ...options,
              nonce: wrongNonce ? Buffer.alloc(48, 7) : nonce,
            })
          ).attestation,
        }),
      );
      return ((await res.json()) as { isValid: boolean }).isValid;
    };
    const dev = { environment: 'Development' } as const;

    // before the rule: 2 valid, 1 refused by the (enforced) environment rule
    expect(await register()).toBe(true);
    expect(await register()).toBe(true);
    expect(await register(dev)).toBe(false);

    await change({ observeChange: { observe: [CODE] } });
    // the counts' clock after the change, as a live clock is (devices are kept by their time)
    statsNow = Date.now() + 1000;
    // after: 3 development keys (observed: valid), 2 production, 1 wrong nonce (rejected before
    // the attestation names its app: App Attest names it by a hash, matched after the nonce)
    for (let i = 0; i < 3; i++) expect(await register(dev)).toBe(true);
    for (let i = 0; i < 2; i++) expect(await register()).toBe(true);
    expect(await register({}, true)).toBe(false);
    // one development key asserts twice: two more verifies the rule would turn away, the same device
    const again = devices[3]!;
    for (const counter of [1, 2]) {
      const res = await verifySessionless(service.app, key, (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: again.keyId,
          assertion: createAssertion(again, { nonce, counter }).assertion,
        }),
      );
      expect(((await res.json()) as { isValid: boolean }).isValid).toBe(true);
    }
    await recorder.flush();

    const stats = createVerificationStatsRepository(db.db);
    const [rule, ...none] = await stats.rollout({ until: new Date(Date.now() + 60_000) });
    expect(none).toEqual([]);
    expect(rule).toMatchObject({
      app: TEST_APP_ID,
      reason: CODE,
      verifies: 7,
      valid: 7,
      wouldReject: 5,
      share: 5 / 7,
      // 5 keys verified since the rule (the 2 before it are not counted), 3 of them development
      devices: 5,
      wouldRejectDevices: 3,
    });
    // per API key, devices are not counted
    const [byKey] = await stats.rollout({
      until: new Date(Date.now() + 60_000),
      apiKeyId: keyId,
    });
    expect(byKey).toMatchObject({ devices: null, wouldRejectDevices: null });
    // the time from the audit trail (the database's clock), within this test
    expect(Math.abs(rule!.observedSince!.getTime() - Date.now())).toBeLessThan(120_000);
    // filtered to another app: nothing
    expect(await stats.rollout({ until: new Date(), app: 'ABCDE12345.com.example.none' })).toEqual(
      [],
    );

    // enforced: the next development key is refused, counted under the app at once
    await change({ observeChange: { enforce: 'all' } });
    expect(await register(dev)).toBe(false);
    await recorder.flush();
    const totals = await stats.totals({
      since: new Date(Date.now() - 3600_000),
      until: new Date(Date.now() + 60_000),
      by: 'app',
    });
    expect(totals.filter((t) => t.outcome === 'rejected')).toEqual([
      { value: TEST_APP_ID, mode: 'live', outcome: 'rejected', reason: CODE, count: 2 },
      { value: null, mode: 'live', outcome: 'rejected', reason: 'apple_nonce_mismatch', count: 1 },
    ]);
    // no longer observed: it is not in the rollout view
    expect(await stats.rollout({ until: new Date(Date.now() + 60_000) })).toEqual([]);
  });
});
