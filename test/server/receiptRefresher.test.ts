/**
 * The receipt refresher against a local fake of Apple's App Attest data endpoint that follows
 * Apple's protocol (JWT in Authorization, base64 receipt in and out, status codes). Apple's
 * answers are the real refreshed receipts of the veehaitch captures, at their own time (injected
 * clock). Each outcome of the spec: 200 (kept with its risk metric, next refresh a day later and
 * never before not-before), 304, 404, 401/403 (said once), 429 and 5xx (back-off), an answer
 * that fails the checks, the 30-day horizon, and two refreshers on one PostgreSQL.
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createReceiptClient, deviceCheckJwt } from '../../src/upstream/appleReceiptClient.js';
import { createReceiptVerifier } from '../../src/core/apple/verifyReceipt.js';
import { createAppleCredentialRepository } from '../../src/db/appleCredentials.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { createReceiptRefreshQueue } from '../../src/db/receiptRefreshQueue.js';
import {
  backoffMs,
  createReceiptRefresher,
  type RefreshOutcome,
} from '../../src/server/receiptRefresher.js';
import { backends, postgresBackend, useDatabase } from '../support/databases.js';
import { startFakeAppleReceipts } from '../support/fakeAppleReceipts.js';
import { after, loadReceiptVectors, type ReceiptVector } from '../support/receiptVectors.js';
import { TEST_SECRETS } from '../support/secrets.js';

const vectors = loadReceiptVectors();
const v = vectors.find((x) => x.name === 'veehaitch-ios-14.2')!;
const TEAM = v.appId.split('.')[0]!;
const KID = 'ABCDE12345';
const refreshed = (id: string) => v.refreshed.find((r) => r.id === id)!;
const first = refreshed('ed4d4bf4-9f8c-1341-56ab-ecfeacae281e'); // risk 2
const second = refreshed('9006156b-e412-5c95-8bd3-6b5dcd4c44cb'); // risk 3
const receipts = createReceiptVerifier();
const DAY = 86_400_000;

let deviceCheckKey: KeyObject;
let publicKey: KeyObject;
let clock: Date;
let fake: Awaited<ReturnType<typeof startFakeAppleReceipts>>;
beforeAll(async () => {
  ({ privateKey: deviceCheckKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'P-256',
  }));
  fake = await startFakeAppleReceipts({
    keys: new Map([[`${TEAM}/${KID}`, publicKey]]),
    now: () => clock,
  });
});
afterAll(() => fake.close());
afterEach(() => {
  fake.answers.length = 0;
  fake.requests.length = 0;
});

describe('the DeviceCheck JWT', () => {
  it('is ES256 with kid and iss, and verifies with the key pair only', async () => {
    const { jwtVerify, decodeProtectedHeader } = await import('jose');
    const now = new Date('2026-01-01T00:00:00Z');
    const jwt = await deviceCheckJwt({ teamId: TEAM, keyId: KID, privateKey: deviceCheckKey }, now);
    expect(decodeProtectedHeader(jwt)).toEqual({ alg: 'ES256', kid: KID });
    const { payload } = await jwtVerify(jwt, publicKey, { currentDate: now, issuer: TEAM });
    expect(payload.iat).toBe(now.getTime() / 1000);
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    await expect(jwtVerify(jwt, other, { currentDate: now })).rejects.toThrow();
  });
});

describe.each(backends())('the refresher on $name', (backend) => {
  const handle = useDatabase(backend);
  const outcomes: [RefreshOutcome, number | null][] = [];
  const refusals: string[] = [];
  const invalid: string[] = [];

  beforeEach(() => {
    outcomes.length = 0;
    refusals.length = 0;
    invalid.length = 0;
  });

  const refresher = (batchSize = 100) =>
    createReceiptRefresher({
      queue: createReceiptRefreshQueue(handle.db),
      credentials: createAppleCredentialRepository(handle.db, TEST_SECRETS),
      client: createReceiptClient({
        developmentUrl: fake.developmentUrl,
        productionUrl: fake.productionUrl,
        timeoutMs: 5000,
      }),
      receipts,
      now: () => clock,
      batchSize,
      onAttempt: (o, r) => outcomes.push([o, r]),
      onCredentialRefused: (team, kid, status) => refusals.push(`${team}/${kid}/${status}`),
      onInvalid: (_k, problem) => invalid.push(problem),
    });

  /** Registers `vector`'s key (or a copy under another key id) with its checked ATTEST receipt. */
  async function register(vector: ReceiptVector = v, keyId: Uint8Array = vector.keyId) {
    const at = after(vector.check.fields.creationTime.parsed, 5);
    const verdict = await receipts.verify(
      vector.receipt,
      { type: 'ATTEST', appId: vector.appId, attestedCertificate: vector.leaf },
      at,
    );
    expect(verdict.valid).toBe(true);
    const f = verdict.facts!;
    await createAppleKeyRepository(handle.db).register({
      keyId,
      publicKey: randomBytes(91),
      appId: vector.appId,
      environment: vector.environment === 'development' ? 'Development' : 'Production',
      counter: 0,
      receipt: {
        bytes: vector.receipt,
        problem: null,
        type: f.type,
        creationTime: f.creationTime,
        notBefore: f.notBefore,
        expirationTime: f.expirationTime,
        riskMetric: f.riskMetric,
      },
    });
    return keyId;
  }
  const view = (keyId: Uint8Array = v.keyId) => createAppleKeyRepository(handle.db).receipt(keyId);
  const addCredential = () =>
    createAppleCredentialRepository(handle.db, TEST_SECRETS).add(TEAM, KID, deviceCheckKey);

  it('200: the signed request, the receipt kept with its risk metric, the next refresh a day on', async () => {
    await register();
    await addCredential();
    clock = after(first.check.creationTime!.parsed, 5);
    fake.answers.push({ status: 200, receipt: first.bytes });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, refreshed: 1 });
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      environment: 'development',
      teamId: TEAM,
      keyId: KID,
    });
    expect(Buffer.from(fake.requests[0]!.receipt).equals(v.receipt)).toBe(true);
    expect(outcomes).toEqual([['refreshed', 2]]);
    const stored = await view();
    expect(stored).toMatchObject({
      type: 'RECEIPT',
      riskMetric: 2,
      problem: null,
      refreshable: true,
      failures: 0,
      lastOutcome: 'refreshed',
      refreshedAt: clock,
      notBefore: new Date(first.check.notBefore!.parsed),
    });
    expect(Buffer.from(stored!.receipt!).equals(first.bytes)).toBe(true);
    // a day later, and not before Apple's not-before (one day after the receipt's creation)
    expect(stored!.nextAttemptAt!.getTime()).toBe(clock.getTime() + DAY);
    // the risk metric reaches assertions through the key store
    expect((await createAppleKeyRepository(handle.db).find(v.keyId))?.riskMetric).toBe(2);
  });

  it('the summary attest status shows: teams, receipts due, backing off, last refresh, outcomes', async () => {
    const summary = () => createReceiptRefreshQueue(handle.db).summary(clock);
    clock = after(first.check.creationTime!.parsed, 5);
    expect(await summary()).toEqual({
      teams: 0,
      refusedTeams: 0,
      receipts: 0,
      refreshable: 0,
      due: 0,
      failing: 0,
      lastRefreshedAt: null,
      outcomes: {},
    });
    await register();
    await addCredential();
    expect(await summary()).toMatchObject({ teams: 1, receipts: 1, refreshable: 1, due: 1 });
    fake.answers.push({ status: 200, receipt: first.bytes });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, refreshed: 1 });
    await register(v, randomBytes(32));
    fake.answers.push({ status: 500 });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, server_error: 1 });
    expect(await summary()).toEqual({
      teams: 1,
      refusedTeams: 0,
      receipts: 2,
      refreshable: 2,
      due: 0,
      failing: 1,
      lastRefreshedAt: clock,
      outcomes: { refreshed: 1, server_error: 1 },
    });
  });

  it('not-before: nothing is sent before the next refresh; then the stored receipt is sent', async () => {
    await register();
    await addCredential();
    clock = after(first.check.creationTime!.parsed, 5);
    fake.answers.push({ status: 200, receipt: first.bytes });
    await refresher().runOnce();
    clock = new Date(new Date(first.check.notBefore!.parsed).getTime() - 1000);
    expect(await refresher().runOnce()).toEqual({ claimed: 0 });
    expect(fake.requests).toHaveLength(1);
    // the second refresh, at its own time: the receipt sent is the refreshed one
    clock = after(second.check.creationTime!.parsed, 5);
    fake.answers.push({ status: 200, receipt: second.bytes });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, refreshed: 1 });
    expect(Buffer.from(fake.requests[1]!.receipt).equals(first.bytes)).toBe(true);
    expect((await view())?.riskMetric).toBe(3);
  });

  it('304 keeps the receipt and tries a day later', async () => {
    await register();
    await addCredential();
    clock = after(v.check.fields.creationTime.parsed, 60);
    fake.answers.push({ status: 304 });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, not_modified: 1 });
    const stored = await view();
    expect(stored).toMatchObject({ type: 'ATTEST', riskMetric: null, lastOutcome: 'not_modified' });
    expect(Buffer.from(stored!.receipt!).equals(v.receipt)).toBe(true);
    expect(stored!.nextAttemptAt!.getTime()).toBe(clock.getTime() + DAY);
  });

  it('404 marks the receipt as no longer refreshable: never sent again', async () => {
    await register();
    await addCredential();
    clock = after(v.check.fields.creationTime.parsed, 60);
    fake.answers.push({ status: 404 });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, not_found: 1 });
    expect(await view()).toMatchObject({ refreshable: false, nextAttemptAt: null });
    clock = new Date(clock.getTime() + 30 * DAY);
    expect(await refresher().runOnce()).toEqual({ claimed: 0 });
  });

  it("401/403: says once which team's key Apple refused, skips the team's other keys, and clears on success", async () => {
    await register(v, v.keyId);
    await register(v, randomBytes(32));
    // a key Apple does not know: the fake answers 401 for a JWT it cannot verify
    const wrong = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    await createAppleCredentialRepository(handle.db, TEST_SECRETS).add(TEAM, KID, wrong);
    clock = after(v.check.fields.creationTime.parsed, 60);
    expect(await refresher().runOnce()).toEqual({ claimed: 2, unauthorized: 1, skipped: 1 });
    expect(fake.refused()).toBeGreaterThan(0);
    expect(refusals).toEqual([`${TEAM}/${KID}/401`]);
    // a day later: refused again, but not said again
    clock = new Date(clock.getTime() + DAY);
    await refresher().runOnce();
    expect(refusals).toHaveLength(1);
    const [credential] = await createAppleCredentialRepository(handle.db, TEST_SECRETS).list();
    expect(credential!.rejectedAt).not.toBeNull();
    expect(await createReceiptRefreshQueue(handle.db).summary(clock)).toMatchObject({
      teams: 1,
      refusedTeams: 1,
    });
    // the right key: accepted, the mark is cleared
    await addCredential();
    clock = new Date(clock.getTime() + DAY);
    fake.answers.push({ status: 304 }, { status: 304 });
    await refresher().runOnce();
    expect(
      (await createAppleCredentialRepository(handle.db, TEST_SECRETS).list())[0]!.rejectedAt,
    ).toBeNull();
    // 403 counts as a refusal too
    fake.answers.push({ status: 403 });
    clock = new Date(clock.getTime() + DAY);
    await refresher(1).runOnce();
    expect(refusals).toEqual([`${TEAM}/${KID}/401`, `${TEAM}/${KID}/403`]);
  });

  it('429: back-off (at least Retry-After), and the rest of the batch waits', async () => {
    await register(v, v.keyId);
    await register(v, randomBytes(32));
    await addCredential();
    clock = after(v.check.fields.creationTime.parsed, 60);
    fake.answers.push({ status: 429, retryAfter: 600 });
    expect(await refresher().runOnce()).toEqual({ claimed: 2, rate_limited: 1, skipped: 1 });
    expect(fake.requests).toHaveLength(1);
    const stored = await view(fake.requests.length ? v.keyId : v.keyId);
    expect(stored!.nextAttemptAt!.getTime()).toBeGreaterThanOrEqual(clock.getTime() + 600_000);
    // nothing is due before then
    clock = new Date(clock.getTime() + 599_000);
    expect(await refresher().runOnce()).toEqual({ claimed: 0 });
  });

  it('5xx and unreachable: exponential back-off (1, 2, 4 minutes), reset by an answer', async () => {
    await register();
    await addCredential();
    clock = after(v.check.fields.creationTime.parsed, 60);
    for (const [status, wait] of [
      [500, 60_000],
      [503, 120_000],
      [502, 240_000],
    ] as const) {
      fake.answers.push({ status });
      expect(await refresher().runOnce()).toEqual({ claimed: 1, server_error: 1 });
      const stored = await view();
      expect(stored!.nextAttemptAt!.getTime() - clock.getTime()).toBe(wait);
      clock = stored!.nextAttemptAt!;
    }
    expect((await view())!.failures).toBe(3);
    fake.answers.push({ status: 304 });
    await refresher().runOnce();
    expect((await view())!.failures).toBe(0);
    expect(backoffMs(30, null)).toBe(DAY);

    const unreachable = createReceiptRefresher({
      queue: createReceiptRefreshQueue(handle.db),
      credentials: createAppleCredentialRepository(handle.db, TEST_SECRETS),
      client: createReceiptClient({
        developmentUrl: 'http://127.0.0.1:1/v1/attestationData',
        productionUrl: 'http://127.0.0.1:1/v1/attestationData',
        timeoutMs: 2000,
      }),
      receipts,
      now: () => clock,
    });
    clock = new Date(clock.getTime() + 2 * DAY);
    expect(await unreachable.runOnce()).toEqual({ claimed: 1, network_error: 1 });
    expect(await view()).toMatchObject({ failures: 1, lastOutcome: 'network_error' });
  });

  it("an answer that fails the checks (another app's receipt, or not a receipt) is not kept", async () => {
    await register();
    await addCredential();
    const other = vectors.find((x) => x.name === 'veehaitch-ios-14.3')!.refreshed[0]!;
    clock = after(other.check.creationTime!.parsed, 5);
    fake.answers.push({ status: 200, receipt: other.bytes });
    expect(await refresher().runOnce()).toEqual({ claimed: 1, invalid: 1 });
    expect(invalid[0]).toMatch(/attested certificate|App ID/);
    const stored = await view();
    expect(stored).toMatchObject({ type: 'ATTEST', riskMetric: null, lastOutcome: 'invalid' });
    fake.answers.push({ status: 200, receipt: Buffer.from('not a receipt') });
    clock = new Date(clock.getTime() + DAY);
    expect(await refresher().runOnce()).toEqual({ claimed: 1, invalid: 1 });
  });

  it('claims only keys used within 30 days, of teams with a key, never an invalid receipt', async () => {
    await register();
    const queue = createReceiptRefreshQueue(handle.db);
    const claim = (now: Date) => queue.claim({ now, limit: 10, leaseMs: 60_000, horizonDays: 30 });
    expect(await claim(new Date())).toEqual([]); // no credential for the team
    await addCredential();
    // last used now (registration): 31 days on it is out of the horizon
    expect(await claim(new Date(Date.now() + 31 * DAY))).toEqual([]);
    expect(await claim(new Date())).toHaveLength(1);
    // claimed: held for the lease
    expect(await claim(new Date())).toEqual([]);
  });
});

