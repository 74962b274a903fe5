import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { request, type IncomingMessage } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { AdminError, type AdminErrorKind } from '../admin/adminError.js';
import type { InputOf, OperationName, ResultOf } from '../admin/operations.js';
import type { OperationContext } from '../admin/operation.js';
import { checkSocketPath, SocketPathError } from '../socketPath.js';
import { fromWire, toWire } from '../admin/wire.js';
import type { AuditEvent, Auditor } from '../db/audit.js';
import type { DatabaseHandle } from '../db/database.js';
import type { RunningServer } from '../db/runningServer.js';
import type { ExitCode } from '../core/fault.js';
import { CliError, EXIT, runtimeError } from './errors.js';
import { backupCluster } from '../db/embeddedBackup.js';

/**
 * Where a command's operations run: on the database the CLI opened itself (`local`), or in the
 * running `attest serve` that owns the embedded database (`server`). Commands do not care which.
 */
export interface Admin {
  via: 'local' | 'server';
  kind: DatabaseHandle['kind'];
  /** where the database is, for messages */
  where: string;
  run<N extends OperationName>(name: N, input: InputOf<N>): Promise<ResultOf<N>>;
  /** embedded only: writes a consistent snapshot to `file` (created 0600; never replaced) */
  backup?(file: string): Promise<number>;
}

const EXIT_OF: Record<AdminErrorKind, ExitCode> = {
  usage: EXIT.usage,
  negative: EXIT.negative,
  runtime: EXIT.runtime,
};

/** An operation's expected failure as the CLI's one line and exit code. */
function cliErrorOf(err: AdminError): CliError {
  return new CliError(err.message, EXIT_OF[err.kind]);
}

/**
 * Operations on a handle this process opened. Inputs and results take the same JSON round trip
 * as through the server, so a command sees the same values wherever its operations run.
 */
export function localAdmin(
  handle: DatabaseHandle,
  secrets: OperationContext['secrets'],
  auditor: Auditor | undefined,
  upstreams?: OperationContext['upstreams'],
): Admin {
  return {
    via: 'local',
    kind: handle.kind,
    where: handle.where,
    async run(name, input) {
      // imported here: the operations load the database layer, which remoteAdmin never needs
      const { runOperation } = await import('../admin/operations.js');
      try {
        const result = await runOperation(name, fromWire(toWire(input)), {
          handle,
          secrets,
          ...(auditor ? { auditor } : {}),
          ...(upstreams ? { upstreams } : {}),
        });
        return fromWire(toWire(result)) as never;
      } catch (err) {
        throw err instanceof AdminError ? cliErrorOf(err) : err;
      }
    },
    ...(handle.kind === 'embedded' && handle.url && handle.dataDir
      ? {
          backup: (file: string) => {
            const source = backupCluster(handle.url!, handle.dataDir!);
            return writeNew(file, (out) => pipeline(source, out));
          },
        }
      : {}),
  };
}

/** How long the CLI waits for the server's answer to one operation (the server gives up at 30 s). */
const ANSWER_TIMEOUT_MS = 45_000;
/** A backup streams for as long as it takes, but a silent socket this long is a dead server. */
const BACKUP_IDLE_TIMEOUT_MS = 120_000;
/** The most of an answer the CLI reads: results are lists of keys, apps and audit events. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * Operations sent to the running server over its admin socket, once the socket's folder and the
 * socket are checked to be this user's alone. Audit events the server recorded are logged here,
 * as when the CLI makes the change itself.
 */
export function remoteAdmin(
  server: RunningServer,
  dataDir: string,
  auditor: Auditor | undefined,
): Admin {
  const socketPath = (() => {
    try {
      return checkSocketPath(server.admin.socket);
    } catch (err) {
      if (err instanceof SocketPathError) throw runtimeError(err.message);
      throw err;
    }
  })();
  const who = `the running "attest serve" (process ${server.pid})`;
  const send = (path: string, body: string, timeoutMs: number) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({
        socketPath,
        path,
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${server.admin.secret}`,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        },
        timeout: timeoutMs,
      });
      req.once('response', resolve);
      req.once('timeout', () =>
        req.destroy(runtimeError(`${who} did not answer within ${timeoutMs / 1000} s`)),
      );
      req.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          err instanceof CliError
            ? err
            : runtimeError(
                `${who} cannot be reached on its admin socket (${err.code ?? err.message}): it may be stopping; try again`,
              ),
        ),
      );
      req.end(body);
    });

  async function readAnswer(res: IncomingMessage): Promise<{ status: number; body: unknown }> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        res.destroy();
        throw runtimeError(`${who} answered more than ${MAX_ANSWER_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
    try {
      return {
        status: res.statusCode ?? 0,
        body: fromWire(Buffer.concat(chunks).toString('utf8')),
      };
    } catch {
      throw runtimeError(
        `${who} answered something that is not its admin API (HTTP ${res.statusCode})`,
      );
    }
  }

  function failed(status: number, body: unknown): CliError {
    const error = (body as { error?: { kind?: string; message?: string } } | null)?.error;
    const kind = error?.kind;
    const message = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
    if (kind === 'usage' || kind === 'negative' || kind === 'runtime')
      return new CliError(message, EXIT_OF[kind]);
    return runtimeError(`${who} refused the request: ${message}`);
  }

  return {
    via: 'server',
    kind: 'embedded',
    where: `${dataDir} (through the running server)`,
    async run(name, input) {
      const res = await send(
        '/v1/op',
        toWire({ op: name, input, ...(auditor ? { actor: auditor.actor } : {}) }),
        ANSWER_TIMEOUT_MS,
      );
      const { status, body } = await readAnswer(res);
      const answer = body as { ok?: boolean; result?: unknown; audit?: AuditEvent[] } | null;
      for (const event of answer?.audit ?? []) auditor?.log(event);
      if (status !== 200 || answer?.ok !== true) throw failed(status, body);
      return answer.result as never;
    },
    async backup(file) {
      const res = await send('/v1/backup', '{}', BACKUP_IDLE_TIMEOUT_MS);
      if (res.statusCode !== 200) {
        const { status, body } = await readAnswer(res);
        throw failed(status, body);
      }
      return writeNew(file, (out) => pipeline(res, out));
    },
  };
}

/**
 * Writes `file` through a temporary name beside it (0600), then renames it: a failed or cut
 * backup never leaves a file that looks whole. Refuses a file that exists. Returns the size.
 */
async function writeNew(
  file: string,
  write: (out: ReturnType<typeof createWriteStream>) => Promise<void>,
): Promise<number> {
  const partial = `${file}.partial-${randomBytes(8).toString('hex')}`;
  const out = createWriteStream(partial, { mode: 0o600, flags: 'wx' });
  try {
    await new Promise<void>((resolve, reject) => {
      out.once('open', () => resolve());
      out.once('error', reject);
    });
    await write(out);
    const size = out.bytesWritten;
    renameSync(partial, file);
    return size;
  } catch (err) {
    out.destroy();
    rmSync(partial, { force: true });
    if (err instanceof CliError) throw err;
    throw runtimeError(
      `cannot write the backup ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
}
