import { Fault } from '../core/fault.js';
import { statfsSync } from 'node:fs';

/**
 * What went wrong with a database, in words a user can act on. The one home for that wording:
 * every command (serve, db, keys, allowlist, verify-file) reports database failures through it.
 */

/** What the HTTP API answers (503) while no database takes a request. */
export const DATABASE_UNAVAILABLE = 'Database unavailable, retry shortly';

/** The database cannot be reached or refused us; the message is the whole line to print. */
export class DatabaseUnavailableError extends Fault {
  override readonly name = 'DatabaseUnavailableError';
  constructor(message: string) {
    super('database_unavailable', message, {
      retryAfterSeconds: 1,
      unavailable: DATABASE_UNAVAILABLE,
      exit: 3,
    });
  }
}

// errors of the connection itself (not of a statement): what the driver and node report
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'ENOENT',
  'EACCES',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);
// PostgreSQL SQLSTATEs that mean "you may not connect", not "this statement failed"
const CONNECT_STATES = new Set([
  '3D000',
  '28000',
  '28P01',
  '57P03',
  '53300',
  '08001',
  '08004',
  '08006',
]);

interface DriverError {
  code?: unknown;
  message?: unknown;
  hostname?: unknown;
  address?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** The driver's own error inside drizzle's wrapper (whose message carries the query and its parameters). */
function innermost(err: unknown): DriverError {
  let e = (err ?? {}) as DriverError;
  for (let depth = 0; depth < 5; depth++) {
    if (e.cause && typeof e.cause === 'object') e = e.cause as DriverError;
    // node's happy-eyeballs connect reports every address it tried
    else if (Array.isArray(e.errors) && e.errors.length > 0 && !e.code)
      e = e.errors[0] as DriverError;
    else break;
  }
  return e;
}

/** True when `err` says the database could not be reached or would not let us in. */
export function isConnectionError(err: unknown): boolean {
  const code = String(innermost(err).code ?? '');
  return (
    NETWORK_CODES.has(code) ||
    CONNECT_STATES.has(code) ||
    code.startsWith('ERR_SSL') ||
    code.startsWith('ERR_TLS')
  );
}

/**
 * The cause of a database failure in a few words (refused, unknown host, database does not exist,
 * authentication failed, TLS required, no answer), never a query or its parameters.
 */
export function cleanDatabaseError(
  err: unknown,
  options: { connectTimeoutSeconds?: number } = {},
): string {
  const e = innermost(err);
  const code = String(e.code ?? '');
  const message = String(e.message ?? err)
    .replace(/\s+/g, ' ')
    .trim();
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `unknown host${e.hostname ? ` "${String(e.hostname)}"` : ''}`;
    case 'CONNECT_TIMEOUT':
      return `no answer within ${options.connectTimeoutSeconds ? `${options.connectTimeoutSeconds} s` : 'the connect timeout'} (ATTEST_DB_CONNECT_TIMEOUT)`;
    case 'ETIMEDOUT':
      return 'the connection timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'CONNECTION_CLOSED':
    case 'CONNECTION_ENDED':
    case 'CONNECTION_DESTROYED':
      return 'the server closed the connection';
    case 'ENOENT':
      return 'the socket is gone';
    case 'EACCES':
      return 'permission denied on the socket';
    case '3D000':
      return message; // `database "x" does not exist`
    case '28P01':
      return `authentication failed (${message})`;
    case '28000':
      // pg_hba.conf rejects: "no encryption" means only TLS connections are accepted
      if (/no encryption/i.test(message))
        return 'TLS required: the server accepts only encrypted connections (add ?sslmode=require to DATABASE_URL)';
      return `authentication failed (${message})`;
    case '57P03':
      return 'the database is starting up or shutting down';
    case '53300':
      return 'too many connections';
  }
  if (code.startsWith('ERR_SSL') || code.startsWith('ERR_TLS')) return `TLS failed (${message})`;
  return message.slice(0, 300);
}

/** The one line for a database that cannot be used, naming where it is and the cause. */
export function unavailable(
  where: string,
  err: unknown,
  options: { connectTimeoutSeconds?: number; embedded?: boolean } = {},
): DatabaseUnavailableError {
  const cause = cleanDatabaseError(err, options);
  if (options.embedded)
    return new DatabaseUnavailableError(`cannot use the embedded database in ${where}: ${cause}`);
  return new DatabaseUnavailableError(
    `cannot reach the database at ${where}: ${cause}; check DATABASE_URL and that the server runs`,
  );
}

