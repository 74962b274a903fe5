/**
 * `client.writeDeviceRecall`: what it sends (the route, the key, the token as base64 and the bits
 * as given), the typed answer, errors as the other operations throw them, and bad bits refused
 * before any request.
 */
import { describe, expect, it } from 'vitest';
import {
  AttestHttpError,
  AttestResponseError,
  createAttestClient,
} from '../../src/client/index.js';

function stub(status: number, body: unknown) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fetch = (async (url: URL | string, init?: RequestInit) => {
    calls.push({ url: String(url), init: init! });
    return new Response(JSON.stringify(body), {
      status,
      headers: { 'Content-Type': 'application/json' },
    });
  }) as typeof globalThis.fetch;
  const client = createAttestClient({
    baseUrl: 'http://attest.test',
    apiKey: 'attest_key',
    fetch,
  });
  return { client, calls };
}

describe('writeDeviceRecall', () => {
  it('posts the token and the bits, and returns written', async () => {
    const { client, calls } = stub(200, { written: true });
    const answer = await client.writeDeviceRecall(
      { attestationToken: new Uint8Array([1, 2, 3]), bits: { bitFirst: true, bitThird: false } },
      { requestId: 'rp-ban-1' },
    );
    expect(answer).toEqual({ written: true });
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe('http://attest.test/api/v1/android/device-recall');
    const headers = calls[0]!.init.headers as Record<string, string>;
    expect(headers['X-Api-Key']).toBe('attest_key');
    expect(headers['X-Request-Id']).toBe('rp-ban-1');
    expect(JSON.parse(String(calls[0]!.init.body))).toEqual({
      attestationToken: 'AQID',
      bits: { bitFirst: true, bitThird: false },
    });
  });

  it('written false is an answer, not an error', async () => {
    const { client } = stub(200, { written: false });
    expect(
      await client.writeDeviceRecall({ attestationToken: 'AQID', bits: { bitSecond: true } }),
    ).toEqual({ written: false });
  });

  it('a 400 is an AttestHttpError of the operation', async () => {
    const { client } = stub(400, { statusCode: 268505089, errorMessage: 'bits must be ...' });
    const err = await client
      .writeDeviceRecall({ attestationToken: 'AQID', bits: { bitFirst: true } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestHttpError);
    expect(err).toMatchObject({
      operation: 'writeDeviceRecall',
      status: 400,
      kind: 'invalid_request',
    });
  });

  it('a 200 without a boolean written is an AttestResponseError', async () => {
    const { client } = stub(200, { written: 'yes' });
    const err = await client
      .writeDeviceRecall({ attestationToken: 'AQID', bits: { bitFirst: true } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestResponseError);
  });

  it.each([[{}], [{ bitFourth: true }], [{ bitFirst: 'yes' }], [null]])(
    'bits %j are refused before any request',
    async (bits) => {
      const { client, calls } = stub(200, { written: true });
      await expect(
        client.writeDeviceRecall({ attestationToken: 'AQID', bits: bits as never }),
      ).rejects.toThrow(TypeError);
      expect(calls).toHaveLength(0);
    },
  );
});
