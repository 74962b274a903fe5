/**
 * A local Google for standard Play Integrity requests: a real HTTP server on 127.0.0.1:0 with the
 * two endpoints attest calls, as Google documents them.
 *
 * - `POST /token` (OAuth 2.0, JWT bearer grant, RFC 7523): the assertion must be RS256-signed by
 *   a registered service account, `iss` its email, `aud` this token URL, `scope` the Play
 *   Integrity scope, `iat`/`exp` at most an hour apart and current by the shared clock. Answers
 *   `{ access_token, expires_in, token_type }`, or `400 { error: "invalid_grant" }`.
 * - `POST /v1/{packageName}:decodeIntegrityToken` with `Authorization: Bearer` and
 *   `{ "integrity_token": ... }`: answers `{ tokenPayloadExternal }` for a token the test issued,
 *   `400 INVALID_ARGUMENT` for any other, `401 UNAUTHENTICATED` for an unknown access token.
 * - `POST /v1/{packageName}:decodePcIntegrityToken` (Play Integrity for PC) with
 *   `{ "integrityToken": ... }` (DecodePcIntegrityTokenRequest in Google's discovery document):
 *   answers `{ tokenPayloadExternal }` (a PcTokenPayloadExternal) for a token `issuePc` issued,
 *   400 and 401 as above.
 * - `POST /v1/{packageName}/deviceRecall:write` with `Authorization: Bearer` and
 *   `{ "integrityToken": ..., "newValues": { "bitFirst": true, ... } }` (Google's
 *   WriteDeviceRecallRequest): records the write and answers `{}`; `400 INVALID_ARGUMENT` for a
 *   body of another shape, `401` as above.
 *
 * Faults are queued per endpoint (a status, a delay, or no answer at all), a gate holds decodes
 * until the test releases them, and every request is counted.
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { jwtVerify } from 'jose';
import type { GoogleServiceAccount } from '../../src/core/ports.js';
import { JWT_BEARER_GRANT, PLAY_INTEGRITY_SCOPE } from '../../src/upstream/playIntegrityClient.js';

export interface TestServiceAccount {
  account: GoogleServiceAccount;
  /** the key file as the Google Cloud console hands it out */
  json: string;
  publicKey: KeyObject;
}

/** A service account with a fresh RSA key (what Google Cloud's "Create key" makes). */
export function createTestServiceAccount(
  clientEmail = 'attest-verifier@example-project.iam.gserviceaccount.com',
): TestServiceAccount {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const privateKeyId = randomBytes(20).toString('hex');
  const json = JSON.stringify({
    type: 'service_account',
    project_id: 'example-project',
    private_key_id: privateKeyId,
    private_key: pem,
    client_email: clientEmail,
    client_id: '100000000000000000001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
  });
  return { account: { clientEmail, privateKeyId, privateKey: pem }, json, publicKey };
}

export type Fault =
  /** answer with this status and Google's error body for it; `echo`: its message quotes the request body (the integrity token), as a careless proxy might */
  | { status: number; echo?: boolean }
  /** answer normally, this much later */
  | { delayMs: number }
  /** never answer (until the server closes) */
  | { hang: true };

export interface FakeGoogle {
  oauthUrl: string;
  playIntegrityUrl: string;
  counts: { token: number; decode: number };
  /** device recall write requests received (accepted or not) */
  recallRequests: number;
  /** every device recall write Google accepted, in order */
  recallWrites: {
    packageName: string;
    integrityToken: string;
    newValues: Record<string, boolean>;
  }[];
  /** seconds the next access tokens live */
  expiresIn: number;
  /** registers what decodeIntegrityToken answers for a new opaque token, which it returns */
  issue(packageName: string, payload: unknown): string;
  /** registers what decodePcIntegrityToken answers for a new opaque PC token, which it returns */
  issuePc(packageName: string, payload: unknown, token?: string): string;
  /** the next request to `endpoint` gets `fault` (queued in order) */
  faultNext(endpoint: 'token' | 'decode' | 'recall', fault: Fault): void;
  /** every access token issued so far stops working (as on revocation) */
  revokeTokens(): void;
  /** holds decodes and recall writes until `release`; `arrived(n)` resolves once n of them are held */
  gate(): { arrived(n: number): Promise<void>; release(): void };
  /** what the last token request's assertion said (for tests of the grant itself) */
  lastAssertion?: { header: Record<string, unknown>; claims: Record<string, unknown> };
  close(): Promise<void>;
}

const GOOGLE_ERRORS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

/**
 * Starts the fake.
 * @param options the accounts it knows (by email) and the clock it judges assertions by
 */
