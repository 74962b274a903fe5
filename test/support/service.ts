/**
 * The service wired as `startServer` wires it (real repositories, real argon2 keys, the real
 * authenticator), minus the socket: tests drive it with `app.request(...)`. The log goes to an
 * array (one parsed object per line, plus the raw text) and the clock is injectable.
 */
import type { TokenCapturer } from '../../src/server/tokenCapture.js';
import { createIssuerVelocityRepository } from '../../src/db/issuerVelocity.js';
import { createIssuerBlockRepository } from '../../src/db/issuerBlocks.js';
import { allowlistedApp } from '../../src/server/allowlistedApp.js';
import { randomBytes, type X509Certificate } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { apiKeyCheck, generateApiKey, hashApiKey } from '../../src/core/apiKeys.js';
import { buildVerifiers } from '../../src/core/verifiers.js';
import { verifyToken, type VerifyInput } from '../../src/core/verify.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createDeviceVelocityRepository } from '../../src/db/deviceVelocity.js';
import {
  createRevocationRepository,
  createRevocationSource,
} from '../../src/db/androidRevocations.js';
import type { AndroidRootKey } from '../../src/core/androidKey/trustRoots.js';
import type { IntegrityTokenDecoder, KeyMode } from '../../src/core/ports.js';
import type { VerifyOutcome } from '../../src/core/outcome.js';
import { boundedDb, type DatabaseHandle } from '../../src/db/database.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { migrationStatus } from '../../src/db/migrate.js';
import { createSessionRepository } from '../../src/db/sessions.js';
import { createConsumedResultRepository } from '../../src/db/consumedResults.js';
import { createResultConsumer } from '../../src/server/resultConsumer.js';
import {
  createApiKeyAuthenticator,
  type AuthenticatorOptions,
} from '../../src/server/apiKeyAuthenticator.js';
import { createApp, type AppDeps } from '../../src/server/app.js';
import { loggerOptions } from '../../src/server/logger.js';
import { createMetrics } from '../../src/server/metrics.js';
import { fakeVerify } from './tokens.js';
import { TEST_SECRETS } from './secrets.js';

export interface LogCapture {
  lines: Record<string, unknown>[];
  raw: string[];
  /** the request lines only (msg "request") */
  requests(): Record<string, unknown>[];
  last(): Record<string, unknown>;
  clear(): void;
}

/** The service's pino options minus redaction (the app itself must not log secrets), into arrays. */
export function captureLogger(level = 'info') {
  const capture: LogCapture = {
    lines: [],
    raw: [],
    requests: () => capture.lines.filter((l) => l.msg === 'request'),
    last: () => capture.requests().at(-1)!,
    clear: () => {
      capture.lines.length = 0;
      capture.raw.length = 0;
    },
  };
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) {
        capture.raw.push(line);
        capture.lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const { redact: _belt, ...options } = loggerOptions(level);
  const logger = pino(options, pino.multistream([{ stream, level: level as pino.Level }]));
  // multistream writes synchronously to a Writable: the line is there when the response is
  return { logger, capture };
}

/** Issues an API key straight into the database (what `attest keys create` does). */
export async function issueKey(
  db: DatabaseHandle,
  options: {
    name?: string;
    expiresInSeconds?: number | null;
    prefix?: string;
    secretWith?: RegExp;
    mode?: KeyMode;
    resultTokens?: boolean;
    /** rejections say why (`keys create --rejection-details`) */
    rejectionDetails?: boolean;
    /** the key's scope (`keys create --apps`); absent: every allowlisted app */
    apps?: readonly string[];
    /** store the key's pre-check, as `attest keys create` does (default: none, as a key made before pre-checks) */
    precheck?: boolean;
  } = {},
) {
  let generated = generateApiKey(options.prefix ?? 'attest');
  // some tests want a secret with `_` or `-` in it
  while (
    options.secretWith &&
    !options.secretWith.test(generated.key.slice(generated.key.indexOf('_') + 17))
  )
    generated = generateApiKey(options.prefix ?? 'attest');
  const row = await createApiKeyRepository(db.db).insert({
    id: generated.id,
    name: options.name ?? 'test',
    hash: await hashApiKey(generated.key),
    precheck: options.precheck ? apiKeyCheck(generated.key) : null,
    expiresInSeconds: options.expiresInSeconds ?? null,
    mode: options.mode ?? 'live',
    resultTokens: options.resultTokens ?? false,
    ...(options.rejectionDetails ? { rejectionDetails: true } : {}),
    ...(options.apps ? { apps: options.apps } : {}),
  });
  return { id: row.id, key: generated.key };
}

