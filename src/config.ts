import { z } from 'zod';
import { parseDuration } from './cli/duration.js';

/** Everything attest reads from its environment, in one place. */
export interface Config {
  databaseUrl: string | undefined;
  dataDir: string;
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
  ATTEST_SESSION_RETENTION: z
    .string()
    .default('1h')
    .transform((text, ctx) => parseDuration(text) ?? (ctx.addIssue({ code: 'custom', message: `must be a duration such as 30m, 1h or 7d, got "${text}"` }), z.NEVER)),
  ATTEST_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  ATTEST_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  ATTEST_APPLE_ROOT_CA: z.string().min(1).optional(),
  ATTEST_API_KEY_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9]{0,15}$/, 'must be 1-16 lowercase letters or digits, starting with a letter')
    .default('attest'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ATTEST_LOG_FILE: z.string().min(1).optional(),
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
    sessionRetentionSeconds: e.ATTEST_SESSION_RETENTION,
    metricsPort: e.ATTEST_METRICS_PORT,
    metricsHost: e.ATTEST_METRICS_HOST,
    appleRootCaPath: e.ATTEST_APPLE_ROOT_CA,
    apiKeyPrefix: e.ATTEST_API_KEY_PREFIX,
    logLevel: e.LOG_LEVEL,
    logFile: e.ATTEST_LOG_FILE,
  };
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) (config as unknown as Record<string, unknown>)[k] = v;
  return config;
}
