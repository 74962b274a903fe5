import { createHash, timingSafeEqual } from 'node:crypto';
import { chmodSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { ACTOR } from '../config.js';
import type { AuditEvent } from '../db/audit.js';
import { cleanDatabaseError, DatabaseUnavailableError } from '../db/errors.js';
import { MasterKeyError } from '../db/secrets.js';
import { AdminError, type AdminErrorKind } from './adminError.js';
import { isOperationName, type OperationName } from './operations.js';
import { fromWire, toWire } from './wire.js';

/** What the admin socket serves: the operations, on the server's own database handle. */
export interface AdminServerDeps {
  /** the per-run secret (from the 0600 lock file) every request must present */
  secret: string;
  /** runs one operation as `actor`; each audit event it records goes to `audit` */
  execute(
    name: OperationName,
    input: unknown,
    actor: string | undefined,
    audit: (event: AuditEvent) => void,
  ): Promise<unknown>;
  /** a consistent snapshot of the embedded database (gzipped tar) */
  /** the embedded database's backup, a gzipped tar, as it is taken */
  backup(): Readable;
  /** an unexpected failure of an operation (for the server's log) */
  onFault?(err: unknown, name: string): void;
}

export interface AdminServerOptions {
  /** the largest request body accepted (default 1 MiB); more is answered 413 */
  maxBodyBytes?: number;
  /** how long an operation may run before the answer is 503 (default 30 s) */
  timeoutMs?: number;
  /** operations at once; more are answered 503 busy (default 8) */
  maxInFlight?: number;
  /**
   * connections at once (default 64): a new one beyond it closes the oldest that is not running
   * an operation, so clients that hold connections open cannot keep the CLI out
   */
  maxConnections?: number;
  /** the whole request head within this time of connecting (default 2 s) */
  headersTimeoutMs?: number;
  /** the whole request, body included, within this time (default 5 s) */
  requestTimeoutMs?: number;
}

export interface AdminServer {
  stop(): Promise<void>;
}

/** The one request shape: an operation's name, its input, and who acts. */
const REQUEST = z.strictObject({
  op: z.string().max(64),
  input: z.unknown(),
  actor: z.string().regex(ACTOR).optional(),
});

const STATUS: Record<AdminErrorKind, number> = { usage: 400, negative: 409, runtime: 500 };

/**
 * The admin API of a running `attest serve` on the embedded database: HTTP (node:http) with JSON
 * bodies on a unix socket at `path` (made 0600 here; its folder is the caller's, 0700). It never
 * runs SQL it is sent: a request names one of the typed operations, which the server runs on its
 * own handle. Nothing of a request outlives it: no session, no transaction, no prepared statement.
 */
export async function startAdminServer(
  path: string,
  deps: AdminServerDeps,
  options: AdminServerOptions = {},
): Promise<AdminServer> {
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxInFlight = options.maxInFlight ?? 8;
  const maxConnections = options.maxConnections ?? 64;
  const headersTimeout = options.headersTimeoutMs ?? 2_000;
  const requestTimeout = Math.max(options.requestTimeoutMs ?? 5_000, headersTimeout);
  const expected = digest(deps.secret);
  let inFlight = 0;
  // open connections, oldest first (a Map keeps insertion order), and whether each runs an operation
  const connections = new Map<Socket, { running: boolean }>();

  const server = createServer(
    {
      // the CLI sends its whole request at once: a client that trickles it is cut off, so it
      // holds a connection for seconds at most (and is closed first when one is needed)
      requestTimeout,
      headersTimeout,
      keepAliveTimeout: 1_000,
      connectionsCheckingInterval: Math.min(1_000, headersTimeout),
      maxHeaderSize: 8192,
    },
    (req, res) => {
      void handle(req, res).catch((err: unknown) => {
        deps.onFault?.(err, 'request');
        if (!res.headersSent) answer(res, 500, failure('runtime', 'the request failed'));
        else res.destroy();
      });
    },
  );
  server.maxHeadersCount = 32;
  // not server.maxConnections, which drops the newest connection (the CLI's, EPIPE): the oldest
  // idle or unfinished one makes room instead. Running operations are at most maxInFlight, so
  // there always is one.
  server.on('connection', (socket: Socket) => {
    if (connections.size >= maxConnections) {
      for (const [old, state] of connections) {
        if (state.running) continue;
        connections.delete(old);
        old.destroy();
        break;
      }
    }
    connections.set(socket, { running: false });
    socket.once('close', () => connections.delete(socket));
  });
  // anything that is not HTTP (a PostgreSQL startup packet, garbage) ends with node's 400 and a close
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!authorized(req.headers.authorization, expected))
      return answer(
        res,
        401,
        failure(
          'runtime',
          'not authorized: the secret does not match this run of attest serve (a lock file from another run?)',
        ),
      );
    if (req.method !== 'POST')
      return answer(res, 405, failure('usage', 'the admin API takes POST only'));
    if (req.url !== '/v1/op' && req.url !== '/v1/backup')
      return answer(res, 404, failure('usage', `no such admin route ${req.url ?? ''}`));
    if (!/^application\/json(;|$)/i.test(req.headers['content-type'] ?? ''))
      return answer(res, 415, failure('usage', 'the admin API takes application/json'));
    const body = await readBody(req, maxBodyBytes);
    if (body === 'too large')
      return answer(
        res,
        413,
        failure('usage', `the request is larger than ${maxBodyBytes} bytes`),
        true,
      );
    if (body === null) return; // the client went away
    if (inFlight >= maxInFlight)
      return answer(res, 503, failure('runtime', 'the running attest serve is busy; try again'));
    inFlight++;
    const connection = connections.get(req.socket);
    if (connection) connection.running = true;
    try {
      if (req.url === '/v1/backup') return await sendBackup(res);
      let parsed: z.infer<typeof REQUEST>;
      try {
        const request = REQUEST.safeParse(fromWire(body));
        if (!request.success) throw new Error(request.error.issues[0]?.message ?? 'bad request');
        parsed = request.data;
      } catch (err) {
        return answer(res, 400, failure('usage', `bad request: ${(err as Error).message}`));
      }
      if (!isOperationName(parsed.op))
        return answer(res, 404, failure('usage', `no admin operation "${parsed.op}"`));
      const audit: AuditEvent[] = [];
      try {
        const result = await withTimeout(
          deps.execute(parsed.op, parsed.input, parsed.actor, (event) => audit.push(event)),
          timeoutMs,
        );
        return answer(res, 200, { ok: true, result, audit });
      } catch (err) {
        if (err instanceof TimeoutError)
          return answer(
            res,
            503,
            failure('runtime', `the running attest serve did not finish within ${timeoutMs} ms`),
          );
        const { kind, message } = classify(err);
        if (kind === 'runtime' && !(err instanceof AdminError)) deps.onFault?.(err, parsed.op);
        return answer(res, STATUS[kind], { ...failure(kind, message), audit });
      }
    } finally {
      inFlight--;
      if (connection) connection.running = false;
    }
  }

  async function sendBackup(res: ServerResponse): Promise<void> {
    let backup: Readable;
    try {
      backup = deps.backup();
    } catch (err) {
      deps.onFault?.(err, 'backup');
      return answer(res, 500, failure('runtime', `backup failed: ${classify(err).message}`));
    }
    // streamed as it is taken (chunked): a backup that fails midway cuts the response, and the
    // CLI, which writes to a temporary name, keeps nothing
    res.writeHead(200, { 'content-type': 'application/gzip' });
    try {
      await pipeline(backup, res);
    } catch (err) {
      deps.onFault?.(err, 'backup');
      res.destroy();
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** `Bearer <secret>`, compared in constant time (digests of equal length). */
function authorized(header: string | undefined, expected: Buffer): boolean {
  const m = /^Bearer (\S{1,200})$/.exec(header ?? '');
  return m !== null && timingSafeEqual(digest(m[1]!), expected);
}

/** The body as text; 'too large' past `max` bytes (declared or sent); null when the client left. */
function readBody(req: IncomingMessage, max: number): Promise<string | 'too large' | null> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > max) return Promise.resolve('too large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.pause();
        resolve('too large');
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('aborted', () => resolve(null));
    req.on('error', () => resolve(null));
  });
}

function failure(kind: AdminErrorKind, message: string) {
  return { ok: false as const, error: { kind, message } };
}

function answer(res: ServerResponse, status: number, body: unknown, close = false): void {
  const text = toWire(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(text);
}

/** An operation's error as the kind and one line the CLI prints. */
export function classify(err: unknown): { kind: AdminErrorKind; message: string } {
  if (err instanceof AdminError) return { kind: err.kind, message: err.message };
  if (err instanceof MasterKeyError) return { kind: 'usage', message: err.message };
  if (err instanceof DatabaseUnavailableError) return { kind: 'runtime', message: err.message };
  return {
    kind: 'runtime',
    message: `unexpected failure: ${cleanDatabaseError(err).slice(0, 500)}`,
  };
}

class TimeoutError extends Error {}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError()), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
