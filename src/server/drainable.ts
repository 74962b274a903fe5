import type { Server, ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';

/** An HTTP server that can be closed while keep-alive clients keep sending. */
export interface Drainable {
  /**
   * Stops accepting, answers every request that has reached the server (in flight, pipelined
   * behind another, or on the wire and not yet read) and tells each connection's last answer
   * `Connection: close`, closes the connections left idle, and resolves once every connection is
   * closed: the ones still open after `graceMs` are cut.
   */
  drain(graceMs: number): Promise<void>;
}

/**
 * Runs `fn` after the event loop has polled for I/O once more: bytes that reached a socket before
 * the call are read and parsed by then, so a connection whose next request has arrived is busy
 * with it rather than idle.
 */
const afterNextPoll = (fn: () => void) => setImmediate(() => setImmediate(fn));

/**
 * Tracks `server`'s responses so that `drain` can end its keep-alive connections. Node's
 * `server.close()` alone stops the listener but serves an open keep-alive connection for as long
 * as its client keeps sending, so under load close() never finished; and it closes the
 * connections it counts idle at once, which include one whose next request is on the wire but
 * not yet read (its client got a reset).
 */
export function drainable(server: Server): Drainable {
  let draining = false;
  // in arrival order: a pipelined answer comes after the ones before it on its connection
  const inFlight = new Set<ServerResponse>();
  const closeIdleSoon = () => afterNextPoll(() => server.closeIdleConnections());
  // before the app's listener, so a request that arrives while draining is marked before any answer
  server.prependListener('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    if (draining) closeAfterLast(res);
    res.once('close', () => {
      inFlight.delete(res);
      // an answer that kept its connection (headers sent before the drain, or more requests
      // behind it): close the connection once it is idle
      if (draining) closeIdleSoon();
    });
  });

  /** Whether a request that arrived after `res` on its connection waits, or unread bytes do. */
  const moreBehind = (res: ServerResponse): boolean => {
    const socket = res.req.socket;
    if (socket.readableLength > 0) return true;
    let after = false;
    for (const other of inFlight) {
      if (other === res) after = true;
      else if (after && other.req.socket === socket) return true;
    }
    return false;
  };

  /**
   * Decides at the answer's headers (not before: requests pipelined behind it are parsed by
   * then) whether it is its connection's last: Node writes `Connection: close` and ends the
   * socket after an answer that may not keep it; an answer with more requests behind it keeps
   * the connection for them.
   */
  const closeAfterLast = (res: ServerResponse) => {
    if (res.headersSent) return;
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
      if (!moreBehind(res)) res.shouldKeepAlive = false;
      return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof res.writeHead;
  };

  let drained: Promise<void> | undefined;
  return {
    drain(graceMs) {
      drained ??= new Promise<void>((resolve) => {
        draining = true;
        for (const res of inFlight) closeAfterLast(res);
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        // stop listening without http.Server#close's immediate closing of idle connections
        NetServer.prototype.close.call(server, () => {
          clearTimeout(cut);
          resolve();
        });
        closeIdleSoon();
      });
      return drained;
    },
  };
}
