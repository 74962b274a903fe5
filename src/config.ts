import { parseWorkers, WORKERS_RULE } from './workers.js';
import * as capture from './captureBound.js';
import { Fault } from './core/fault.js';
import { otelConfig, type OtelConfig } from './otelConfig.js';
import { z } from 'zod';
import { parseDuration } from './core/duration.js';
import { decodeBase64 } from './core/base64.js';
import { PRINTABLE_NAME, PRINTABLE_NAME_RULE } from './core/printableName.js';
import { postgresUrlProblem } from './db/postgresUrl.js';
import { trustedProxiesProblem, trustedProxyList } from './trustedProxiesProblem.js';

/** Everything attest reads from its environment, in one place. */
export interface Config {
  databaseUrl: string | undefined;
  dataDir: string;
  /** ATTEST_TRUSTED_PROXIES: the proxies whose forwarded client address counts (clientAddress.ts) */
  trustedProxies?: string[];
  port: number;
  host: string;
  sessionTtlSeconds: number;
  /** expired and consumed sessions older than this are deleted by `serve` */
  sessionRetentionSeconds: number;
  /** when set, /metrics is served on this port (and not on the API's) */
  metricsPort: number | undefined;
  metricsHost: string;
  appleRootCaPath: string | undefined;
  apiKeyPrefix: string;
  logLevel: string;
  logFile: string | undefined;
  /** seconds a database connection may take to be ready (default 10) */
  dbConnectTimeoutSeconds?: number;
  /**
   * ATTEST_CHANGE_FEED: how changes made by other processes arrive (`notify`: LISTEN; `poll`: the
   * attest_changes table every second; `auto`: NOTIFY unless a probe shows a pooler swallowing it)
   */
  changeFeed?: 'notify' | 'poll' | 'auto';
  /** where the embedded database's private socket folder goes (XDG_RUNTIME_DIR; else the OS temporary folder) */
  socketDir?: string | undefined;
  /** who makes administrative changes (the audit trail); unset: the OS user@host */
  actor?: string | undefined;
  /** ATTEST_MASTER_KEY: the master key itself, base64 (secret: never log it) */
  masterKey: string | undefined;
  masterKeyFile: string | undefined;
  /** test-mode API keys accepted (ATTEST_TEST_KEYS, `serve --no-test-keys`); off: they answer 403 */
  testKeys: boolean;
  /** Google's OAuth token endpoint (standard Play Integrity requests) */
  googleOauthUrl: string;
  /** base URL of the Play Integrity API (decodeIntegrityToken) */
  googlePlayIntegrityUrl: string;
  /** bound on one decode through Google, access token included */
  googleTimeoutMs: number;
  /** ATTEST_DB_WAIT_TIMEOUT_MS: how long one statement of a request may wait for its answer (default 250) */
  dbWaitTimeoutMs: number;
  /** decodes through Google in flight at once; beyond it verify answers 503 */
  googleMaxInFlight: number;
  /** ATTEST_ISSUER: the `iss` of result tokens (an https URL); unset: no API key may use result tokens */
  issuer?: string | undefined;
  /** ATTEST_RESULT_TOKEN_TTL: lifetime of a result token in seconds (default 300, at most 3600) */
  resultTokenTtlSeconds?: number;
  /** ATTEST_APPLE_RECEIPT_ROOT_CA: replaces Apple Root CA - G3 for App Attest receipts (tests) */
  appleReceiptRootCaPath?: string | undefined;
  /** Apple's App Attest data endpoints, where receipts are refreshed */
  appleReceiptUrlDevelopment: string;
  appleReceiptUrlProduction: string;
  /** bound on one receipt refresh at Apple */
  appleReceiptTimeoutMs: number;
  /** ATTEST_ANDROID_ROOT_CA: a PEM file of root certificates whose keys replace Google's (tests) */
  androidRootCaPath?: string | undefined;
  /** where `serve` refreshes Google's attestation status list from; null = never (`off`) */
  androidRevocationUrl?: string | null;
  /** how often `serve` refreshes it */
  androidRevocationIntervalSeconds?: number;
  /** ATTEST_STATS_RETENTION: verification counts (`attest stats`) older than this are deleted (default 35 days) */
  statsRetentionSeconds?: number;
  /**
   * ATTEST_TEST_RETENTION: what test-mode API keys leave (registrations, counters, android-key
   * assertions, device counts, statistics) is deleted this long after it was last written
   * (default 30 days); live rows are never touched by it
   */
  testRetentionSeconds?: number;
  /** ATTEST_STATS: false (`off`) counts nothing for `attest stats` (the /metrics counters still count) */
  stats?: boolean;
  /** OpenTelemetry export (the standard OTEL_* variables); absent: nothing is exported */
  otel?: OtelConfig | undefined;
  /**
   * ATTEST_WORKERS, `serve --workers`: processes serving HTTP (`auto`: one per core, read here);
   * 1 (the default) serves from the one process, more start a cluster (src/server/startCluster.ts)
   */
  workers?: number;
  /** ATTEST_CAPTURE, _MAX, _RETENTION: the tokens kept for replay (src/captureBound.ts) */
  capture?: { mode: capture.CaptureMode; max: capture.CaptureMax; retentionSeconds: number };
}

