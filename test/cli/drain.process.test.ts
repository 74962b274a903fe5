/**
 * SIGTERM under keep-alive load: `attest serve` stops accepting, ends its keep-alive connections
 * (idle ones at once, busy ones after an answer that says `Connection: close`), closes the
 * database, removes the lock and exits 0, rather than serving the open connections until the
 * forced exit (exit 1, lock left behind).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { baseEnv, buildOnce, runBin, serveBin, stopBin, type Served } from '../support/binary.js';
import { keepAliveLoad } from '../support/keepAliveLoad.js';
import { pipelinedLoad } from '../support/pipelinedLoad.js';

describe('attest serve on SIGTERM under keep-alive load', () => {
  let dir: string;
  let server: Served | undefined;
  let env: NodeJS.ProcessEnv;
  let key: string;
  beforeAll(async () => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-drain-'));
    // info: the "shutting down" line says when the drain has begun
    env = baseEnv({ ATTEST_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'info' });
    server = await serveBin(env);
    const created = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
    key = (JSON.parse(created.stdout) as { key: string }).key;
  }, 120_000);
  afterAll(async () => {
    if (server) await stopBin(server);
    rmSync(dir, { recursive: true, force: true });
  });

  it('drains: exits 0, in-flight answers say Connection: close, the lock is gone', async () => {
    // /readyz asks the database: requests are in flight (awaiting PGlite) when the signal comes
    const load = keepAliveLoad(server!.url, '/readyz', 8);
    await load.answered(20);
    // every client kept its one connection open until now
    for (const answers of load.answers)
      expect(answers.every((a) => a.status === 200 && a.connection === 'keep-alive')).toBe(true);
    // a request in flight when the signal comes: its headers are in (100 Continue), its body not yet
    const req = request(new URL('/api/v1/attestation/verify', server!.url), {
      method: 'POST',
      headers: {
        'X-Api-Key': key,
        'Content-Type': 'application/json',
        'Content-Length': '2',
        Expect: '100-continue',
      },
    });
    const answered = new Promise<{ status: number; connection: string | undefined }>(
      (resolve, reject) => {
        req.once('error', reject);
        req.once('response', (res) => {
          res.resume();
          res.once('end', () =>
            resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }),
          );
        });
      },
    );
    const continued = once(req, 'continue');
    req.flushHeaders();
    await continued;
    server!.child.kill('SIGTERM');
    await server!.logLine((l) => l.msg === 'shutting down');
    req.end('{}');
    const inFlight = await answered;
    expect(inFlight.connection).toBe('close');
    expect(inFlight.status).toBeLessThan(500);
    const { code } = await server!.exited;
    // the forced exit after 10 s is exit 1: 0 is a shutdown that finished
    expect(code).toBe(0);
    await load.stopped;
    expect(existsSync(join(dir, 'data', 'attest.lock'))).toBe(false);
    // the load's answers during the drain (if any came) told their client to go, and after its `Connection: close` no client was answered again
    for (const answers of load.answers) {
      const first = answers.findIndex((a) => a.connection === 'close');
      if (first >= 0) expect(answers.length).toBe(first + 1);
    }
  }, 60_000);

  it.each([
    ['one process', []],
    ['--workers 2', ['--workers', '2']],
  ])(
    '%s, the keep-alive race: requests sent on idle keep-alive connections 0-23 ms after the signal, 16 pipelined after a keep-alive answer, are all answered, never reset',
    async (name, extra) => {
      const own = await serveBin(
        baseEnv({ ATTEST_DATA_DIR: join(dir, `race ${name}`), LOG_LEVEL: 'info' }),
        extra,
      );
      // 24 connections, each answered once with keep-alive and idle since: their clients may
      // send again whenever they like
      const load = pipelinedLoad(own.url, '/healthz', 24, 1);
      await load.answered(1);
      load.stopWriting();
      // idle: every request written so far is answered (with keep-alive)
      await vi.waitFor(
        () => expect(load.connections.every((c) => c.answers.length === c.written)).toBe(true),
        { timeout: 10_000, interval: 5 },
      );
      for (const c of load.connections)
        expect(c.answers.every((a) => a.connection === 'keep-alive')).toBe(true);
      const before = load.connections.map((c) => c.written);
      own.child.kill('SIGTERM');
      // each sends 16 pipelined requests at its moment after the signal, 0 to 22 ms, without
      // waiting for the server to say anything: the race a pooled client runs; the last one
      // sends once the drain has begun (the port refuses), so on a machine too busy to start it
      // within those 22 ms the drain still meets requests
      const last = load.connections.length - 1;
      const sent = load.connections.map(
        (_c, i) =>
          new Promise<void>((resolve) => {
            const go = () => {
              load.send(i, 16);
              resolve();
            };
            if (i < last) setTimeout(go, i);
            // ...or 200 ms after the signal at most (with --workers the primary may keep the port
            // a little longer; the connection's linger is 500 ms)
            else
              void Promise.race([
                portRefuses(own.url),
                new Promise((r) => setTimeout(r, 200)),
              ]).then(go);
          }),
      );
      await Promise.all(sent);
      await Promise.all(load.connections.map((c) => c.closed));
      const { code } = await own.exited;
      expect(code).toBe(0);
      // most requests reached the drain: their last answer said Connection: close
      expect(load.connections.some((c) => c.answers.at(-1)?.connection === 'close')).toBe(true);
      const outcome = load.connections.map((c, i) => ({
        error: c.error,
        // the 16 sent after the signal, answered
        answeredAfter: c.answers.length - before[i]!,
        // a Connection: close is the last answer (requests that reached the server before the
        // drain began were answered keep-alive, and their connection closed by a FIN later)
        closeBeforeLast: c.answers.slice(0, -1).some((a) => a.connection === 'close'),
        failed: c.answers.filter((a) => a.status !== 200).length,
      }));
      expect(outcome).toEqual(
        load.connections.map(() => ({
          error: undefined,
          answeredAfter: 16,
          closeBeforeLast: false,
          failed: 0,
        })),
      );
    },
    60_000,
  );

  it.each([
    ['one process', []],
    ['--workers 2', ['--workers', '2']],
  ])(
    '%s answers every request that reached it, pipelined ones included, the last with Connection: close; no connection is reset',
    async (name, extra) => {
      const own = await serveBin(
        baseEnv({ ATTEST_DATA_DIR: join(dir, `pipelined ${name}`), LOG_LEVEL: 'info' }),
        extra,
      );
      // 16 connections, 3 requests on the wire at a time, each batch written the moment the one
      // before is answered: at the signal, most connections have requests the server has not read
      const load = pipelinedLoad(own.url, '/readyz', 16, 3);
      await load.answered(30);
      load.stopWriting();
      own.child.kill('SIGTERM');
      await Promise.all(load.connections.map((c) => c.closed));
      const { code } = await own.exited;
      expect(code).toBe(0);
      // a connection with nothing unanswered may be closed without a word (it was idle); one with
      // requests on the wire gets them all answered, the last with Connection: close
      expect(load.connections.some((c) => c.answers.at(-1)?.connection === 'close')).toBe(true);
      const outcome = load.connections.map((c) => ({
        error: c.error,
        unanswered: c.written - c.answers.length,
        // a Connection: close is the last answer on its connection
        answeredAfterClose: c.answers.some(
          (a, i) => a.connection === 'close' && i < c.answers.length - 1,
        ),
        // /readyz answers 503 when the database gave no answer within 250 ms (a machine busy
        // enough, as with two suites at once): a deliberate answer, unlike a 500 or a reset
        failed: c.answers.filter((a) => a.status !== 200 && a.status !== 503).length,
      }));
      expect(outcome).toEqual(
        load.connections.map(() => ({
          error: undefined,
          unanswered: 0,
          answeredAfterClose: false,
          failed: 0,
        })),
      );
    },
    60_000,
  );
});

/** Resolves once `url`'s port refuses a new connection: the server stopped listening (its drain). */
async function portRefuses(url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname);
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
    await new Promise((r) => setTimeout(r, 2));
  }
}
