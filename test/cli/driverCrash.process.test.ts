/**
 * postgres.js 3.4.9 throws an uncaught TypeError (`Cannot read properties of null (reading
 * 'write')` in nextWrite, upstream #1154 and #1208) when a connection is cut right after a
 * statement of a transaction: without a guard, `attest serve` exits 1. The statistics pruner's
 * statement (about 5 s after start) is cut right after its answer, through a TCP proxy; the server
 * logs the fault, replaces its pool and keeps answering.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, buildOnce, runBin, serveBin, stopBin, type Served } from '../support/binary.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { startTcpProxy, type TcpProxy } from '../support/tcpProxy.js';

const pg = postgresBackend();

describe.skipIf(!pg)('attest serve when a connection is cut right after a statement', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let server: Served | undefined;
  let env: NodeJS.ProcessEnv;
  let key: string;
  beforeAll(async () => {
    buildOnce();
    db = await pg!.open();
    const u = new URL(db.url!);
    proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
    env = baseEnv({
      DATABASE_URL: proxy.urlFor(db.url!),
      ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV,
      LOG_LEVEL: 'info',
    });
    const created = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
    key = (JSON.parse(created.stdout) as { key: string }).key;
  }, 120_000);
  afterAll(async () => {
    if (server) await stopBin(server);
    await proxy?.close();
    await db?.close();
  });

  it('survives the driver crash, logs it, and keeps answering', async () => {
    // armed before start: the statistics pruner's delete runs about 5 s after the server listens
    const cut = proxy.cutAfter('delete from verification_stats');
    server = await serveBin(env);
    await cut;
    const fault = await Promise.race([
      server.logLine((l) => /postgres\.js nextWrite/.test(String(l.msg))),
      server.exited.then(({ code }) => {
        throw new Error(`attest serve exited ${code}: ${server!.stderr()}`);
      }),
    ]);
    expect(fault.level).toBe(50);
    expect(fault.err).toMatchObject({ type: 'TypeError' });
    // it answers on a new pool: readiness, and an API call that reads and writes
    let ready = 0;
    for (let i = 0; i < 50 && ready !== 200; i++) {
      ready = (await fetch(`${server.url}/readyz`)).status;
      if (ready !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(ready).toBe(200);
    const init = await fetch(`${server.url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': key },
    });
    expect(init.status).toBe(200);
    expect(server.child.exitCode).toBeNull();
    await stopBin(server);
    expect((await server.exited).code).toBe(0);
  }, 60_000);
});