/**
 * A statement on the request path that has no answer after this long (of time the event loop
 * could have read it in) is given up: the request answers 500 with Retry-After, the breaker probes.
 */
export const DATABASE_WAIT_MS = 250;

/** ATTEST_STATS_RETENTION when unset: 35 days. */
export const DEFAULT_STATS_RETENTION_SECONDS = 35 * 86_400;

/** ATTEST_TEST_RETENTION when unset: 30 days. */
export const DEFAULT_TEST_RETENTION_SECONDS = 30 * 86_400;

/** Google's Android attestation status list. */
export const ANDROID_REVOCATION_URL = 'https://android.googleapis.com/attestation/status';

/** Where `serve` refreshes the status list from (a Config built in code may leave it out), or null: never. */
export function androidRevocationUrl(config: Pick<Config, 'androidRevocationUrl'>): string | null {
  return config.androidRevocationUrl === undefined
    ? ANDROID_REVOCATION_URL
    : config.androidRevocationUrl;
}

/**
 * A configuration value that cannot be used; the message says which and what to do. The CLI adds
 * "fix it and run again" unless `fixIt: false` (a master key file's message says it already).
 */
export class ConfigError extends Fault {
  override readonly name = 'ConfigError';
  constructor(message: string, { fixIt = true }: { fixIt?: boolean } = {}) {
    super('config', message, {
      exit: { code: 2, message: fixIt ? `${message}; fix it and run again` : message },
    });
  }
}

/** An actor name (see PRINTABLE_NAME). */
export const ACTOR = PRINTABLE_NAME;

/** A variable `parse` reads (null: refused, in WANTED's words), with its default. */
function parsedVariable<T>(fallback: string, parse: (text: string) => T | null) {
  return z
    .string()
    .default(fallback)
    .transform((text, ctx) => parse(text) ?? (ctx.addIssue({ code: 'custom' }), z.NEVER));
}
/** A duration variable (`7d`, `1h`) in seconds, with its default. */
const durationVariable = (fallback: string) => parsedVariable(fallback, parseDuration);

