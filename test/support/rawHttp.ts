/** Raw HTTP/1.1 over a TCP socket, for what fetch will not do (chunked abuse, slow clients). */
import { connect, type Socket } from 'node:net';

export interface RawExchange {
  socket: Socket;
  /** everything the server sent so far */
  received(): string;
  /** resolves with the status code once a status line arrived */
  status(): Promise<number>;
  /** resolves (with ms since connect) when the server closes the connection */
  closed(): Promise<number>;
  write(data: string | Uint8Array): Promise<boolean>;
}

/** Opens a connection to `url`'s host and port. */
export async function rawConnect(url: string): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = performance.now();
  let text = '';
  const waiters: (() => void)[] = [];
  socket.on('data', (d) => {
    text += d.toString('latin1');
    for (const w of waiters.splice(0)) w();
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => resolve(performance.now() - started)),
  );
  return {
    socket,
    received: () => text,
    status: () =>
      new Promise<number>((resolve, reject) => {
        const check = () => {
          const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
          if (m) return resolve(Number(m[1]));
          waiters.push(check);
        };
        closed.then(() =>
          /^HTTP\/1\.1 (\d{3})/.test(text)
            ? check()
            : reject(new Error(`closed without a status: ${text}`)),
        );
        check();
      }),
    closed: () => closed,
    write: (data) =>
      new Promise<boolean>((resolve) => {
        if (socket.destroyed || !socket.writable) return resolve(false);
        socket.write(data, (err) => resolve(!err));
      }),
  };
}
