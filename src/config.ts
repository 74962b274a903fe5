import { z } from 'zod';

/** Everything attest reads from its environment, in one place. */
export interface Config {
  databaseUrl: string | undefined;
  dataDir: string;
  port: number;
  host: string;
  sessionTtlSeconds: number;
  appleRootCaPath: string | undefined;
  apiKeyPrefix: string;
  logLevel: string;
  logFile: string | undefined;
  /** Google's OAuth token endpoint (standard Play Integrity requests) */
  googleOauthUrl: string;
  /** base URL of the Play Integrity API (decodeIntegrityToken) */
  googlePlayIntegrityUrl: string;
  /** bound on one decode through Google, access token included */
  googleTimeoutMs: number;
  /** decodes through Google in flight at once; beyond it verify answers 503 */
  googleMaxInFlight: number;
}

/** A configuration value that cannot be used; the message says which and what to do. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

const env = z.object({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  ATTEST_DATA_DIR: z.string().min(1).default('./.attest'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  ATTEST_SESSION_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  ATTEST_APPLE_ROOT_CA: z.string().min(1).optional(),
  ATTEST_API_KEY_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9]{0,15}$/, 'must be 1-16 lowercase letters or digits, starting with a letter')
    .default('attest'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ATTEST_LOG_FILE: z.string().min(1).optional(),
  ATTEST_GOOGLE_OAUTH_URL: z.string().regex(/^https?:\/\/\S+$/, 'must be an http(s) URL').default('https://oauth2.googleapis.com/token'),
  ATTEST_GOOGLE_PLAY_INTEGRITY_URL: z.string().regex(/^https?:\/\/\S+$/, 'must be an http(s) URL').default('https://playintegrity.googleapis.com'),
  ATTEST_GOOGLE_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(3000),
  ATTEST_GOOGLE_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(100_000).default(64),
});

/**
 * Reads the configuration: flags win over environment variables, which win over defaults.
 * Empty environment variables count as unset.
 */
export function loadConfig(flags: Partial<Config> = {}, environment: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(environment).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = env.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`environment variable ${String(issue.path[0])} ${issue.message}`);
  }
  const e = parsed.data;
  const config: Config = {
    databaseUrl: e.DATABASE_URL,
    dataDir: e.ATTEST_DATA_DIR,
    port: e.PORT,
    host: e.HOST,
    sessionTtlSeconds: e.ATTEST_SESSION_TTL_SECONDS,
    appleRootCaPath: e.ATTEST_APPLE_ROOT_CA,
    apiKeyPrefix: e.ATTEST_API_KEY_PREFIX,
    logLevel: e.LOG_LEVEL,
    logFile: e.ATTEST_LOG_FILE,
    googleOauthUrl: e.ATTEST_GOOGLE_OAUTH_URL,
    googlePlayIntegrityUrl: e.ATTEST_GOOGLE_PLAY_INTEGRITY_URL,
    googleTimeoutMs: e.ATTEST_GOOGLE_TIMEOUT_MS,
    googleMaxInFlight: e.ATTEST_GOOGLE_MAX_IN_FLIGHT,
  };
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) (config as unknown as Record<string, unknown>)[k] = v;
  return config;
}
