import type { Server } from 'node:http';
import { createServer } from 'node:net';
import { createAdaptorServer, type serve } from '@hono/node-server';

/** Rejects with the listen error (EADDRINUSE, EACCES) that listening on port/host would meet. */
export function assertPortFree(port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/**
 * Serves `fetch` on port/hostname; resolves once listening, rejects with the listen error.
 * `reusePort`: a socket of this process's own beside others on the port (SO_REUSEPORT, exclusive
 * of node:cluster's hand-over), for a worker of `serve --workers` where Node has it.
 */
export function listen(
  fetch: Parameters<typeof serve>[0]['fetch'],
  port: number,
  hostname: string,
  serverOptions: object,
  reusePort = false,
): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const s = createAdaptorServer({ fetch, serverOptions }) as Server;
    s.once('error', reject);
    s.listen(
      { port, host: hostname, ...(reusePort ? { reusePort: true, exclusive: true } : {}) },
      () => resolve(s),
    );
  });
}

/**
 * A port for the workers to share with `reusePort` when port 0 (any) was asked: one socket of
 * the primary holds it (with SO_REUSEPORT) until they listen on it; `release` closes it.
 */
export function reservePort(host: string): Promise<{ port: number; release(): Promise<void> }> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ port: 0, host, reusePort: true, exclusive: true }, () => {
      const address = probe.address();
      resolve({
        port: typeof address === 'object' && address ? address.port : 0,
        release: () => new Promise<void>((done) => probe.close(() => done())),
      });
    });
  });
}

/** The port really bound (port 0 asks for any). */
export function portOf(server: Server, fallback: number): number {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : fallback;
}

/** The address really bound (0.0.0.0 when that is what listens), not a guess at a reachable one. */
export function urlOf(server: Server, host: string, fallbackPort: number): string {
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.address : host;
  return `http://${bound.includes(':') ? `[${bound}]` : bound}:${portOf(server, fallbackPort)}`;
}

/** Stops accepting connections and closes the idle ones; resolves when the server is closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
