import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import { BodyTooLargeError, readBoundedStream } from '../readBoundedBody.js';
import type { AppEnv } from './appEnv.js';
import { requestHeader } from './requestHeader.js';

/** The body was larger than the limit (answer 413). */
export const TOO_LARGE = Symbol('too large');

/**
 * The request body, or TOO_LARGE past `limit` bytes: a Content-Length over it is refused before any
 * byte is read, a streamed body is cut where it crosses it. Under @hono/node-server the bytes come
 * straight from Node's IncomingMessage: asking Hono for the body builds a full Web Request and a
 * web stream around it, a measurable share of a verify's CPU (docs/benchmark-http.md). Elsewhere
 * (app.request in tests) the Web Request's stream is read. A client that breaks off rejects.
 */
export async function readBody(
  c: Context<AppEnv>,
  limit: number,
): Promise<Uint8Array | typeof TOO_LARGE> {
  const length = requestHeader(c, 'content-length');
  if (
    length !== undefined &&
    requestHeader(c, 'transfer-encoding') === undefined &&
    Number.parseInt(length, 10) > limit
  )
    return TOO_LARGE;
  const incoming = c.env?.incoming;
  if (incoming && typeof (incoming as IncomingMessage).on === 'function')
    return readIncoming(incoming as IncomingMessage, limit);
  return readStream(c.req.raw.body, limit);
}

function readIncoming(
  incoming: IncomingMessage,
  limit: number,
): Promise<Uint8Array | typeof TOO_LARGE> {
  if (incoming.readableEnded) return Promise.resolve(new Uint8Array(0));
  if (incoming.destroyed)
    return Promise.reject(new Error('the client closed the connection before the body ended'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        // the adapter drains (or cuts off) the rest once the answer is sent
        incoming.pause();
        resolve(TOO_LARGE);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    const onClose = () => {
      stop();
      reject(new Error('the client closed the connection before the body ended'));
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('close', onClose);
  });
}

async function readStream(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<Uint8Array | typeof TOO_LARGE> {
  try {
    return await readBoundedStream(body, limit);
  } catch (err) {
    if (err instanceof BodyTooLargeError) return TOO_LARGE;
    throw err;
  }
}
