/**
 * A TCP proxy in front of PostgreSQL that a test can break: `forward` (normal), `stall` (new
 * connections are accepted but nothing is forwarded; open ones freeze with their bytes held back),
 * `refuse` (the database is down: open connections are closed, new ones closed as soon as they
 * are accepted), `cut()` (close every open connection, mid-query if one is running), and
 * `cutAfter(text)` (close the connection that sends `text` right after its answer). Going back
 * to `forward` releases the frozen connections with the bytes they held.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

type Mode = 'forward' | 'stall' | 'refuse';

interface Pair {
  client: Socket;
  upstream: Socket | null;
  /** bytes held back while stalled, per direction */
  toUpstream: Buffer[];
  toClient: Buffer[];
}

export interface TcpProxy {
  port: number;
  /** rewrites a postgres URL to go through the proxy */
  urlFor(url: string): string;
  /** `keepFrozen`: open connections stay frozen for good (a peer lost without a reset) */
  setMode(mode: Mode, options?: { keepFrozen?: boolean }): void;
  /** destroys every open connection */
  cut(): void;
  /**
   * Destroys the connection whose client sends bytes containing `text`, right after forwarding
   * the database's first answer to them (a statement that ran, then the connection is gone);
   * resolves once it did.
   */
  cutAfter(text: string): Promise<void>;
  connections(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(upstreamHost: string, upstreamPort: number): Promise<TcpProxy> {
  let mode: Mode = 'forward';
  const pairs = new Set<Pair>();
  const frozen = new Set<Pair>();
  let armed: { text: string; pair?: Pair; done: () => void } | undefined;

  const openUpstream = (pair: Pair) => {
    const upstream = connect(upstreamPort, upstreamHost);
    pair.upstream = upstream;
    upstream.on('data', (d) => {
      if (mode === 'forward' && !frozen.has(pair)) pair.client.write(d);
      else pair.toClient.push(d);
      if (armed?.pair === pair) {
        const { done } = armed;
        armed = undefined;
        // the answer is written first: the client reads it, then meets the closed connection
        pair.client.end(() => {
          pair.client.destroy();
          upstream.destroy();
          done();
        });
      }
    });
    upstream.on('error', () => pair.client.destroy());
    upstream.on('close', () => pair.client.destroy());
    for (const d of pair.toUpstream.splice(0)) upstream.write(d);
  };

  const server: Server = createServer((client) => {
    if (mode === 'refuse') {
      client.on('error', () => {});
      client.destroy();
      return;
    }
    const pair: Pair = { client, upstream: null, toUpstream: [], toClient: [] };
    pairs.add(pair);
    client.on('data', (d) => {
      if (armed && !armed.pair && d.includes(armed.text)) armed.pair = pair;
      if (mode === 'forward' && pair.upstream && !frozen.has(pair)) pair.upstream.write(d);
      else pair.toUpstream.push(d);
    });
    client.on('error', () => {});
    client.on('close', () => {
      pairs.delete(pair);
      frozen.delete(pair);
      pair.upstream?.destroy();
    });
    if (mode === 'forward') openUpstream(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const cutAll = () => {
    for (const pair of pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    pairs.clear();
  };

  return {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    setMode(next, options = {}) {
      if (next === 'refuse') {
        mode = next;
        cutAll();
        return;
      }
      if (next === 'forward' && options.keepFrozen) {
        for (const pair of pairs) frozen.add(pair);
      }
      mode = next;
      if (next !== 'forward') return;
      for (const pair of pairs) {
        if (frozen.has(pair)) continue;
        if (!pair.upstream) openUpstream(pair);
        else for (const d of pair.toUpstream.splice(0)) pair.upstream.write(d);
        for (const d of pair.toClient.splice(0)) pair.client.write(d);
      }
    },
    cut: cutAll,
    cutAfter: (text) => new Promise<void>((done) => (armed = { text, done })),
    connections: () => pairs.size,
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A local port that nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