// what a file system says when it cannot take a write
const DISK_CODES: Record<string, string> = {
  ENOSPC: 'the disk is full (ENOSPC, no space left on device)',
  EDQUOT: "the user's disk quota is used up (EDQUOT)",
  EROFS: 'the file system is read-only (EROFS)',
  EIO: 'the disk reports an I/O error (EIO)',
  // PostgreSQL's own words for the same (SQLSTATE disk_full, io_error)
  '53100': 'the disk is full (PostgreSQL: disk_full)',
  '58030': 'the disk reports an I/O error (PostgreSQL: io_error)',
};

/**
 * PGlite needs room for a 16 MB WAL segment to recover after a crash; with less than this free,
 * a failure of the embedded database is most likely the disk's.
 */
export const LOW_DISK_BYTES = 64 * 1024 * 1024;

/** Bytes available to this user on the file system holding `dir`, or undefined when unknown. */
export function freeBytes(dir: string): number | undefined {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

/**
 * A failure to open or start the embedded database in `dataDir` as the one line that names the
 * disk when the disk is the cause (a file system error such as ENOSPC, or PGlite failing, for
 * instance with "unreachable", while under LOW_DISK_BYTES are free); any other error as it was.
 */
export function embeddedUnavailable(
  dataDir: string,
  err: unknown,
  options: { free?: (dir: string) => number | undefined } = {},
): unknown {
  if (err instanceof DatabaseUnavailableError) return err;
  const code = String(innermost(err).code ?? '');
  const free = (options.free ?? freeBytes)(dataDir);
  const room = free === undefined ? '' : `, ${formatBytes(free)} free`;
  const disk = DISK_CODES[code];
  if (disk) {
    const advice =
      code === 'EROFS'
        ? 'make its file system writable'
        : /EIO|58030/.test(code)
          ? 'check its disk'
          : 'make room on its disk';
    return new DatabaseUnavailableError(
      `cannot use the embedded database in ${dataDir}: ${disk}${room}; ${advice} and start again`,
    );
  }
  const inner = innermost(err);
  const message = String(inner.message ?? err)
    .replace(/\s+/g, ' ')
    .slice(0, 120);
  // PGlite's postgres aborting (a WebAssembly trap) says only "unreachable" or "Aborted()"
  const trapped =
    (inner as { name?: unknown }).name === 'RuntimeError' || /^(unreachable|Aborted)/.test(message);
  if (trapped && free !== undefined && free < LOW_DISK_BYTES) {
    return new DatabaseUnavailableError(
      `cannot use the embedded database in ${dataDir}: its disk is nearly full (${formatBytes(free)} free) and the database failed (${message}); make room on its disk and start again`,
    );
  }
  return err;
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${Math.floor(n / 1024)} KiB`;
  return `${Math.floor(n / (1024 * 1024))} MiB`;
}

// SQLSTATEs of a database that refuses writes: disk_full, io_error, read_only_sql_transaction
const WRITE_REFUSED_STATES = new Set(['53100', '58030', '25006']);
const WRITE_REFUSED_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO']);

/**
 * True when `err` says the database (or the disk under it) cannot take a write: a full disk
 * (ENOSPC, PostgreSQL's 53100 disk_full or "could not extend file"), an I/O error, a read-only
 * file system or database (25006). Such a fault lasts: readiness reports it until a write passes.
 */
export function isWriteRefused(err: unknown): boolean {
  const e = innermost(err);
  const code = String(e.code ?? '');
  return (
    WRITE_REFUSED_STATES.has(code) ||
    WRITE_REFUSED_CODES.has(code) ||
    /could not (extend|write to) file|no space left on device/i.test(String(e.message ?? ''))
  );
}

/**
 * True when `err` is a fault of the database that a retry may not meet: a connection error (a
 * reset mid-query included), a terminated backend, a serialization failure or deadlock, a lack of
 * resources, or a refused write. The answer to it says so (Retry-After).
 */
export function isTransientDatabaseFault(err: unknown): boolean {
  if (isConnectionError(err) || isWriteRefused(err)) return true;
  const code = String(innermost(err).code ?? '');
  // 08 connection, 40 transaction rollback, 53 insufficient resources, 57P0x shutdown/terminated
  return /^(08|40|53)...$/.test(code) || /^57P0\d$/.test(code);
}

/**
 * True when `err` says no database server can take this request now, as during a failover: the
 * database unreachable or refusing connections, a connection reset mid-query, a server shutting
 * down, starting up or terminated (57P01-57P03), or a read-only standby (25006). The answer is
 * 503 with Retry-After: nothing was decided, and a retry soon may meet the new primary.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof DatabaseUnavailableError || isConnectionError(err)) return true;
  const code = String(innermost(err).code ?? '');
  return code === '25006' || /^57P0[1-3]$/.test(code);
}