const pg = postgresBackend();
describe.runIf(pg)('two refreshers on one PostgreSQL', () => {
  const handle = useDatabase(pg!);
  it('claim disjoint keys: no receipt is sent twice', async () => {
    const keys = createAppleKeyRepository(handle.db);
    for (let i = 0; i < 20; i++)
      await keys.register({
        keyId: randomBytes(32),
        publicKey: randomBytes(91),
        appId: v.appId,
        environment: 'Development',
        counter: 0,
        receipt: {
          bytes: v.receipt,
          problem: null,
          type: 'ATTEST',
          creationTime: new Date('2020-11-21T22:13:02Z'),
          notBefore: null,
          expirationTime: null,
          riskMetric: null,
        },
      });
    await createAppleCredentialRepository(handle.db, TEST_SECRETS).add(TEAM, KID, deviceCheckKey);
    const queue = createReceiptRefreshQueue(handle.db);
    const claim = () =>
      queue.claim({ now: new Date(), limit: 12, leaseMs: 60_000, horizonDays: 30 });
    const [a, b] = await Promise.all([claim(), claim()]);
    const ids = [...a!, ...b!].map((k) => Buffer.from(k.keyId).toString('hex'));
    expect(ids).toHaveLength(20);
    expect(new Set(ids).size).toBe(20);
  });
});
