/**
 * A local Apple App Attest data endpoint ("Assessing fraud risk"): a real HTTP server on
 * 127.0.0.1:0 with one route per environment (`/development/v1/attestationData`,
 * `/production/v1/attestationData`), as Apple documents the protocol:
 *
 * - `POST`, header `Authorization: <JWT>` (no scheme): an ES256 JWT whose header `kid` is the
 *   DeviceCheck key ID and whose `iss` is the team ID, signed by that key; `iat` current by the
 *   test's clock (at most an hour old). A JWT that does not verify with a registered key is 401.
 * - body: the receipt as base64 text. Not base64, or empty: 400.
 * - answers queued by the test: 200 with a receipt (sent back as base64 text), or a bare status
 *   (304, 404, 429 with Retry-After, 5xx...). With nothing queued: 304.
 *
 * Every request is recorded (environment, the receipt bytes, the verified JWT claims).
 */
import type { KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeProtectedHeader, jwtVerify } from 'jose';

export type FakeAnswer =
  { status: 200; receipt: Uint8Array } | { status: number; retryAfter?: number; body?: string };

export interface FakeRequest {
  environment: 'development' | 'production';
  receipt: Uint8Array;
  teamId: string;
  keyId: string;
  iat: number;
}

/** Starts the fake; `keys` maps `TEAMID/KEYID` to the public key Apple holds for it. */
export async function startFakeAppleReceipts(options: {
  keys: Map<string, KeyObject>;
  /** the clock the JWT's iat is checked against */
  now: () => Date;
}) {
  const answers: FakeAnswer[] = [];
  const requests: FakeRequest[] = [];
  let refused = 0;

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('latin1');
    const match = /^\/(development|production)\/v1\/attestationData$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !match) return send(res, 404, 'not found');
    const jwt = req.headers.authorization ?? '';
    let claims: { teamId: string; keyId: string; iat: number };
    try {
      const header = decodeProtectedHeader(jwt);
      const iss = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()).iss;
      const key = options.keys.get(`${iss}/${header.kid}`);
      if (!key || header.alg !== 'ES256') throw new Error('unknown key');
      const verified = await jwtVerify(jwt, key, {
        algorithms: ['ES256'],
        issuer: String(iss),
        currentDate: options.now(),
        maxTokenAge: '1h',
        requiredClaims: ['iat'],
      });
      claims = { teamId: String(iss), keyId: String(header.kid), iat: verified.payload.iat! };
    } catch {
      refused++;
      return send(res, 401, 'unauthorized');
    }
    const receipt = Buffer.from(body.trim(), 'base64');
    if (receipt.length === 0 || receipt.toString('base64') !== body.trim().replace(/\s+/g, ''))
      return send(res, 400, 'bad request');
    requests.push({ environment: match[1] as FakeRequest['environment'], receipt, ...claims });
    const answer = answers.shift() ?? { status: 304 };
    if (answer.status === 200 && 'receipt' in answer)
      return send(res, 200, Buffer.from(answer.receipt).toString('base64'));
    const a = answer as { status: number; retryAfter?: number; body?: string };
    if (a.retryAfter !== undefined) res.setHeader('Retry-After', String(a.retryAfter));
    return send(res, a.status, a.body ?? '');
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => send(res, 500, 'fake failed'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    developmentUrl: `${base}/development/v1/attestationData`,
    productionUrl: `${base}/production/v1/attestationData`,
    answers,
    requests,
    /** requests answered 401 because the JWT did not verify */
    refused: () => refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function send(res: ServerResponse, status: number, body: string) {
  res.writeHead(status, { 'Content-Type': 'text/plain' });
  res.end(status === 304 ? undefined : body);
}
