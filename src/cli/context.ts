import { hostname, userInfo } from 'node:os';
import type { Command } from 'commander';
import type pino from 'pino';
// Static imports here are what every command pays, even `attest keys list` through a running
// server: the database drivers, pino, argon2 and the verifiers are imported where they are used.
import { findRunningServer, type RunningServer } from '../db/runningServer.js';
import type { DatabaseHandle } from '../db/database.js';
import { isConnectionError, unavailable } from '../db/errors.js';
import { ACTOR, loadConfig, type Config } from '../config.js';
import { PRINTABLE_NAME_RULE } from '../core/printableName.js';
import { faultOf } from '../core/fault.js';
import type { AuditEvent, Auditor } from '../db/audit.js';
import type { ResolvedMasterKey } from '../db/masterKey.js';
import type { SecretBox } from '../db/secretBox.js';
import { localAdmin, remoteAdmin, type Admin } from './admin.js';
import { cliErrorOf, runtimeError, usageError } from './errors.js';

/** The configuration, with a bad value reported as a usage error. */
export function config(flags: Partial<Config> = {}): Config {
  try {
    return loadConfig(flags);
  } catch (err) {
    throw configProblem(err);
  }
}

/** A fault as the one line the CLI prints for it (a ConfigError: exit 2); anything else passes through. */
export function configProblem(err: unknown): unknown {
  return cliErrorOf(err) ?? err;
}

/**
 * The running `attest serve` that owns the configured embedded database, or null (PostgreSQL, or
 * no server). A data dir other users may write to is refused here too.
 */
export function runningServer(cfg: Config = config()): RunningServer | null {
  if (cfg.databaseUrl) return null;
  try {
    return findRunningServer(cfg.dataDir);
  } catch (err) {
    throw cliErrorOf(err) ?? err;
  }
}

/**
 * Runs `work` with the operations of the configured database: sent to the running `attest serve`
 * when one owns the embedded database (nothing else may open it then), else run on the database
 * this process opens (withDatabase). The master key is loaded on first need.
 */
export async function withAdmin<T>(
  work: (admin: Admin) => Promise<T>,
  options: {
    auditor?: Auditor;
    requireMigrated?: boolean;
    /** false: verify-file reads secrets without recording the key check */
    establish?: boolean;
  } = {},
): Promise<T> {
  const server = runningServer();
  if (options.auditor && logging) await logging;
  if (server) return work(remoteAdmin(server, config().dataDir, options.auditor));
  return withDatabase(
    (handle) => {
      let box: Promise<SecretBox> | undefined;
      const secrets = () =>
        (box ??= loadSecrets(handle, options.establish === false ? { establish: false } : {}).then(
          (s) => s.box,
        ));
      const cfg = config();
      return work(
        localAdmin(handle, secrets, options.auditor, {
          googleOauthUrl: cfg.googleOauthUrl,
          googlePlayIntegrityUrl: cfg.googlePlayIntegrityUrl,
          appleReceiptUrlDevelopment: cfg.appleReceiptUrlDevelopment,
          appleReceiptUrlProduction: cfg.appleReceiptUrlProduction,
        }),
      );
    },
    options.requireMigrated === false ? { requireMigrated: false } : {},
  );
}

/**
 * Runs `work` with the configured database, PostgreSQL or the embedded one, opened by this
 * process (refused while a running `attest serve` owns the embedded one: use withAdmin). Closes
 * it whatever happens. Only `create` callers (db migrate) may create an embedded database.
 */
export async function withDatabase<T>(
  work: (db: DatabaseHandle) => Promise<T>,
  options: {
    requireMigrated?: boolean;
    create?: boolean;
    onProgress?: (message: string) => void;
  } = {},
): Promise<T> {
  const cfg = config();
  const { openDatabase } = await import('../db/client.js');
  const { assertMigrated } = await import('../db/migrate.js');
  let handle: DatabaseHandle;
  try {
    handle = await openDatabase({
      url: cfg.databaseUrl,
      dataDir: cfg.dataDir,
      role: 'cli',
      poolSize: 2,
      connectTimeoutSeconds: cfg.dbConnectTimeoutSeconds,
      runtimeDir: cfg.socketDir,
      create: options.create ?? false,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  } catch (err) {
    // a fault that says how the CLI ends on it (busy, missing, unsafe, unusable) is its own line
    throw cliErrorOf(err) ?? runtimeError(`cannot open the database: ${(err as Error).message}`);
  }
  const fail = (err: unknown) =>
    runtimeError(
      unavailable(handle.where, err, {
        connectTimeoutSeconds: handle.connectTimeoutSeconds,
        embedded: handle.kind !== 'postgres',
      }).message,
    );
  try {
    // a first statement before the work: an unreachable database is reported the same for every command
    try {
      await assertMigrated(handle);
    } catch (err) {
      const fault = faultOf(err);
      if (fault?.code !== 'migrations_pending') throw fail(err);
      if (options.requireMigrated !== false) throw runtimeError(fault.message);
    }
    try {
      return await work(handle);
    } catch (err) {
      const exit = cliErrorOf(err);
      if (exit) throw exit;
      if (isConnectionError(err)) throw fail(err);
      throw err;
    }
  } finally {
    await handle.close().catch(() => {});
  }
}

/**
 * Who makes the administrative changes of this run, resolved once: `--actor`, else ATTEST_ACTOR,
 * else the OS user@host. Each recorded change is in the audit table already; it also becomes one
 * pino line in ATTEST_LOG_FILE when set (where `attest serve` logs), and on stderr (stdout is the
 * command's output) as auditOnStderr decides.
 */
export function auditorFor(command: Command): Auditor {
  const cfg = config();
  const flags = command.optsWithGlobals() as { actor?: string; log?: boolean };
  const flag = flags.actor;
  if (flag !== undefined && !ACTOR.test(flag)) throw usageError(`--actor ${PRINTABLE_NAME_RULE}`);
  const actor = flag ?? cfg.actor ?? osActor();
  const stderr = auditOnStderr({
    logFlag: flags.log === true,
    stderrIsTTY: process.stderr.isTTY === true,
    logLevel: cfg.logLevel,
  });
  if (!stderr && !cfg.logFile) return { actor, log: () => {} };
  // loaded now, while the command works: there by the time it records a change (withAdmin waits)
  const loading = (logging ??= loadLogging());
  return {
    actor,
    log: (event) => {
      if (loaded) logChange(loaded, cfg, event, stderr);
      else void loading.then((l) => logChange(l, cfg, event, stderr));
    },
  };
}

/**
 * Whether an audit event is also printed on stderr as a JSON line: always with `--log`; never on a
 * terminal otherwise (a person reads the command's own result there); elsewhere (a script, a
 * supervisor, CI) when LOG_LEVEL lets info lines through, which the default (info) does.
 */
export function auditOnStderr(options: {
  logFlag: boolean;
  stderrIsTTY: boolean;
  logLevel: string;
}): boolean {
  if (options.logFlag) return true;
  if (options.stderrIsTTY) return false;
  return ['info', 'debug', 'trace'].includes(options.logLevel);
}

function osActor(): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    // a container user without a passwd entry
    user = `uid${process.getuid?.() ?? '?'}`;
  }
  return `${user}@${hostname()}`;
}

