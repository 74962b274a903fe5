import type { Server, ServerResponse } from 'node:http';

/** An HTTP server that can be closed while keep-alive clients keep sending. */
export interface Drainable {
  /**
   * Stops accepting, closes idle keep-alive connections, answers what is in flight (and any
   * request already arriving on an open connection) with `Connection: close`, and resolves once
   * every connection is closed: the ones still open after `graceMs` are cut.
   */
  drain(graceMs: number): Promise<void>;
}

/**
 * Tracks `server`'s responses so that `drain` can end its keep-alive connections. Node's
 * `server.close()` alone stops the listener but serves an open keep-alive connection for as long
 * as its client keeps sending, so under load close() never finished.
 */
export function drainable(server: Server): Drainable {
  let draining = false;
  const inFlight = new Set<ServerResponse>();
  // before the app's listener, so a request that arrives while draining is told before any answer
  server.prependListener('request', (_req, res: ServerResponse) => {
    if (draining) res.shouldKeepAlive = false;
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
      // an answer whose headers went out before the drain kept its connection: close it once idle
      if (draining) setImmediate(() => server.closeIdleConnections());
    });
  });
  let drained: Promise<void> | undefined;
  return {
    drain(graceMs) {
      drained ??= new Promise<void>((resolve) => {
        draining = true;
        // Node writes `Connection: close` and ends the socket after an answer that may not keep it
        for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      });
      return drained;
    },
  };
}
