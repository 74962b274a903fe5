import type { Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/** An HTTP server that can be closed while keep-alive clients keep sending. */
export interface Drainable {
  /**
   * Stops accepting, answers every request that has reached the server (in flight, pipelined
   * behind another, on the wire and not yet read, or sent on a keep-alive connection within
   * DRAIN_LINGER_MS of its last answer) and tells each connection's last answer
   * `Connection: close`, closes the connections left idle that long, and resolves once every
   * connection is closed: the ones still open after `graceMs` are cut.
   */
  drain(graceMs: number): Promise<void>;
}

/**
 * How long a keep-alive connection with nothing to answer stays open once the drain has begun,
 * counted from its last answer (or from the drain, for one idle before it). A client that was
 * told keep-alive may send again at any moment: its request may be on the wire when the drain
 * starts, or written before our close reaches it. Closing such a connection at once reset those
 * requests (keep-alive requests sent 8-15 ms after the signal; 16 requests pipelined after a
 * keep-alive answer). A request that arrives within this time is answered, with
 * `Connection: close`; a connection still idle after it is closed with a FIN, never a reset.
 */
export const DRAIN_LINGER_MS = 500;

/**
 * Tracks `server`'s connections and responses so that `drain` can end its keep-alive
 * connections. Node's `server.close()` alone stops the listener but serves an open keep-alive
 * connection for as long as its client keeps sending, so under load close() never finished; and
 * it closes the connections it counts idle at once, which include one whose next request is on
 * the wire, or about to be (its client got a reset).
 */
export function drainable(
  server: Server,
  options: { lingerMs?: number; now?: () => number } = {},
): Drainable {
  const lingerMs = options.lingerMs ?? DRAIN_LINGER_MS;
  const now = options.now ?? Date.now;
  let draining = false;
  // in arrival order: a pipelined answer comes after the ones before it on its connection
  const inFlight = new Set<ServerResponse>();
  // the open connections with nothing to answer, and since when
  const idleSince = new Map<Socket, number>();
  server.on('connection', (socket: Socket) => {
    idleSince.set(socket, now());
    socket.once('close', () => idleSince.delete(socket));
  });
  const busy = (socket: Socket) => {
    for (const res of inFlight) if (res.req.socket === socket) return true;
    return false;
  };

  let sweeper: NodeJS.Timeout | undefined;
  /** Closes the connections idle for `lingerMs`; runs again while any is left to watch. */
  const sweep = () => {
    sweeper = undefined;
    const at = now();
    let next = Infinity;
    for (const [socket, since] of idleSince) {
      const left = since + lingerMs - at;
      // bytes that reached it and are not parsed yet make it busy, not idle
      if (left > 0 || socket.readableLength > 0) {
        next = Math.min(next, Math.max(left, 10));
        continue;
      }
      idleSince.delete(socket);
      // a FIN, not a reset: the client sees the connection end; one that does not close its
      // side in another linger is cut, so it cannot hold the drain until the grace ends
      socket.end();
      setTimeout(() => socket.destroy(), lingerMs).unref();
    }
    if (next !== Infinity) arm(next);
  };
  const arm = (ms: number) => {
    if (sweeper !== undefined) return;
    sweeper = setTimeout(sweep, ms);
  };

  // before the app's listener, so a request that arrives while draining is marked before any answer
  server.prependListener('request', (req, res: ServerResponse) => {
    inFlight.add(res);
    idleSince.delete(req.socket);
    if (draining) closeAfterLast(res);
    res.once('close', () => {
      inFlight.delete(res);
      const socket = req.socket;
      // an answer that kept its connection (headers sent before the drain, or more requests
      // behind it): the connection is idle from now, and closed once it has stayed so
      if (!socket.destroyed && !socket.writableEnded && !busy(socket)) {
        idleSince.set(socket, now());
        if (draining) arm(lingerMs);
      }
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
        // a connection idle before the drain gets its linger from now: its client may be
        // sending this moment
        const at = now();
        for (const socket of idleSince.keys()) idleSince.set(socket, at);
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        // stop listening without http.Server#close's immediate closing of idle connections
        NetServer.prototype.close.call(server, () => {
          clearTimeout(cut);
          clearTimeout(sweeper);
          resolve();
        });
        arm(lingerMs);
      });
      return drained;
    },
  };
}
