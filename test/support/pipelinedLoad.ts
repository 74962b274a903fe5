/**
 * Raw keep-alive connections that pipeline: each writes `depth` requests at once and the next
 * batch as soon as the last answer of the one before is in, so there is nearly always a request
 * on the wire that the server has not read yet. Node's HTTP client cannot pipeline, so the answers
 * are read here: a status line, headers, and a body of Content-Length bytes (what attest sends;
 * a chunked answer is recorded as a protocol problem).
 */
import { connect, type Socket } from 'node:net';

export interface PipelinedAnswer {
  status: number;
  /** the Connection header, lower case */
  connection: string | undefined;
}

export interface PipelinedConnection {
  /** requests written so far */
  written: number;
  answers: PipelinedAnswer[];
  /** the socket's error (ECONNRESET...), or a protocol problem of the reader */
  error?: string;
  /** resolves when the socket has closed */
  closed: Promise<void>;
}

export interface PipelinedLoad {
  connections: PipelinedConnection[];
  /** resolves once every connection has had `n` answers */
  answered(n: number): Promise<void>;
  /** no connection writes again from now on (what is written stays written) */
  stopWriting(): void;
  /**
   * Writes `count` requests on connection `i` at once, now, as a client that has not yet seen
   * any close of the server's would (the socket is half-open: a FIN from the server does not
   * stop it); a connection the server has already destroyed records the loss as its error.
   */
  send(i: number, count: number): void;
}

export function pipelinedLoad(
  url: string,
  path: string,
  clients: number,
  depth: number,
): PipelinedLoad {
  const { hostname, port } = new URL(url);
  let writing = true;
  const waiters: { n: number; resolve: () => void }[] = [];
  const connections: PipelinedConnection[] = [];
  const sockets: Socket[] = [];
  const check = () => {
    for (const w of [...waiters])
      if (connections.every((c) => c.answers.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  };
  const request = `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`;
  for (let i = 0; i < clients; i++) {
    // half-open: a request written after the server's FIN still goes out, as it does from a
    // client that has not read that FIN yet
    const socket: Socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    sockets.push(socket);
    socket.on('end', () => {
      // the server has closed its side: nothing more can be answered
      if (conn.answers.length < conn.written) conn.error ??= 'closed with requests unanswered';
      // our side a moment later, as a client busy elsewhere reads the FIN late: a request sent
      // meanwhile meets what the server did to the connection (a reset, if it destroyed it)
      setTimeout(() => socket.end(), 50);
    });
    const conn: PipelinedConnection = {
      written: 0,
      answers: [],
      closed: new Promise((resolve) => socket.once('close', () => resolve())),
    };
    connections.push(conn);
    const batch = () => {
      if (!writing || socket.destroyed) return;
      conn.written += depth;
      socket.write(request.repeat(depth));
    };
    socket.once('connect', batch);
    socket.on('error', (err: NodeJS.ErrnoException) => {
      conn.error ??= err.code ?? err.message;
    });
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString('latin1').split('\r\n');
        const headers = new Map(
          head.slice(1).map((line) => {
            const colon = line.indexOf(':');
            return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
          }),
        );
        const length = Number(headers.get('content-length'));
        if (!Number.isInteger(length)) {
          conn.error ??= `an answer without Content-Length: ${head[0]}`;
          socket.destroy();
          return;
        }
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.subarray(end + 4 + length);
        conn.answers.push({
          status: Number(head[0]!.split(' ')[1]),
          connection: headers.get('connection')?.toLowerCase(),
        });
        check();
        if (conn.answers.length === conn.written) batch();
      }
    });
  }
  return {
    connections,
    answered: (n) =>
      new Promise((resolve) => {
        waiters.push({ n, resolve });
        check();
      }),
    stopWriting: () => {
      writing = false;
    },
    send: (i, count) => {
      const socket = sockets[i]!;
      const conn = connections[i]!;
      conn.written += count;
      if (socket.destroyed || socket.writableEnded) {
        conn.error ??= 'the server closed the connection before the request went out';
        return;
      }
      socket.write(request.repeat(count));
    },
  };
}
