import { createServer, type Socket } from 'node:net';
import type { PGlite } from '@electric-sql/pglite';

/** A running shared socket; `stop` closes it and every connection. */
export interface SharedSocket {
  stop(): Promise<void>;
}

const PROTOCOL_3 = 196608;
const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;
/** extended-protocol messages that belong to the batch a later Sync ends */
const IN_BATCH = new Set(['P', 'B', 'D', 'E', 'C']);
const P = 'P'.charCodeAt(0);
const E = 'E'.charCodeAt(0);

/**
 * The embedded database's Unix socket for CLI commands while `attest serve` runs. PGlite has one
 * backend session, shared by the server's own queries and every socket client. Relayed message by
 * message (as @electric-sql/pglite-socket, used before, did), another query replaced a client's
 * unnamed statement between its Parse and its Bind: the statement failed, or ran another's SQL
 * with its parameters. So each Sync-delimited batch runs under PGlite's lock, and a client keeps
 * the session from a Parse until the statement has run (a describe round trip comes between) and
 * through an open transaction until it ends.
 */
export async function startSharedSocket(
  db: PGlite,
  path: string,
  maxConnections: number,
): Promise<SharedSocket> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveConnection(db, socket);
  });
  server.maxConnections = maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function serveConnection(db: PGlite, socket: Socket): void {
  let buffer: Buffer = Buffer.alloc(0);
  let batch: Uint8Array[] = [];
  let started = false;
  /** releases PGlite's query lock; kept between batches while a statement or transaction is open */
  let held: (() => void) | undefined;
  let work = Promise.resolve();

  const acquire = () =>
    new Promise<() => void>((got) => {
      void db.runExclusive(() => new Promise<void>((release) => got(release)));
    });

  const run = (messages: Uint8Array[]) =>
    (work = work.then(async () => {
      const release = held ?? (await acquire());
      held = undefined;
      try {
        for (const message of messages) {
          const answer = await db.execProtocolRaw(message);
          if (answer.length > 0 && socket.writable) socket.write(answer);
        }
      } catch (err) {
        socket.destroy(err as Error);
      } finally {
        // a statement parsed but not yet executed (postgres.js describes it, then binds it in a
        // second round trip) or an open transaction keeps the session for this client
        const parsedOnly = messages.some((m) => m[0] === P) && !messages.some((m) => m[0] === E);
        // even for a client already gone: its close handler, queued behind, rolls back and releases
        if (parsedOnly || db.isInTransaction()) held = release;
        else release();
      }
    }));

  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
    const ready: Uint8Array[][] = [];
    for (;;) {
      let length: number;
      let type: string | undefined;
      if (!started) {
        if (buffer.length < 8) break;
        length = buffer.readInt32BE(0);
        const code = buffer.readInt32BE(4);
        if (code === SSL_REQUEST || code === GSS_REQUEST) {
          // a Unix socket needs no encryption: "N", and the client goes on with its startup
          socket.write('N');
          buffer = buffer.subarray(8);
          continue;
        }
        if (code !== PROTOCOL_3) {
          // a cancel request or another protocol: nothing here can serve it
          socket.end();
          return;
        }
      } else {
        if (buffer.length < 5) break;
        type = String.fromCharCode(buffer[0]!);
        length = 1 + buffer.readInt32BE(1);
      }
      if (buffer.length < length) break;
      if (type === 'X') {
        // Terminate ends this client, not PGlite's one session: the close handler tidies up
        for (const messages of ready) void run(messages);
        socket.end();
        return;
      }
      const message = new Uint8Array(buffer.subarray(0, length));
      buffer = buffer.subarray(length);
      started = true;
      batch.push(message);
      if (type === undefined || !IN_BATCH.has(type)) {
        ready.push(batch);
        batch = [];
      }
    }
    for (const messages of ready) void run(messages);
  });

  const end = () =>
    void (work = work.then(async () => {
      if (!held) return;
      // the client left inside a transaction: undo it before anyone else runs
      const release = held;
      held = undefined;
      try {
        await db.execProtocolRaw(simpleQuery('ROLLBACK'));
      } finally {
        release();
      }
    }));
  socket.on('close', end);
  socket.on('error', () => socket.destroy());
}

/** A simple-protocol Query message. */
function simpleQuery(text: string): Uint8Array {
  const body = Buffer.from(`${text}\0`, 'utf8');
  const message = Buffer.alloc(5 + body.length);
  message.write('Q', 0, 'latin1');
  message.writeInt32BE(4 + body.length, 1);
  body.copy(message, 5);
  return message;
}