export async function startFakeGoogle(options: {
  accounts: TestServiceAccount[];
  now?: () => number;
}): Promise<FakeGoogle> {
  const now = options.now ?? Date.now;
  const accounts = new Map(options.accounts.map((a) => [a.account.clientEmail, a.publicKey]));
  const integrityTokens = new Map<string, { packageName: string; payload: unknown }>();
  const pcTokens = new Map<string, { packageName: string; payload: unknown }>();
  const accessTokens = new Map<string, number>(); // token -> expiry (ms)
  const faults: Record<'token' | 'decode' | 'recall', Fault[]> = {
    token: [],
    decode: [],
    recall: [],
  };
  let gate: { held: (() => void)[]; waiters: { n: number; resolve: () => void }[] } | null = null;

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent)
        send(res, 500, { error: { code: 500, status: 'INTERNAL', message: 'fake failed' } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const fake: FakeGoogle = {
    oauthUrl: `${base}/token`,
    playIntegrityUrl: base,
    counts: { token: 0, decode: 0 },
    recallRequests: 0,
    recallWrites: [],
    expiresIn: 3599,
    issue(packageName, payload) {
      const token = `fake-standard-${randomBytes(24).toString('base64url')}`;
      integrityTokens.set(token, { packageName, payload });
      return token;
    },
    issuePc(packageName, payload, token = `fake-pc-${randomBytes(24).toString('base64url')}`) {
      pcTokens.set(token, { packageName, payload });
      return token;
    },
    faultNext(endpoint, fault) {
      faults[endpoint].push(fault);
    },
    revokeTokens() {
      accessTokens.clear();
    },
    gate() {
      const g = { held: [] as (() => void)[], waiters: [] as { n: number; resolve: () => void }[] };
      gate = g;
      return {
        arrived: (n) =>
          new Promise<void>((resolve) =>
            g.held.length >= n ? resolve() : g.waiters.push({ n, resolve }),
          ),
        release: () => {
          if (gate === g) gate = null;
          for (const go of g.held.splice(0)) go();
        },
      };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const body = await readBody(req);
    const url = new URL(req.url ?? '/', base);
    if (req.method === 'POST' && url.pathname === '/token') {
      fake.counts.token += 1;
      if (await applyFault('token', res)) return;
      return tokenEndpoint(body, res);
    }
    const match = /^\/v1\/([^/:]+):(decodeIntegrityToken|decodePcIntegrityToken)$/.exec(
      url.pathname,
    );
    if (req.method === 'POST' && match) {
      fake.counts.decode += 1;
      await held();
      if (await applyFault('decode', res, body)) return;
      const pc = match[2] === 'decodePcIntegrityToken';
      return decodeEndpoint(decodeURIComponent(match[1]!), req, body, res, pc);
    }
    const recall = /^\/v1\/([^/:]+)\/deviceRecall:write$/.exec(url.pathname);
    if (req.method === 'POST' && recall) {
      fake.recallRequests += 1;
      await held();
      if (await applyFault('recall', res, body)) return;
      return recallEndpoint(decodeURIComponent(recall[1]!), req, body, res);
    }
    send(res, 404, { error: { code: 404, status: 'NOT_FOUND', message: 'no such endpoint' } });
  }

  /** waits while a gate is up (decodes and recall writes alike) */
  async function held() {
    if (!gate) return;
    const g = gate;
    await new Promise<void>((resolve) => {
      g.held.push(resolve);
      for (const w of g.waiters.filter((w) => g.held.length >= w.n)) w.resolve();
    });
  }

  /** true when the fault answered (or will never answer) */
  async function applyFault(
    endpoint: 'token' | 'decode' | 'recall',
    res: ServerResponse,
    body = '',
  ): Promise<boolean> {
    const fault = faults[endpoint].shift();
    if (!fault) return false;
    if ('hang' in fault) return true;
    if ('delayMs' in fault) {
      await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
      return false;
    }
    const status = GOOGLE_ERRORS[fault.status] ?? 'UNKNOWN';
    if (endpoint === 'token')
      send(res, fault.status, {
        error: fault.status === 400 ? 'invalid_grant' : status.toLowerCase(),
        error_description: 'injected fault',
      });
    else
      send(res, fault.status, {
        error: {
          code: fault.status,
          message: fault.echo ? `injected fault for ${body}` : 'injected fault',
          status,
        },
      });
    return true;
  }

  async function tokenEndpoint(body: string, res: ServerResponse) {
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== JWT_BEARER_GRANT)
      return send(res, 400, { error: 'unsupported_grant_type' });
    const assertion = form.get('assertion') ?? '';
    const refuse = (why: string) =>
      send(res, 400, { error: 'invalid_grant', error_description: why });
    let claims: Record<string, unknown>;
    let header: Record<string, unknown>;
    try {
      const [headerPart] = assertion.split('.');
      const iss = JSON.parse(
        Buffer.from(assertion.split('.')[1] ?? '', 'base64url').toString(),
      ) as { iss?: unknown };
      const publicKey = typeof iss.iss === 'string' ? accounts.get(iss.iss) : undefined;
      if (!publicKey) return refuse('Invalid issuer: unknown service account');
      const verified = await jwtVerify(assertion, publicKey, {
        algorithms: ['RS256'],
        audience: fake.oauthUrl,
        currentDate: new Date(now()),
        requiredClaims: ['iss', 'aud', 'iat', 'exp', 'scope'],
      });
      claims = verified.payload as Record<string, unknown>;
      header = JSON.parse(Buffer.from(headerPart ?? '', 'base64url').toString()) as Record<
        string,
        unknown
      >;
    } catch (err) {
      return refuse(`Invalid JWT: ${(err as Error).message}`);
    }
    if (claims.scope !== PLAY_INTEGRITY_SCOPE) return refuse('Invalid scope');
    const iat = claims.iat as number;
    const exp = claims.exp as number;
    if (exp - iat > 3600 || iat > now() / 1000 + 60)
      return refuse(
        'Invalid JWT: iat and exp must be at most an hour apart, iat not in the future',
      );
    fake.lastAssertion = { header, claims };
    const accessToken = `ya29.fake-${randomBytes(16).toString('hex')}`;
    accessTokens.set(accessToken, now() + fake.expiresIn * 1000);
    send(res, 200, { access_token: accessToken, expires_in: fake.expiresIn, token_type: 'Bearer' });
  }

  /** false (having answered 401) when the bearer token is not a live access token */
  function authorized(req: IncomingMessage, res: ServerResponse): boolean {
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    const expiry = bearer ? accessTokens.get(bearer) : undefined;
    if (expiry !== undefined && expiry > now()) return true;
    send(res, 401, {
      error: {
        code: 401,
        message: 'Request had invalid authentication credentials.',
        status: 'UNAUTHENTICATED',
      },
    });
    return false;
  }

  function recallEndpoint(
    packageName: string,
    req: IncomingMessage,
    body: string,
    res: ServerResponse,
  ) {
    if (!authorized(req, res)) return;
    let request: { integrityToken?: unknown; newValues?: unknown } = {};
    try {
      request = JSON.parse(body) as typeof request;
    } catch {
      // answered below as a malformed request
    }
    const values = request.newValues as Record<string, unknown> | undefined;
    const names = ['bitFirst', 'bitSecond', 'bitThird'];
    const wellFormed =
      typeof request.integrityToken === 'string' &&
      request.integrityToken.length > 0 &&
      typeof values === 'object' &&
      values !== null &&
      Object.keys(values).length > 0 &&
      Object.entries(values).every(([k, v]) => names.includes(k) && typeof v === 'boolean');
    if (!wellFormed)
      return send(res, 400, {
        error: { code: 400, message: 'Invalid device recall request.', status: 'INVALID_ARGUMENT' },
      });
    fake.recallWrites.push({
      packageName,
      integrityToken: request.integrityToken as string,
      newValues: values as Record<string, boolean>,
    });
    send(res, 200, {});
  }

  function decodeEndpoint(
    packageName: string,
    req: IncomingMessage,
    body: string,
    res: ServerResponse,
    pc = false,
  ) {
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    const expiry = bearer ? accessTokens.get(bearer) : undefined;
    if (expiry === undefined || expiry <= now()) {
      return send(res, 401, {
        error: {
          code: 401,
          message: 'Request had invalid authentication credentials.',
          status: 'UNAUTHENTICATED',
        },
      });
    }
    let token: unknown;
    try {
      // DecodePcIntegrityTokenRequest is { integrityToken } (Google's discovery document)
      const request = JSON.parse(body) as { integrity_token?: unknown; integrityToken?: unknown };
      token = pc ? request.integrityToken : request.integrity_token;
    } catch {
      token = undefined;
    }
    const issued =
      typeof token === 'string' ? (pc ? pcTokens : integrityTokens).get(token) : undefined;
    if (!issued || issued.packageName !== packageName) {
      return send(res, 400, {
        error: {
          code: 400,
          message: 'Integrity token cannot be decoded due to invalid arguments.',
          status: 'INVALID_ARGUMENT',
        },
      });
    }
    send(res, 200, { tokenPayloadExternal: issued.payload });
  }

  return fake;
}

function send(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
