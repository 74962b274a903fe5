import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { lagAwareDeadline, LagAwareTimeoutError } from '../../src/db/lagAwareDeadline.js';

/** Blocks the event loop for `ms` (what a saturated process does to every timer and socket). */
function block(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Two ends of a local TCP connection. */
async function socketPair() {
  let server!: Socket;
  const listener = createServer((s) => (server = s));
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const port = (listener.address() as { port: number }).port;
  const client = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => client.once('connect', resolve));
  while (!server) await new Promise((r) => setImmediate(r));
  return {
    client,
    server,
    close: async () => {
      client.destroy();
      server.destroy();
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}

describe('lagAwareDeadline', () => {
  it('passes an answer and a failure through', async () => {
    await expect(lagAwareDeadline(Promise.resolve('row'), 1000)).resolves.toBe('row');
    const fault = new Error('refused');
    await expect(lagAwareDeadline(Promise.reject(fault), 1000)).rejects.toBe(fault);
  });

  it('times out a silence', async () => {
    await expect(lagAwareDeadline(new Promise(() => {}), 50)).rejects.toBeInstanceOf(
      LagAwareTimeoutError,
    );
  });

  it('does not time out an answer that reached its socket while the loop was blocked past the deadline', async () => {
    const { client, server, close } = await socketPair();
    try {
      const answer = new Promise<string>((resolve) =>
        client.once('data', (d) => resolve(String(d))),
      );
      const judged = lagAwareDeadline(answer, 100);
      // the answer is in the kernel's buffer at 5 ms, then the loop is blocked for 3x the
      // deadline: when it runs again the deadline's timer is due before the socket is read
      // (in the check phase: the next turn of the loop runs its timers before it reads sockets)
      setTimeout(
        () =>
          setImmediate(() => {
            server.write('row');
            block(300);
          }),
        5,
      );
      await expect(judged).resolves.toBe('row');
    } finally {
      await close();
    }
  });

  it('a late window is granted again: a silence after a blocked loop still times out', async () => {
    const started = performance.now();
    const judged = lagAwareDeadline(new Promise(() => {}), 100);
    setTimeout(() => block(300), 5);
    await expect(judged).rejects.toBeInstanceOf(LagAwareTimeoutError);
    // the first window was lost to the block: a second one of 100 ms followed it
    expect(performance.now() - started).toBeGreaterThanOrEqual(400);
  });
});