const env = z.object({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  ATTEST_DATA_DIR: z.string().min(1).default('./.attest'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  ATTEST_TRUSTED_PROXIES: z
    .string()
    .refine((v) => !trustedProxiesProblem(v))
    .optional(),
  ATTEST_SESSION_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  ATTEST_SESSION_RETENTION: z
    .string()
    .default('1h')
    .transform(
      (text, ctx) =>
        parseDuration(text) ??
        (ctx.addIssue({
          code: 'custom',
          message: `must be a duration such as 30m, 1h or 7d, got "${text}"`,
        }),
        z.NEVER),
    ),
  ATTEST_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  ATTEST_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  ATTEST_APPLE_ROOT_CA: z.string().min(1).optional(),
  ATTEST_API_KEY_PREFIX: z
    .string()
    .regex(
      /^[a-z][a-z0-9]{0,15}$/,
      'must be 1-16 lowercase letters or digits, starting with a letter',
    )
    .default('attest'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ATTEST_LOG_FILE: z.string().min(1).optional(),
  ATTEST_DB_CONNECT_TIMEOUT: z.coerce
    .number()
    .int('must be whole seconds')
    .min(1)
    .max(600)
    .default(10),
  ATTEST_CHANGE_FEED: z.enum(['notify', 'poll', 'auto']).default('auto'),
  XDG_RUNTIME_DIR: z.string().min(1).optional(),
  ATTEST_ACTOR: z.string().regex(ACTOR, 'bad actor').optional(),
  ATTEST_MASTER_KEY: z
    .string()
    .refine(
      (v) => decodeBase64(v.trim())?.length === 32,
      'must be 32 bytes in base64 (make one with: openssl rand -base64 32)',
    )
    .optional(),
  ATTEST_MASTER_KEY_FILE: z.string().min(1).optional(),
  ATTEST_TEST_KEYS: z.enum(['on', 'off'], 'must be "on" or "off"').default('on'),
  ATTEST_GOOGLE_OAUTH_URL: z
    .string()
    .regex(/^https?:\/\/\S+$/, 'must be an http(s) URL')
    .default('https://oauth2.googleapis.com/token'),
  ATTEST_GOOGLE_PLAY_INTEGRITY_URL: z
    .string()
    .regex(/^https?:\/\/\S+$/, 'must be an http(s) URL')
    .default('https://playintegrity.googleapis.com'),
  ATTEST_GOOGLE_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(3000),
  ATTEST_DB_WAIT_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(DATABASE_WAIT_MS),
  ATTEST_GOOGLE_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(100_000).default(64),
  ATTEST_ISSUER: z.string().refine(isIssuer).optional(),
  ATTEST_RESULT_TOKEN_TTL: z
    .string()
    .default('300')
    .transform((text, ctx) => {
      // whole seconds, or a duration with its unit (5m)
      const seconds = /^\d{1,9}$/.test(text.trim()) ? Number(text.trim()) : parseDuration(text);
      if (seconds === null || seconds < 1 || seconds > MAX_RESULT_TOKEN_TTL_SECONDS) {
        ctx.addIssue({ code: 'custom', message: 'out of range' });
        return z.NEVER;
      }
      return seconds;
    }),
  ATTEST_APPLE_RECEIPT_ROOT_CA: z.string().min(1).optional(),
  ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT: z
    .string()
    .regex(/^https?:\/\/\S+$/, 'must be an http(s) URL')
    .default('https://data-development.appattest.apple.com/v1/attestationData'),
  ATTEST_APPLE_RECEIPT_URL_PRODUCTION: z
    .string()
    .regex(/^https?:\/\/\S+$/, 'must be an http(s) URL')
    .default('https://data.appattest.apple.com/v1/attestationData'),
  ATTEST_APPLE_RECEIPT_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  ATTEST_ANDROID_ROOT_CA: z.string().min(1).optional(),
  ATTEST_ANDROID_REVOCATION_URL: z
    .string()
    .regex(/^(off|https?:\/\/\S+)$/, 'must be an http(s) URL or off')
    .default(ANDROID_REVOCATION_URL),
  ATTEST_ANDROID_REVOCATION_INTERVAL: durationVariable('1h'),
  ATTEST_STATS_RETENTION: durationVariable('35d'),
  ATTEST_TEST_RETENTION: durationVariable('30d'),
  ATTEST_STATS: z.enum(['on', 'off'], 'must be "on" or "off"').default('on'),
  ATTEST_WORKERS: parsedVariable('1', (text) => parseWorkers(text)),
  ATTEST_CAPTURE: z.enum(capture.CAPTURE_MODES).default('off'),
  ATTEST_CAPTURE_MAX: parsedVariable(capture.DEFAULT_CAPTURE_MAX, capture.parseCaptureMax),
  ATTEST_CAPTURE_RETENTION: durationVariable('7d'), // DEFAULT_CAPTURE_RETENTION_SECONDS
  // OpenTelemetry's own variables (opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables)
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).default('false'),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .string()
    .regex(/^https?:\/\/\S+$/)
    .optional(),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: z
    .string()
    .regex(/^https?:\/\/\S+$/)
    .optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .string()
    .regex(/^https?:\/\/\S+$/)
    .optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.literal('http/json').optional(),
  OTEL_EXPORTER_OTLP_HEADERS: z
    .string()
    .regex(/^\s*[^=,\s]+\s*=[^,]*(,\s*[^=,\s]+\s*=[^,]*)*$/)
    .optional(),
  OTEL_METRICS_EXPORTER: z.enum(['otlp', 'none']).optional(),
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'none']).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(200).default('attest'),
  OTEL_METRIC_EXPORT_INTERVAL: z.coerce.number().int().min(1000).max(3_600_000).default(60_000),
});

