/**
 * The built binary in real processes: `serve` owning the embedded data dir while other commands
 * go through its admin socket, a second `serve` refused, and output piped into `head`.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import {
  baseEnv,
  BIN,
  buildOnce,
  ROOT,
  runBin,
  runProcess,
  serveBin,
  stopBin,
  type Served,
} from '../support/binary.js';
import { it } from '../support/fixtures.js';

let env: NodeJS.ProcessEnv;

describe('the attest binary on one embedded data dir', () => {
  let server: Served | undefined;

  it.beforeAll(async ({ dataDir }) => {
    buildOnce();
    env = baseEnv(dataDir.env);
    // enough rows that `keys list` outlives head: written before the server owns the database
    const handle = await openDatabase({ dataDir: dataDir.path, role: 'cli' });
    await handle.db.execute(
      sql`insert into api_keys (id, name, hash) select 'bulk' || lpad(i::text, 12, '0'), 'bulk key ' || i, 'x' from generate_series(1, 3000) as i`,
    );
    await handle.close();
    server = await serveBin(env);
  }, 120_000);
  afterAll(async () => {
    if (server) await stopBin(server);
  });

  it('keys create goes through the running server’s admin socket, and the key works there at once', async () => {
    const run = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const created = JSON.parse(run.stdout) as { key: string };
    const res = await fetch(`${server!.url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': created.key },
    });
    expect(res.status).toBe(200);
    const allow = await runBin(
      ['allowlist', 'add', 'apple', 'ABCDE12345.com.example.bank', '--json'],
      env,
    );
    expect(allow.code).toBe(0);
    const status = await runBin(['db', 'status', '--json'], env);
    expect((JSON.parse(status.stdout) as { applied: boolean }[]).every((m) => m.applied)).toBe(
      true,
    );
  });

  it('a second serve on the same data dir fails with one clear line, exit 3', async () => {
    const second = await runBin(['serve', '--port', '0', '--host', '127.0.0.1'], env);
    expect(second.code).toBe(3);
    expect(second.stdout).toBe('');
    const lines = second.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^attest: the embedded database in .* is in use by attest serve \\(pid ${server!.child.pid}, --port 0\\).*ATTEST_DATA_DIR`,
      ),
    );
    // and the first server is unharmed
    expect((await fetch(`${server!.url}/readyz`)).status).toBe(200);
  });

  it('keys list piped into head exits cleanly (no EPIPE noise, exit 0)', async () => {
    for (const command of ['keys list', 'keys list --json']) {
      const run = await runProcess(
        'bash',
        ['-c', `node ${BIN} ${command} | head -1; echo "exit=\${PIPESTATUS[0]}"`],
        env,
      );
      const lines = run.stdout.split('\n').filter(Boolean);
      expect(lines).toHaveLength(2);
      expect(lines[1]).toBe('exit=0');
      expect(run.stderr).toBe('');
    }
  });

  it('SIGTERM stops serve cleanly and frees the data dir', async () => {
    server!.child.kill('SIGTERM');
    expect((await server!.exited).code).toBe(0);
    expect(existsSync(join(env.ATTEST_DATA_DIR!, 'attest.lock'))).toBe(false);
    // with no server the CLI opens the directory itself
    const list = await runBin(['keys', 'list', '--json'], env);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as unknown[]).length).toBeGreaterThan(3000);
  }, 20_000);
});

describe('the attest binary outside its checkout', () => {
  it('--version prints the package’s own version, not the npm project’s it runs in', async () => {
    buildOnce();
    const cwd = mkdtempSync(join(tmpdir(), 'attest-version-'));
    try {
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        version: string;
      };
      // npm exec (npx) sets npm_package_version to the surrounding project's version
      const run = await runBin(
        ['--version'],
        { PATH: process.env.PATH, npm_package_version: '9.9.9' },
        { cwd },
      );
      expect(run).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
