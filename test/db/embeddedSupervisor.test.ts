/**
 * The embedded server's supervisor: a server that exits unasked is started again on the same URL,
 * and one that cannot start again within the bound is given up (`failed` resolves), so that
 * `attest serve` exits and its own supervisor restarts the appliance.
 */
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCluster, PG_DIR } from '../../src/db/embeddedServer.js';
import { superviseServer, type EmbeddedEvent } from '../../src/db/embeddedSupervisor.js';
import { adminClient } from '../support/embeddedServer.js';

function postmasterPid(dataDir: string): number {
  return Number(readFileSync(join(dataDir, PG_DIR, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

async function selectOne(url: string): Promise<number> {
  const sql = adminClient(url);
  try {
    const [row] = await sql<{ one: number }[]>`select 1 as one`;
    return row!.one;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

describe('the embedded server supervisor', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'attest-supervisor-'));
    createCluster(dataDir);
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts a killed server again on the same URL, then gives up on one that cannot start', async () => {
    const events: EmbeddedEvent[] = [];
    const server = await superviseServer(dataDir, {
      onEvent: (e) => events.push(e),
      restartBoundMs: 3_000,
    });
    try {
      expect(await selectOne(server.url)).toBe(1);
      const first = server.pid;
      process.kill(first, 'SIGKILL');
      await expect
        .poll(() => events.map((e) => e.event), { timeout: 20_000 })
        .toContain('restarted');
      expect(events[0]).toMatchObject({ event: 'exited', pid: first, signal: 'SIGKILL' });
      expect(server.pid).not.toBe(first);
      expect(postmasterPid(dataDir)).toBe(server.pid);
      expect(await selectOne(server.url)).toBe(1);

      // a configuration the server refuses: every start fails until the bound
      appendFileSync(join(dataDir, PG_DIR, 'postgresql.conf'), '\nno_such_setting = 1\n');
      events.length = 0;
      process.kill(server.pid, 'SIGKILL');
      const failed = await server.failed;
      // the cause is the server's own word (its FATAL line), not the supervisor's
      expect(failed.message).toMatch(
        /did not start again within 3 s: PostgreSQL did not start .*contains errors/,
      );
      const kinds = events.map((e) => e.event);
      expect(kinds[0]).toBe('exited');
      expect(kinds).toContain('restart-failed');
      expect(kinds.at(-1)).toBe('gave-up');
    } finally {
      await server.stop();
    }
  }, 60_000);
});
