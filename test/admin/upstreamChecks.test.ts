/**
 * status.checkUpstreams: Play's decodeIntegrityToken with each stored service account and Apple's
 * receipt endpoints with each stored DeviceCheck key, against local fakes on 127.0.0.1: ok when
 * the upstream judged the probe, failing with the upstream's reason when it refused the
 * credential, did not answer in time, or could not be reached; never a secret in the result.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runOperation } from '../../src/admin/operations.js';
import type { OperationContext } from '../../src/admin/operation.js';
import {
  checkCredentialUpstreams,
  type UpstreamEndpoints,
} from '../../src/admin/upstreamChecks.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAppleCredentialRepository } from '../../src/db/appleCredentials.js';
import { backends, useDatabase } from '../support/databases.js';
import { startFakeAppleReceipts } from '../support/fakeAppleReceipts.js';
import { createTestServiceAccount, startFakeGoogle } from '../support/fakeGoogle.js';
import { TEST_SECRETS } from '../support/secrets.js';

const TEAM = 'ABCDE12345';
const KID = 'KEY1234567';

describe.each(backends())('status.checkUpstreams on $name', (backend) => {
  const db = useDatabase(backend);
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  const sa = createTestServiceAccount();
  const deviceCheck = generateKeyPairSync('ec', { namedCurve: 'P-256' });

  async function seed(options: { play?: boolean; apple?: boolean } = {}) {
    if (options.play !== false)
      await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid('com.example.checked', null, {
        serviceAccount: sa.account,
      });
    if (options.apple !== false)
      await createAppleCredentialRepository(db.db, TEST_SECRETS).add(
        TEAM,
        KID,
        deviceCheck.privateKey,
      );
  }

  async function fakes(appleKey: KeyObject = deviceCheck.publicKey) {
    const google = await startFakeGoogle({ accounts: [sa] });
    const apple = await startFakeAppleReceipts({
      keys: new Map([[`${TEAM}/${KID}`, appleKey]]),
      now: () => new Date(),
    });
    closers.push(google.close, apple.close);
    const endpoints: UpstreamEndpoints = {
      googleOauthUrl: google.oauthUrl,
      googlePlayIntegrityUrl: google.playIntegrityUrl,
      appleReceiptUrlDevelopment: apple.developmentUrl,
      appleReceiptUrlProduction: apple.productionUrl,
    };
    return { google, apple, endpoints };
  }

  function check(endpoints: UpstreamEndpoints, timeoutMs = 10_000) {
    const ctx: OperationContext = {
      handle: db,
      secrets: async () => TEST_SECRETS,
      upstreams: endpoints,
    };
    return runOperation('status.checkUpstreams', { timeoutMs }, ctx);
  }

  /** the result as printed, with nothing of a key, an access token or a JWT in it */
  function expectNoSecret(result: unknown) {
    const text = JSON.stringify(result);
    const saKey = sa.account.privateKey.replace(/-----[A-Z ]+-----|\s/g, '');
    expect(text).not.toContain(saKey.slice(0, 40));
    expect(text).not.toContain(sa.account.privateKeyId!);
    const dcKey = deviceCheck.privateKey.export({ type: 'pkcs8', format: 'der' });
    expect(text).not.toContain(dcKey.toString('base64').slice(0, 40));
    expect(text).not.toMatch(/ya29\.|eyJ|Bearer/);
  }

  it('ok: Google granted a token and refused the probe token (400); Apple judged the probe receipt with the key', async () => {
    await seed();
    const { google, apple, endpoints } = await fakes();
    const checks = await check(endpoints);
    expect(checks).toEqual([
      {
        upstream: 'play-integrity',
        target: `${google.playIntegrityUrl}/v1/com.example.checked:decodeIntegrityToken`,
        credential: sa.account.clientEmail,
        state: 'ok',
        detail: expect.stringMatching(/^access token granted; .*HTTP 400 INVALID_ARGUMENT/),
      },
      {
        upstream: 'apple-receipts',
        target: apple.productionUrl,
        credential: `team ${TEAM} key ${KID}`,
        state: 'ok',
        detail: 'key accepted; Apple answered HTTP 304 to the probe receipt',
      },
      expect.objectContaining({ target: apple.developmentUrl, state: 'ok' }),
    ]);
    expect(google.counts).toEqual({ token: 1, decode: 1 });
    // one request per endpoint, signed by the team's key
    expect(apple.requests.map((r) => [r.environment, r.teamId, r.keyId]).sort()).toEqual([
      ['development', TEAM, KID],
      ['production', TEAM, KID],
    ]);
    expectNoSecret(checks);
  });

  it('nothing stored: each upstream says not checked, and nothing is reached', async () => {
    const { google, apple, endpoints } = await fakes();
    const checks = await check(endpoints);
    expect(checks.map((c) => [c.upstream, c.state, c.detail])).toEqual([
      ['play-integrity', 'not checked', 'no allowlisted package has a service account'],
      ['apple-receipts', 'not checked', 'no DeviceCheck key is stored'],
    ]);
    expect(google.counts).toEqual({ token: 0, decode: 0 });
    expect(apple.requests).toHaveLength(0);
  });

  it("Google 403 on decode, and Apple 401 for a key it does not hold: failing with the upstream's reason", async () => {
    await seed();
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    const { google, endpoints } = await fakes(other);
    google.faultNext('decode', { status: 403 });
    const checks = await check(endpoints);
    expect(checks.map((c) => [c.upstream, c.state, c.detail])).toEqual([
      ['play-integrity', 'failing', 'decodeIntegrityToken answered HTTP 403 PERMISSION_DENIED'],
      ['apple-receipts', 'failing', 'Apple refused the key: HTTP 401'],
      ['apple-receipts', 'failing', 'Apple refused the key: HTTP 401'],
    ]);
    expectNoSecret(checks);
  });

  it('a refused grant and a 404 package are failing; 5xx proves nothing and is failing too', async () => {
    await seed({ apple: false });
    const { google, endpoints } = await fakes();
    google.faultNext('token', { status: 400 });
    expect((await check(endpoints))[0]).toMatchObject({
      state: 'failing',
      detail: expect.stringMatching(
        /^the OAuth token endpoint answered HTTP 400 \(invalid_grant\) for attest-verifier@/,
      ),
    });
    google.faultNext('decode', { status: 404 });
    expect((await check(endpoints))[0]).toMatchObject({
      state: 'failing',
      detail: 'decodeIntegrityToken answered HTTP 404 NOT_FOUND',
    });
    google.faultNext('decode', { status: 503 });
    expect((await check(endpoints))[0]).toMatchObject({
      state: 'failing',
      detail: 'decodeIntegrityToken answered HTTP 503 UNAVAILABLE',
    });
  });

  it('upstreams that never answer are failing within the bound; one nobody listens on, at once', async () => {
    await seed();
    const { google, endpoints } = await fakes();
    google.faultNext('decode', { hang: true });
    // Apple's endpoint takes the request and never answers
    let arrived = 0;
    const silent: Server = createServer(() => {
      arrived += 1;
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    closers.push(async () => {
      silent.closeAllConnections();
      await new Promise<void>((r) => silent.close(() => r()));
    });
    const base = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    // a port nobody listens on any more: refused at once
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const closedPort = (gone.address() as AddressInfo).port;
    await new Promise<void>((r) => gone.close(() => r()));
    const checks = await check(
      {
        ...endpoints,
        appleReceiptUrlProduction: `${base}/production`,
        appleReceiptUrlDevelopment: `http://127.0.0.1:${closedPort}/development`,
      },
      2000,
    );
    expect(checks.map((c) => [c.upstream, c.state, c.detail])).toEqual([
      [
        'play-integrity',
        'failing',
        // the bound covers the access token and the decode: on a busy machine it may run out first
        expect.stringMatching(
          new RegExp(
            `^(no answer from ${new URL(google.playIntegrityUrl).host} within 2000 ms|no access token from Google in time)$`,
          ),
        ),
      ],
      ['apple-receipts', 'failing', 'no answer within 2000 ms'],
      ['apple-receipts', 'failing', 'ECONNREFUSED'],
    ]);
    expect(arrived).toBe(1);
  });

  it('a bounded fan-out: with 2 at once, the third account waits until a check is done', async () => {
    const accounts = [1, 2, 3].map((n) =>
      createTestServiceAccount(`verifier-${n}@example-project.iam.gserviceaccount.com`),
    );
    const repo = createAllowlistRepository(db.db, TEST_SECRETS);
    for (const [n, a] of accounts.entries())
      await repo.addAndroid(`com.example.app${n}`, null, { serviceAccount: a.account });
    const google = await startFakeGoogle({ accounts });
    closers.push(google.close);
    const gate = google.gate();
    const running = checkCredentialUpstreams({
      db: db.db,
      box: TEST_SECRETS,
      endpoints: {
        googleOauthUrl: google.oauthUrl,
        googlePlayIntegrityUrl: google.playIntegrityUrl,
        appleReceiptUrlDevelopment: 'http://127.0.0.1:9/unused',
        appleReceiptUrlProduction: 'http://127.0.0.1:9/unused',
      },
      timeoutMs: 10_000,
      fanOut: 2,
    });
    await gate.arrived(2);
    // two decodes held: the third account has not even asked for its access token
    expect(google.counts).toEqual({ token: 2, decode: 2 });
    gate.release();
    const checks = await running;
    expect(checks.filter((c) => c.upstream === 'play-integrity').map((c) => c.state)).toEqual([
      'ok',
      'ok',
      'ok',
    ]);
    expect(google.counts).toEqual({ token: 3, decode: 3 });
  });
});
