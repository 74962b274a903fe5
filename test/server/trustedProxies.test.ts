/**
 * ATTEST_TRUSTED_PROXIES: only from a trusted proxy is the forwarded client address used, for the
 * per-address failure budget and the log line (`client`); from anyone else the forwarding headers
 * change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/core/apiKeys.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createClientAddress } from '../../src/server/clientAddress.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, issueKey } from '../support/service.js';

const wrongSecret = (key: string) =>
  key.slice(0, key.indexOf('_') + 17) + generateApiKey('attest').key.slice(-43);

/** POST init from TCP peer `peer` with the given request headers */
function initFrom(
  app: ReturnType<typeof createTestService>['app'],
  key: string,
  peer: string,
  headers: Record<string, string> = {},
) {
  const all = { 'X-Api-Key': key, ...headers };
  return app.request(
    `${BASE}/api/v1/attestation/init`,
    { method: 'POST', headers: all },
    {
      incoming: {
        socket: { remoteAddress: peer },
        headersDistinct: Object.fromEntries(
          Object.entries(all).map(([k, v]) => [k.toLowerCase(), [v]]),
        ),
      },
    },
  );
}

describe('the client address behind proxies', () => {
  const behind = createClientAddress(['10.0.0.0/8', '2001:db8:ffff::1']);

  it('is the peer when the peer is not trusted, whatever it forwards', () => {
    expect(behind('198.51.100.7', { xff: '203.0.113.1' })).toBe('198.51.100.7');
    expect(behind('198.51.100.7', { forwarded: 'for=203.0.113.1' })).toBe('198.51.100.7');
    expect(createClientAddress([])('10.0.0.1', { xff: '203.0.113.1' })).toBe('10.0.0.1');
  });

  it("is X-Forwarded-For's rightmost untrusted entry from a trusted one; the client's own claims left of it are ignored", () => {
    expect(behind('10.0.0.5', { xff: '203.0.113.1' })).toBe('203.0.113.1');
    expect(behind('10.0.0.5', { xff: '6.6.6.6, 203.0.113.1, 10.1.2.3' })).toBe('203.0.113.1');
    expect(behind('::ffff:10.0.0.5', { xff: '203.0.113.1:443' })).toBe('203.0.113.1');
    expect(behind('2001:db8:ffff::1', { xff: '[2001:db8:1::7]:443' })).toBe('2001:db8:1::7');
    // nothing forwarded, only trusted hops, or garbage: the last trusted hop
    expect(behind('10.0.0.5', {})).toBe('10.0.0.5');
    expect(behind('10.0.0.5', { xff: '10.9.9.9' })).toBe('10.9.9.9');
    expect(behind('10.0.0.5', { xff: '203.0.113.1, not-an-address' })).toBe('10.0.0.5');
  });

  it('reads Forwarded (RFC 7239) when there is no X-Forwarded-For', () => {
    expect(behind('10.0.0.5', { forwarded: 'for=203.0.113.1;proto=https' })).toBe('203.0.113.1');
    expect(behind('10.0.0.5', { forwarded: 'for="[2001:db8:1::7]:4711", for=10.0.0.9' })).toBe(
      '2001:db8:1::7',
    );
    expect(behind('10.0.0.5', { forwarded: 'for=unknown' })).toBe('10.0.0.5');
    expect(behind('10.0.0.5', { forwarded: 'for=203.0.113.1', xff: '203.0.113.2' })).toBe(
      '203.0.113.2',
    );
  });

  it('ATTEST_TRUSTED_PROXIES takes addresses and CIDRs; anything else is one line at start', () => {
    expect(
      loadConfig({}, { ATTEST_TRUSTED_PROXIES: ' 10.0.0.0/8, 2001:db8::/32,192.0.2.1' })
        .trustedProxies,
    ).toEqual(['10.0.0.0/8', '2001:db8::/32', '192.0.2.1']);
    expect(loadConfig({}, {}).trustedProxies).toEqual([]);
    for (const bad of ['10.0.0.0/33', 'proxy.example', '10.0.0.1/8/1', '::1/129'])
      expect(() => loadConfig({}, { ATTEST_TRUSTED_PROXIES: bad })).toThrow(
        new ConfigError(
          `environment variable ATTEST_TRUSTED_PROXIES must be IP addresses or CIDRs, comma-separated (10.0.0.0/8,::1), got "${bad}"`,
        ),
      );
  });
});

describe.each(backends())('the per-address failure budget behind a proxy on $name', (backend) => {
  let db: TestDatabase;
  let good: { id: string; key: string };
  beforeAll(async () => {
    db = await backend.open();
    good = await issueKey(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  it('a spoofed X-Forwarded-For from an untrusted address changes nothing: the peer is counted', async () => {
    for (const clientAddress of [undefined, createClientAddress(['10.0.0.0/8'])]) {
      const service = createTestService(db, {
        auth: { maxFailuresPerAddress: 2 },
        ...(clientAddress ? { clientAddress } : {}),
      });
      for (let i = 0; i < 3; i++)
        await initFrom(service.app, wrongSecret(good.key), '198.51.100.7', {
          'X-Forwarded-For': `203.0.113.${i}`,
          Forwarded: `for=203.0.114.${i}`,
        });
      expect(service.logs.requests().map((l) => [l.auth, l.client])).toEqual(
        [
          ['mismatch', '198.51.100.7'],
          ['mismatch', '198.51.100.7'],
          ['locked_address', '198.51.100.7'],
        ].map(([auth, client]) => (clientAddress ? [auth, client] : [auth, undefined])),
      );
    }
  });

  it('two clients behind a trusted proxy have separate budgets, and the log names each', async () => {
    const service = createTestService(db, {
      auth: { maxFailuresPerAddress: 2 },
      clientAddress: createClientAddress(['10.0.0.0/8']),
    });
    const via = (client: string, key: string) =>
      initFrom(service.app, key, '10.0.0.5', { 'X-Forwarded-For': client });
    for (let i = 0; i < 3; i++) await via('203.0.113.1', wrongSecret(good.key));
    // the other client's budget is its own: its wrong secret is a mismatch, its key answers
    await via('203.0.113.2', wrongSecret(good.key));
    expect((await via('203.0.113.2', good.key)).status).toBe(200);
    // the first client claiming to be the second is still the first (the proxy appended it)
    await via('203.0.113.2, 203.0.113.1', wrongSecret(good.key));
    expect(service.logs.requests().map((l) => [l.auth ?? 'ok', l.client])).toEqual([
      ['mismatch', '203.0.113.1'],
      ['mismatch', '203.0.113.1'],
      ['locked_address', '203.0.113.1'],
      ['mismatch', '203.0.113.2'],
      ['ok', '203.0.113.2'],
      ['locked_address', '203.0.113.1'],
    ]);
  });
});
