/**
 * Reads an HTTP answer's body with a ceiling: a declared Content-Length above it is refused
 * before anything is read, and the stream is cancelled as soon as the bytes read pass it, so a
 * peer that sends (or claims) gigabytes costs at most `maxBytes` of memory. Web-standard only
 * (no runtime dependencies): the published client uses it, and so do the service's own outbound
 * calls (Apple, Google, the Android status list), so it sits in src/, below both; the client
 * package ships it beside dist/client/.
 */

/** The body was larger than the caller's ceiling (nothing past the ceiling was kept). */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
  constructor(readonly maxBytes: number) {
    super(`the answer is larger than ${maxBytes} bytes`);
  }
}

/** The body's bytes, at most `maxBytes` of them; more throws BodyTooLargeError. */
export async function readBoundedBody(response: Response, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => {});
    throw new BodyTooLargeError(maxBytes);
  }
  return readBoundedStream(response.body, maxBytes);
}

/**
 * A web stream's bytes, at most `maxBytes` of them: the stream is cancelled as soon as more
 * arrive (so the rest is never read from the socket), and BodyTooLargeError is thrown.
 */
export async function readBoundedStream(
  stream: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<Uint8Array> {
  if (!stream) return new Uint8Array(0);
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new BodyTooLargeError(maxBytes);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/** The body as UTF-8 text, at most `maxBytes` bytes of it (see readBoundedBody). */
export async function readBoundedText(response: Response, maxBytes: number): Promise<string> {
  return new TextDecoder().decode(await readBoundedBody(response, maxBytes));
}
