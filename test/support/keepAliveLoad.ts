/**
 * Clients that each hold one keep-alive connection and send requests back to back, as a load
 * balancer or an RP's pooled HTTP client does: what a shutdown must drain.
 */
import { Agent, request } from 'node:http';

export interface KeepAliveAnswer {
  status: number;
  /** the Connection header of the answer */
  connection: string | undefined;
  /** performance.now() when it came */
  at: number;
}

export interface KeepAliveLoad {
  /** every answer so far, per client */
  answers: KeepAliveAnswer[][];
  /** resolves once every client has had `n` answers */
  answered(n: number): Promise<void>;
  /** resolves once every client has stopped (its connection closed and a new one refused) */
  stopped: Promise<void>;
}

/** `clients` keep-alive clients sending GET `path` to `url` until the server stops answering. */
export function keepAliveLoad(url: string, path: string, clients: number): KeepAliveLoad {
  const answers: KeepAliveAnswer[][] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const check = () => {
    for (const w of [...waiters])
      if (answers.every((a) => a.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  };
  const client = async (mine: KeepAliveAnswer[]) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (;;) {
        const answer = await new Promise<KeepAliveAnswer | null>((resolve) => {
          const req = request(new URL(path, url), { agent }, (res) => {
            res.resume();
            res.once('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                connection: res.headers.connection,
                at: performance.now(),
              }),
            );
            res.once('error', () => resolve(null));
          });
          // refused or reset: the server no longer serves this client
          req.once('error', () => resolve(null));
          req.end();
        });
        if (!answer) return;
        mine.push(answer);
        check();
      }
    } finally {
      agent.destroy();
    }
  };
  const runs: Promise<void>[] = [];
  for (let i = 0; i < clients; i++) {
    const mine: KeepAliveAnswer[] = [];
    answers.push(mine);
    runs.push(client(mine));
  }
  return {
    answers,
    answered: (n) =>
      new Promise<void>((resolve) => {
        waiters.push({ n, resolve });
        check();
      }),
    stopped: Promise.all(runs).then(() => {}),
  };
}