/** What each variable takes, for the error message: the validator's own words name types, not values. */
const WANTED: Record<keyof z.infer<typeof env>, string> = {
  DATABASE_URL: 'must be a postgres:// or postgresql:// URL',
  ATTEST_DATA_DIR: 'must be the path of a folder',
  PORT: 'must be a port number from 0 to 65535',
  HOST: 'must be a host name or IP address to listen on',
  ATTEST_TRUSTED_PROXIES: 'must be IP addresses or CIDRs, comma-separated (10.0.0.0/8,::1)',
  ATTEST_SESSION_TTL_SECONDS: 'must be a whole number of seconds from 1 to 86400',
  ATTEST_APPLE_ROOT_CA: 'must be the path of a PEM file',
  ATTEST_API_KEY_PREFIX: 'must be 1 to 16 lowercase letters or digits, starting with a letter',
  LOG_LEVEL: 'must be one of fatal, error, warn, info, debug, trace, silent',
  ATTEST_LOG_FILE: 'must be the path of a file',
  ATTEST_ACTOR: PRINTABLE_NAME_RULE,
  ATTEST_DB_CONNECT_TIMEOUT: 'must be a whole number of seconds from 1 to 600',
  ATTEST_CHANGE_FEED: 'must be notify, poll or auto',
  XDG_RUNTIME_DIR: 'must be the path of a folder',
  ATTEST_SESSION_RETENTION: 'must be a duration such as 30m, 1h or 7d',
  ATTEST_METRICS_PORT: 'must be a port number from 0 to 65535',
  ATTEST_METRICS_HOST: 'must be a host name or IP address to listen on',
  ATTEST_MASTER_KEY: 'must be 32 bytes in base64 (make one with: openssl rand -base64 32)',
  ATTEST_MASTER_KEY_FILE: 'must be the path of a file holding the master key',
  ATTEST_TEST_KEYS: 'must be "on" or "off"',
  ATTEST_GOOGLE_OAUTH_URL: 'must be an http(s) URL',
  ATTEST_GOOGLE_PLAY_INTEGRITY_URL: 'must be an http(s) URL',
  ATTEST_GOOGLE_TIMEOUT_MS: 'must be a whole number of milliseconds from 100 to 60000',
  ATTEST_DB_WAIT_TIMEOUT_MS: 'must be a whole number of milliseconds from 50 to 60000',
  ATTEST_GOOGLE_MAX_IN_FLIGHT: 'must be a whole number from 1 to 100000',
  ATTEST_ISSUER:
    'must be an https URL (http on loopback only) without query, fragment or trailing slash, such as https://attest.example.com',
  ATTEST_RESULT_TOKEN_TTL:
    'must be a lifetime from 1 second to 1 hour: seconds (300) or a duration (5m, 1h)',
  ATTEST_APPLE_RECEIPT_ROOT_CA: 'must be the path of a PEM file',
  ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT: 'must be an http(s) URL',
  ATTEST_APPLE_RECEIPT_URL_PRODUCTION: 'must be an http(s) URL',
  ATTEST_APPLE_RECEIPT_TIMEOUT_MS: 'must be a whole number of milliseconds from 100 to 60000',
  ATTEST_ANDROID_ROOT_CA: 'must be the path of a PEM file',
  ATTEST_ANDROID_REVOCATION_URL: 'must be an http(s) URL, or off',
  ATTEST_ANDROID_REVOCATION_INTERVAL: 'must be a duration such as 30m, 1h or 1d',
  ATTEST_STATS_RETENTION: 'must be a duration such as 7d, 35d or 12w',
  ATTEST_TEST_RETENTION: 'must be a duration such as 1h, 7d or 30d',
  ATTEST_STATS: 'must be "on" or "off"',
  ATTEST_WORKERS: `must be ${WORKERS_RULE}`,
  ATTEST_CAPTURE: 'must be off, rejected or all',
  ATTEST_CAPTURE_MAX: capture.CAPTURE_MAX_RULE,
  ATTEST_CAPTURE_RETENTION: 'must be a duration such as 1h, 7d or 30d',
  OTEL_SDK_DISABLED: 'must be "true" or "false"',
  OTEL_EXPORTER_OTLP_ENDPOINT:
    "must be an http(s) URL (the collector's OTLP/HTTP port, e.g. http://127.0.0.1:4318)",
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'must be an http(s) URL',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'must be an http(s) URL',
  OTEL_EXPORTER_OTLP_PROTOCOL:
    "must be http/json: attest exports OTLP over HTTP as JSON (every collector's OTLP/HTTP receiver takes it)",
  OTEL_EXPORTER_OTLP_HEADERS: 'must be key=value pairs separated by commas',
  OTEL_METRICS_EXPORTER: 'must be "otlp" or "none"',
  OTEL_TRACES_EXPORTER: 'must be "otlp" or "none"',
  OTEL_SERVICE_NAME: 'must be a name of 1 to 200 characters',
  OTEL_METRIC_EXPORT_INTERVAL: 'must be a whole number of milliseconds from 1000 to 3600000',
};