interface Logging {
  pino: typeof pino;
  loggerOptions: (level: string) => pino.LoggerOptions;
}
let logging: Promise<Logging> | undefined;
let loaded: Logging | undefined;

async function loadLogging(): Promise<Logging> {
  const [{ default: pino }, { loggerOptions }] = await Promise.all([
    import('pino'),
    import('../server/logger.js'),
  ]);
  return (loaded = { pino, loggerOptions });
}

function logChange(
  { pino, loggerOptions }: Logging,
  cfg: Config,
  event: AuditEvent,
  stderr: boolean,
): void {
  const streams: pino.StreamEntry[] = [];
  // --log prints the event whatever LOG_LEVEL says
  if (stderr)
    streams.push({
      stream: { write: (line: string) => process.stderr.write(line) },
      level: 'info',
    });
  // sync: the CLI exits right after, and an asynchronous write could be lost
  const file = cfg.logFile
    ? pino.destination({ dest: cfg.logFile, append: true, mkdir: true, sync: true })
    : undefined;
  if (file) streams.push({ stream: file, level: cfg.logLevel as pino.Level });
  if (streams.length === 0) return;
  const level = stderr ? lowest('info', cfg.logLevel) : cfg.logLevel;
  const logger = pino(loggerOptions(level), pino.multistream(streams));
  logger.info(
    { audit: { ...event, at: event.at.toISOString() } },
    `${event.action} ${event.target} by ${event.actor}`,
  );
  file?.end();
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
function lowest(a: string, b: string): string {
  return LEVELS.indexOf(a) <= LEVELS.indexOf(b) ? a : b;
}

export interface Secrets {
  box: SecretBox;
  masterKey: ResolvedMasterKey;
}

/**
 * The master key for commands that read or write sealed secrets, checked against the database
 * (a wrong key is one line naming the expected key id). Creating the embedded default key is
 * said once on stderr. `check: false` leaves the check to the caller (the migration path).
 */
export async function loadSecrets(
  handle: DatabaseHandle,
  options: { check?: boolean; establish?: boolean } = {},
): Promise<Secrets> {
  const [{ resolveMasterKey }, { createSecretBox }, { checkMasterKey }] = await Promise.all([
    import('../db/masterKey.js'),
    import('../db/secretBox.js'),
    import('../db/secrets.js'),
  ]);
  let masterKey: ResolvedMasterKey;
  try {
    masterKey = await resolveMasterKey(config(), handle);
  } catch (err) {
    throw secretsError(err);
  }
  if (masterKey.created)
    process.stderr.write(
      `attest: created a master key in ${masterKey.source}: back it up with the data dir (not inside the same backup)\n`,
    );
  const box = createSecretBox([masterKey.key]);
  if (options.check !== false) {
    try {
      await checkMasterKey(handle.db, box, {
        source: masterKey.source,
        ...(options.establish === false ? { establish: false } : {}),
      });
    } catch (err) {
      throw secretsError(err);
    }
  }
  return { box, masterKey };
}

/** A master key problem is a setting error (exit 2, as its fault says); anything else passes through. */
export function secretsError(err: unknown): unknown {
  return cliErrorOf(err) ?? err;
}

/** withDatabase, with the master key loaded and checked for `work`. */
export function withSecrets<T>(
  work: (db: DatabaseHandle, secrets: Secrets) => Promise<T>,
  options: { establish?: boolean } = {},
): Promise<T> {
  return withDatabase(async (handle) => work(handle, await loadSecrets(handle, options)));
}