export interface ServiceOptions {
  verify?: AppDeps['verify'];
  testKeys?: boolean;
  sessionTtlSeconds?: number;
  requestDeadlineMs?: number;
  /**
   * how long one statement may wait (the server's default is 250 ms); tests on this shared,
   * loaded machine default to 2 s, so a cold connection is no outage; the chaos tests set 250
   */
  databaseWaitMs?: number;
  /** whether the database takes writes (readiness) */
  writeHealth?: AppDeps['writeHealth'];
  auth?: Partial<AuthenticatorOptions>;
  ready?: () => Promise<boolean>;
  sessions?: AppDeps['sessions'];
  onBackendTimeout?: (cause: unknown) => void;
  breaker?: AppDeps['breaker'];
  resultTokens?: AppDeps['resultTokens'];
  testResultTokens?: AppDeps['testResultTokens'];
  /** the clock consumes check a result token's exp against */
  now?: () => Date;
  deviceRecall?: AppDeps['deviceRecall'];
  stats?: AppDeps['stats'];
  allowlisted?: AppDeps['allowlisted'];
  clientAddress?: AppDeps['clientAddress'];
}

/** The app over `db` with the fake apple verifier (unless `verify` is given). */
export function createTestService(db: DatabaseHandle, options: ServiceOptions = {}) {
  const { logger, capture } = captureLogger();
  // as wireApp: each statement of a request waits at most the wait deadline
  const bounded = boundedDb(db, options.databaseWaitMs ?? 2000);
  const sessions = createSessionRepository(bounded);
  const auth = createApiKeyAuthenticator({
    lookup: createApiKeyRepository(bounded),
    ...options.auth,
  });
  const metrics = createMetrics({ sessionCounts: () => sessions.counts() });
  const app = createApp({
    logger,
    auth,
    sessions: options.sessions ?? sessions,
    verify: options.verify ?? fakeVerify(),
    metrics,
    ready: options.ready ?? (async () => (await migrationStatus(bounded)).every((m) => m.applied)),
    sessionTtlSeconds: options.sessionTtlSeconds ?? 300,
    ...(options.requestDeadlineMs ? { requestDeadlineMs: options.requestDeadlineMs } : {}),
    ...(options.onBackendTimeout ? { onBackendTimeout: options.onBackendTimeout } : {}),
    ...(options.writeHealth ? { writeHealth: options.writeHealth } : {}),
    ...(options.breaker ? { breaker: options.breaker } : {}),
    ...(options.clientAddress ? { clientAddress: options.clientAddress } : {}),
    ...(options.testKeys !== undefined ? { testKeys: options.testKeys } : {}),
    ...(options.resultTokens ? { resultTokens: options.resultTokens } : {}),
    ...(options.testResultTokens ? { testResultTokens: options.testResultTokens } : {}),
    // consumes as startServer wires them: whenever there is a signer
    ...(options.resultTokens
      ? {
          resultConsumer: createResultConsumer({
            live: options.resultTokens,
            test: options.testResultTokens,
            consumed: createConsumedResultRepository(bounded),
            ...(options.now ? { now: options.now } : {}),
          }),
        }
      : {}),
    ...(options.deviceRecall ? { deviceRecall: options.deviceRecall } : {}),
    ...(options.stats ? { stats: options.stats } : {}),
    ...(options.allowlisted ? { allowlisted: options.allowlisted } : {}),
  });
  return { app, auth, logs: capture, sessions, metrics };
}

const BASE = 'http://attest.test';

/** POST init with a key. */
export async function init(
  app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> },
  key: string | undefined,
) {
  const res = await app.request(`${BASE}/api/v1/attestation/init`, {
    method: 'POST',
    headers: { ...(key !== undefined ? { 'X-Api-Key': key } : {}), Accept: 'application/json' },
  });
  return {
    res,
    body: (await res.json()) as {
      sessionReference: string;
      serverNonce: string;
      expiresAtUtc: string;
      statusCode: number;
    },
  };
}