/** The longest a result token may live (ATTEST_RESULT_TOKEN_TTL). */
export const MAX_RESULT_TOKEN_TTL_SECONDS = 3600;
/** ATTEST_RESULT_TOKEN_TTL when unset. */
export const DEFAULT_RESULT_TOKEN_TTL_SECONDS = 300;

/**
 * An issuer for result tokens: an https URL with a host, no credentials, query, fragment or
 * trailing slash, so that `iss` and `<issuer>/.well-known/...` are spelt one way only. http is
 * allowed on loopback only (localhost, 127.0.0.0/8, [::1]): local development, where nothing
 * between the verifier and the service can change the keys it fetches.
 */
export function isIssuer(text: string): boolean {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return false;
  }
  return (
    (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))) &&
    url.hostname !== '' &&
    url.username === '' &&
    url.password === '' &&
    !text.includes('?') &&
    !text.includes('#') &&
    !text.endsWith('/') &&
    !/\s/.test(text)
  );
}

/** localhost, 127.0.0.0/8 or [::1], as URL.hostname spells them. */
export function isLoopbackHost(hostname: string): boolean {
  return (
    hostname === 'localhost' ||
    hostname === '[::1]' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
  );
}

/** Values never repeated in a message: a database URL may hold a password. */
const SECRET_VALUES = new Set(['DATABASE_URL', 'ATTEST_MASTER_KEY', 'OTEL_EXPORTER_OTLP_HEADERS']);

/**
 * Reads the configuration: flags win over environment variables, which win over defaults.
 * Empty environment variables count as unset.
 */
