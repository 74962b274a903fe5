import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AppEnv } from '../../src/server/appEnv.js';
import { readBody, TOO_LARGE } from '../../src/server/readBody.js';

// the Node path (bytes from IncomingMessage) over a real socket; app.test.ts covers the Web Request path
const LIMIT = 1000;
const outcomes: unknown[] = [];
const app = new Hono<AppEnv>();
app.post('/', async (c) => {
  try {
    const body = await readBody(c, LIMIT);
    outcomes.push(body === TOO_LARGE ? 'too large' : Buffer.from(body).toString());
    return c.text(
      body === TOO_LARGE ? 'too large' : `${body.length}`,
      body === TOO_LARGE ? 413 : 200,
    );
  } catch (err) {
    outcomes.push(err);
    return c.text('broken', 400);
  }
});
const server = createAdaptorServer({ fetch: app.fetch });
let port = 0;
beforeAll(
  () =>
    new Promise<void>((resolve) =>
      server.listen(
        0,
        '127.0.0.1',
        () => ((port = (server.address() as AddressInfo).port), resolve()),
      ),
    ),
);
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends raw request text in pieces and returns the status line, or '' when the server closed without one. */
function raw(pieces: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => {
      received += d.toString();
      if (received.includes('\r\n')) {
        socket.destroy();
        resolve(received.split('\r\n')[0]!);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received.split('\r\n')[0] ?? ''));
    void (async () => {
      for (const piece of pieces) {
        socket.write(piece);
        await new Promise((r) => setImmediate(r));
      }
    })();
  });
}

const head = (extra: string) =>
  `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}\r\n`;

describe('readBody from a Node request', () => {
  it('reads a body that arrives in several chunks, whole', async () => {
    outcomes.length = 0;
    const body = `{"a":"${'x'.repeat(900)}"}`;
    const status = await raw([
      head(`Content-Length: ${body.length}\r\n`),
      body.slice(0, 300),
      body.slice(300, 600),
      body.slice(600),
    ]);
    expect(status).toBe('HTTP/1.1 200 OK');
    expect(outcomes).toEqual([body]);
  });

  it('reads a chunked body up to the limit, and answers TOO_LARGE one byte past it', async () => {
    outcomes.length = 0;
    const chunk = (s: string) => `${s.length.toString(16)}\r\n${s}\r\n`;
    expect(
      await raw([
        head('Transfer-Encoding: chunked\r\n'),
        chunk('y'.repeat(600)),
        chunk('y'.repeat(400)),
        '0\r\n\r\n',
      ]),
    ).toBe('HTTP/1.1 200 OK');
    expect(
      await raw([
        head('Transfer-Encoding: chunked\r\n'),
        chunk('y'.repeat(600)),
        chunk('y'.repeat(401)),
      ]),
    ).toBe('HTTP/1.1 413 Payload Too Large');
    expect(outcomes).toEqual(['y'.repeat(1000), 'too large']);
  });

  it('refuses a Content-Length over the limit before any body byte arrives', async () => {
    outcomes.length = 0;
    expect(await raw([head(`Content-Length: ${LIMIT + 1}\r\n`)])).toBe(
      'HTTP/1.1 413 Payload Too Large',
    );
    expect(outcomes).toEqual(['too large']);
  });

  it('rejects when the client breaks off mid-body', async () => {
    outcomes.length = 0;
    const socket = connect(port, '127.0.0.1');
    const held = new Promise((r) => server.once('request', r));
    socket.write(`${head('Content-Length: 500\r\n')}{"a":"only part`);
    await held;
    socket.destroy();
    await vi.waitFor(() => expect(outcomes).toHaveLength(1), { timeout: 10_000, interval: 5 });
    expect(outcomes[0]).toBeInstanceOf(Error);
  });
});