/** POST verify with a JSON body (an object is stringified; a string is sent as is). */
export function verify(
  app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> },
  key: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return app.request(`${BASE}/api/v1/attestation/verify`, {
    method: 'POST',
    headers: {
      ...(key !== undefined ? { 'X-Api-Key': key } : {}),
      'Content-Type': 'application/json',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

export { BASE };

/**
 * The app with the real platform verifiers over `db` (as `startServer` wires them), at a fixed
 * instant. The allowlist is re-read on every request so edits in a test apply at once.
 */
export function createPlatformService(
  db: DatabaseHandle,
  options: {
    /** the verifier's clock: an instant, or a function read at each verify */
    now: Date | (() => Date);
    appleRoots: readonly X509Certificate[];
    googleDecoder?: IntegrityTokenDecoder;
    /** android-key root keys; without them android-key tokens are service_unsupported */
    androidRoots?: readonly AndroidRootKey[];
    auth?: Partial<AuthenticatorOptions>;
    /** counts each verify (the app of a failure named as the server does: allowlistedApp) */
    stats?: AppDeps['stats'];
    /** signs the result tokens of API keys that have them on */
    resultTokens?: AppDeps['resultTokens'];
    /** keeps tokens for replay, as wireApp does when ATTEST_CAPTURE is on */
    capture?: Pick<TokenCapturer, 'capture'>;
  },
) {
  const allowlist = createCachedAllowlist(createAllowlistRepository(db.db, TEST_SECRETS), {
    ttlMs: 0,
  });
  // one set of verifiers per API key mode, as serve has (both trust the same roots here)
  const verifiersOf = (mode: KeyMode) =>
    buildVerifiers({
      allowlist,
      appleKeys: createAppleKeyRepository(db.db),
      appleRoots: options.appleRoots,
      mode,
      velocity: createDeviceVelocityRepository(db.db),
      ...(options.googleDecoder ? { googleDecoder: options.googleDecoder } : {}),
      ...(options.androidRoots
        ? {
            android: {
              keys: createAndroidKeyRepository(db.db),
              roots: options.androidRoots,
              issuers: createIssuerVelocityRepository(db.db),
              blockedIssuers: () => createIssuerBlockRepository(db.db).serials(),
              revocations: createRevocationSource(createRevocationRepository(db.db), { ttlMs: 0 })
                .list,
            },
          }
        : {}),
    });
  const verifiers = { live: verifiersOf('live'), test: verifiersOf('test') };
  return createTestService(db, {
    ...(options.auth ? { auth: options.auth } : {}),
    ...(options.stats ? { stats: options.stats } : {}),
    ...(options.resultTokens ? { resultTokens: options.resultTokens } : {}),
    allowlisted: allowlistedApp(allowlist),
    verify: async (input, mode, apiKeyId) => {
      const at = typeof options.now === 'function' ? options.now() : options.now;
      const outcome = await verifyToken(input, { now: () => at, verifiers: verifiers[mode] });
      options.capture?.capture({ input, mode, apiKeyId, at, outcome });
      return outcome;
    },
  });
}

type RequestApp = { request: (url: string, init?: RequestInit) => Response | Promise<Response> };
/** makes the token (bytes, or already base64) over the final nonce */
type BuildToken = (finalNonce: Buffer) => Promise<Uint8Array | string> | Uint8Array | string;
const tokenText = (token: Uint8Array | string) =>
  typeof token === 'string' ? token : Buffer.from(token).toString('base64');

/** The session approach (docs/http-api.md): init, the token over serverNonce (|| deviceNonce), verify. */
export async function verifyInSession(
  app: RequestApp,
  key: string,
  build: BuildToken,
  deviceNonce?: Buffer,
) {
  const { body } = await init(app, key);
  const serverNonce = Buffer.from(body.serverNonce, 'base64');
  const finalNonce = deviceNonce ? Buffer.concat([serverNonce, deviceNonce]) : serverNonce;
  const res = await verify(app, key, {
    attestationToken: tokenText(await build(finalNonce)),
    sessionReference: body.sessionReference,
    ...(deviceNonce ? { deviceNonce: deviceNonce.toString('base64') } : {}),
  });
  return { res, sessionReference: body.sessionReference };
}

/** The sessionless approach: the RP's own nonce is the final nonce. */
export async function verifySessionless(
  app: RequestApp,
  key: string,
  build: BuildToken,
  nonce: Buffer = randomBytes(48),
) {
  return verify(app, key, {
    attestationToken: tokenText(await build(nonce)),
    expectedNonce: nonce.toString('base64'),
  });
}
