/**
 * Every outbound read is cut at its limit while it streams: a peer that answers without end (here
 * a local HTTP server on 127.0.0.1 that writes until the connection closes, up to 48 MB) gets its
 * connection closed after about the limit, never read whole. The count of bytes the server got
 * to write is the proof: reading the whole answer first would take all 48 MB.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { createReceiptClient, MAX_ANSWER_BYTES } from '../../src/upstream/appleReceiptClient.js';
import { verifyResultToken } from '../../src/client/resultToken.js';
import { createPlayIntegrityClient, GoogleFault } from '../../src/upstream/playIntegrityClient.js';
import { createTestServiceAccount } from '../support/fakeGoogle.js';

const CAP = 48 * 1024 * 1024;
// the limits are at most 256 KiB; socket buffers on both sides hold a few MB more at most
const CUT = 16 * 1024 * 1024;

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** An answer that never ends: `prefix`, then `filler` until the client hangs up (or CAP). */
async function endlessAnswer(prefix: string, filler: string, status = 200) {
  let sent = 0;
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  server = createServer((req, res) => {
    req.resume();
    res.on('close', ended);
    res.writeHead(status, { 'Content-Type': 'text/plain' });
    const chunk = Buffer.from(filler.repeat(Math.ceil(65536 / filler.length)));
    res.write(prefix);
    const pump = () => {
      while (sent < CAP && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/x`, done, sent: () => sent };
}

describe('outbound reads are cut at their limit', () => {
  it("Apple's receipt answer: cut after 16 KiB, a network error, not a 48 MB receipt", async () => {
    const apple = await endlessAnswer('', 'AAAA'); // valid base64 all along
    const client = createReceiptClient({
      developmentUrl: apple.url,
      productionUrl: apple.url,
      timeoutMs: 20_000,
    });
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const answer = await client.refresh({
      environment: 'Production',
      receipt: new Uint8Array([1, 2, 3]),
      credential: { teamId: 'TEAM123456', keyId: 'KEY1234567', privateKey },
      now: new Date(),
    });
    expect(answer).toEqual({
      outcome: 'network_error',
      problem: `the answer is larger than ${MAX_ANSWER_BYTES} bytes`,
    });
    await apple.done;
    expect(apple.sent()).toBeLessThan(CUT);
  });

  it("Google's OAuth answer: cut after 16 KiB, a bad_response fault", async () => {
    const google = await endlessAnswer('{"access_token":"', 'x');
    const sa = createTestServiceAccount();
    const client = createPlayIntegrityClient({
      oauthUrl: google.url,
      playIntegrityUrl: google.url,
      timeoutMs: 20_000,
      maxInFlight: 1,
    });
    const failure = await client
      .decode({ packageName: 'com.example', integrityToken: 'abc', serviceAccount: sa.account })
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(GoogleFault);
    expect(failure).toMatchObject({ code: 'bad_response' });
    expect((failure as Error).message).toMatch(/longer than 16384 bytes/);
    await google.done;
    expect(google.sent()).toBeLessThan(CUT);
  });

  it("Google's long error page (a proxy's 502): cut after 16 KiB, its status still says what it was", async () => {
    const google = await endlessAnswer('<html><body>', 'Bad Gateway ', 502);
    const sa = createTestServiceAccount();
    const client = createPlayIntegrityClient({
      oauthUrl: google.url,
      playIntegrityUrl: google.url,
      timeoutMs: 20_000,
      maxInFlight: 1,
    });
    const failure = await client
      .decode({ packageName: 'com.example', integrityToken: 'abc', serviceAccount: sa.account })
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(GoogleFault);
    // the OAuth endpoint answered 502: a server error of Google's, not an unreadable answer
    expect(failure).toMatchObject({ code: 'server_error' });
    await google.done;
    expect(google.sent()).toBeLessThan(CUT);
  });

  it('a JWKS answer: cut after 256 KiB, keys_unavailable', async () => {
    const jwks = await endlessAnswer('{"keys":[', ' ');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    // a low-S signature (the client refuses the high-S twin before it fetches any key)
    const HALF_ORDER = 0x7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8n;
    let token: string;
    do {
      token = await new SignJWT({})
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .sign(privateKey);
    } while (
      BigInt(`0x${Buffer.from(token.split('.')[2]!, 'base64url').subarray(32).toString('hex')}`) >
      HALF_ORDER
    );
    const failure = await verifyResultToken(token, {
      issuer: 'https://attest.example',
      audience: 'ak_1',
      jwksUrl: jwks.url,
    }).catch((err: unknown) => err);
    expect(failure).toMatchObject({ problem: 'keys_unavailable' });
    await jwks.done;
    expect(jwks.sent()).toBeLessThan(CUT);
  });
});