export function loadConfig(
  flags: Partial<Config> = {},
  environment: NodeJS.ProcessEnv = process.env,
): Config {
  const present = Object.fromEntries(
    Object.entries(environment).filter(([, v]) => v !== undefined && v !== ''),
  );
  const parsed = env.safeParse(present);
  if (!parsed.success) {
    const name = String(parsed.error.issues[0]!.path[0]) as keyof typeof WANTED;
    const value = String(present[name]);
    const got = SECRET_VALUES.has(name)
      ? ''
      : `, got "${value.length > 40 ? `${value.slice(0, 40)}...` : value}"`;
    throw new ConfigError(`environment variable ${name} ${WANTED[name] ?? 'is not valid'}${got}`);
  }
  const e = parsed.data;
  const urlProblem = e.DATABASE_URL === undefined ? undefined : postgresUrlProblem(e.DATABASE_URL);
  if (urlProblem) throw new ConfigError(`environment variable DATABASE_URL ${urlProblem}`);
  if (e.ATTEST_MASTER_KEY !== undefined && e.ATTEST_MASTER_KEY_FILE !== undefined) {
    throw new ConfigError('set ATTEST_MASTER_KEY_FILE or ATTEST_MASTER_KEY, not both');
  }
  const config: Config = {
    databaseUrl: e.DATABASE_URL,
    dataDir: e.ATTEST_DATA_DIR,
    port: e.PORT,
    host: e.HOST,
    trustedProxies: trustedProxyList(e.ATTEST_TRUSTED_PROXIES ?? ''),
    sessionTtlSeconds: e.ATTEST_SESSION_TTL_SECONDS,
    sessionRetentionSeconds: e.ATTEST_SESSION_RETENTION,
    metricsPort: e.ATTEST_METRICS_PORT,
    metricsHost: e.ATTEST_METRICS_HOST,
    appleRootCaPath: e.ATTEST_APPLE_ROOT_CA,
    apiKeyPrefix: e.ATTEST_API_KEY_PREFIX,
    logLevel: e.LOG_LEVEL,
    logFile: e.ATTEST_LOG_FILE,
    dbConnectTimeoutSeconds: e.ATTEST_DB_CONNECT_TIMEOUT,
    changeFeed: e.ATTEST_CHANGE_FEED,
    socketDir: e.XDG_RUNTIME_DIR,
    actor: e.ATTEST_ACTOR,
    masterKey: e.ATTEST_MASTER_KEY,
    masterKeyFile: e.ATTEST_MASTER_KEY_FILE,
    testKeys: e.ATTEST_TEST_KEYS === 'on',
    googleOauthUrl: e.ATTEST_GOOGLE_OAUTH_URL,
    googlePlayIntegrityUrl: e.ATTEST_GOOGLE_PLAY_INTEGRITY_URL,
    googleTimeoutMs: e.ATTEST_GOOGLE_TIMEOUT_MS,
    dbWaitTimeoutMs: e.ATTEST_DB_WAIT_TIMEOUT_MS,
    googleMaxInFlight: e.ATTEST_GOOGLE_MAX_IN_FLIGHT,
    issuer: e.ATTEST_ISSUER,
    resultTokenTtlSeconds: e.ATTEST_RESULT_TOKEN_TTL,
    appleReceiptRootCaPath: e.ATTEST_APPLE_RECEIPT_ROOT_CA,
    appleReceiptUrlDevelopment: e.ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT,
    appleReceiptUrlProduction: e.ATTEST_APPLE_RECEIPT_URL_PRODUCTION,
    appleReceiptTimeoutMs: e.ATTEST_APPLE_RECEIPT_TIMEOUT_MS,
    androidRootCaPath: e.ATTEST_ANDROID_ROOT_CA,
    androidRevocationUrl:
      e.ATTEST_ANDROID_REVOCATION_URL === 'off' ? null : e.ATTEST_ANDROID_REVOCATION_URL,
    androidRevocationIntervalSeconds: e.ATTEST_ANDROID_REVOCATION_INTERVAL,
    statsRetentionSeconds: e.ATTEST_STATS_RETENTION,
    testRetentionSeconds: e.ATTEST_TEST_RETENTION,
    stats: e.ATTEST_STATS === 'on',
    workers: e.ATTEST_WORKERS,
    capture: {
      mode: e.ATTEST_CAPTURE,
      max: e.ATTEST_CAPTURE_MAX,
      retentionSeconds: e.ATTEST_CAPTURE_RETENTION,
    },
    otel: otelConfig(e),
  };
  for (const [k, v] of Object.entries(flags))
    if (v !== undefined) (config as unknown as Record<string, unknown>)[k] = v;
  return config;
}

/**
 * Whether to colour terminal output: only on a terminal, and never when NO_COLOR is set to
 * anything but the empty string (no-color.org).
 * @param isTTY - the output stream is a terminal
 */
export function colorWanted(
  isTTY: boolean | undefined,
  environment: NodeJS.ProcessEnv = process.env,
): boolean {
  return isTTY === true && (environment.NO_COLOR ?? '') === '';
}
