/**
 * Start-up and database failures of the built binary, as a user meets them: what `serve` says
 * while it starts, that a failed start exits 3 and releases the data dir, one line naming the
 * cause for every database failure (never a hang), and no stray database in the wrong folder.
 *
 * Builds its data dirs by hand (not from test/support/fixtures.ts): a fresh or unmigrated data dir
 * at a path of its own is what `serve` is tried on.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, buildOnce, runBin, watchBin } from '../support/binary.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { captureToken, loadCaptures } from '../support/verifyFileTokens.js';

let root: string;
beforeAll(() => {
  buildOnce();
  root = mkdtempSync(join(tmpdir(), 'attest-startup-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** a TCP listener on 127.0.0.1 that accepts connections and never says a word */
async function silentListener(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** a port nothing listens on: bound, then released */
async function refusedPort(): Promise<number> {
  const l = await silentListener();
  await l.close();
  return l.port;
}

function lines(stderr: string): string[] {
  return stderr.split('\n').filter(Boolean);
}

describe('serve on a fresh data dir says what it does and where it listens', () => {
  it('progress lines while it starts, then the address really bound; a restart creates nothing', async () => {
    const dataDir = join(root, 'fresh');
    const env = baseEnv({ ATTEST_DATA_DIR: dataDir });
    const first = watchBin(['serve', '--port', '0', '--host', '0.0.0.0'], env);
    try {
      const listening = await first.line(/attest listening on http:\/\/0\.0\.0\.0:(\d+) /);
      const said = lines(first.stderr());
      expect(said[0]).toBe(`creating the embedded database in ${dataDir}…`);
      expect(said[1]).toMatch(/^applying \d+ migrations?…$/);
      // the embedded database makes its own master key, once, and says so
      expect(said[2]).toBe(
        `attest: created a master key in ${join(dataDir, 'master.key')}: back it up with the data dir (not inside the same backup)`,
      );
      expect(said[3]).toMatch(
        /^attest listening on http:\/\/0\.0\.0\.0:\d+ \(database: embedded, /,
      );
      expect((await fetch(`http://127.0.0.1:${listening.match[1]}/readyz`)).status).toBe(200);
    } finally {
      first.child.kill('SIGTERM');
    }
    expect((await first.exited).code).toBe(0);

    const again = watchBin(['serve', '--port', '0', '--host', '127.0.0.1'], env);
    try {
      await again.line(/attest listening on http:\/\/127\.0\.0\.1:\d+ /);
      expect(lines(again.stderr())).toHaveLength(1);
    } finally {
      again.child.kill('SIGTERM');
    }
    expect((await again.exited).code).toBe(0);
  }, 180_000);
});

interface Target {
  name: string;
  env(): Promise<{ env: NodeJS.ProcessEnv; cleanup(): Promise<void> }>;
}
const targets: Target[] = [
  {
    name: 'embedded',
    env: async () => {
      return {
        env: baseEnv({ ATTEST_DATA_DIR: join(root, 'busy-port') }),
        cleanup: async () => {},
      };
    },
  },
];
const pg = postgresBackend();
if (pg) {
  targets.push({
    name: 'postgres',
    env: async () => {
      const db: TestDatabase = await pg.open();
      return {
        env: baseEnv({ DATABASE_URL: db.url!, ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV }),
        cleanup: () => db.close(),
      };
    },
  });
}

describe.each(targets)('serve on a port in use ($name)', (target) => {
  it('exits 3 with one line right after saying so, having opened nothing', async () => {
    const taken = await silentListener();
    const { env, cleanup } = await target.env();
    try {
      const run = watchBin(['serve', '--port', String(taken.port), '--host', '127.0.0.1'], env);
      const said = await run.line(
        new RegExp(`attest: port ${taken.port} on 127\\.0\\.0\\.1 is in use`),
      );
      const exit = await run.exited;
      expect(exit.code).toBe(3);
      // within a second on a quiet machine; the bound leaves room for a loaded one (it used to never exit)
      expect(exit.at - said.at).toBeLessThan(5000);
      expect(lines(run.stderr())).toHaveLength(1);
      // the port is checked before the database is touched: not even a data dir is made
      if (env.ATTEST_DATA_DIR) expect(existsSync(env.ATTEST_DATA_DIR)).toBe(false);
    } finally {
      await taken.close();
      await cleanup();
    }
  }, 180_000);
});

describe('serve failing after it opened the embedded database', () => {
  it('exits 3 and releases the lock and the socket (here: --no-migrate on a database without migrations)', async () => {
    const dataDir = join(root, 'unmigrated');
    const runDir = mkdtempSync(join(root, 'run-'));
    const env = baseEnv({ ATTEST_DATA_DIR: dataDir, XDG_RUNTIME_DIR: runDir });
    const run = watchBin(['serve', '--port', '0', '--host', '127.0.0.1', '--no-migrate'], env);
    const said = await run.line(
      /attest: cannot start: the database at \S+ lacks \d+ migration\(s\): run "attest db migrate" \(or start "attest serve" without --no-migrate\)/,
    );
    const exit = await run.exited;
    expect(exit.code).toBe(3);
    // node takes a few seconds to tear down PGlite's WebAssembly instance on a loaded machine
    expect(exit.at - said.at).toBeLessThan(10_000);
    expect(lines(run.stderr())).toEqual([
      `creating the embedded database in ${dataDir}…`,
      said.match[0],
    ]);
    expect(existsSync(join(dataDir, 'attest.lock'))).toBe(false);
    expect(readdirSync(runDir)).toEqual([]);
    // nobody holds it: the next command opens the directory itself
    // a command other than serve says the same line about the same database, and exits 3 too
    const listed = await runBin(['keys', 'list'], env);
    expect({ code: listed.code, stderr: listed.stderr }).toEqual({
      code: 3,
      stderr: `${said.match[0].replace('cannot start: ', '')}\n`,
    });
    const migrate = await runBin(['db', 'migrate', '--json'], env);
    expect(migrate.code).toBe(0);
    expect(JSON.parse(migrate.stdout)).toEqual({ applied: expect.any(Number), sealed: 0 });
  }, 180_000);
});

describe('an unusable database: one line naming the cause, exit 3, never a hang', () => {
  const COMMANDS = [
    ['serve', '--port', '0', '--host', '127.0.0.1'],
    ['keys', 'list'],
    ['db', 'migrate'],
    ['db', 'status'],
  ];

  async function expectEveryCommand(
    url: string,
    cause: RegExp,
    extra: Record<string, string> = {},
  ) {
    const runs = await Promise.all(
      COMMANDS.map((args) =>
        runBin(
          args,
          baseEnv({ DATABASE_URL: url, ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV, ...extra }),
        ),
      ),
    );
    const shownUrl = url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const [i, run] of runs.entries()) {
      expect({ command: COMMANDS[i]!.join(' '), code: run.code, stdout: run.stdout }).toEqual({
        command: COMMANDS[i]!.join(' '),
        code: 3,
        stdout: '',
      });
      const said = lines(run.stderr);
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(
        new RegExp(
          `^attest: cannot reach the database at ${shownUrl}: ${cause.source}; check DATABASE_URL and that the server runs$`,
        ),
      );
    }
  }

  it('a refused port', async () => {
    await expectEveryCommand(
      `postgres://attest@127.0.0.1:${await refusedPort()}/attest`,
      /connection refused/,
    );
  }, 120_000);

  it('a listener that never answers: the connect timeout (ATTEST_DB_CONNECT_TIMEOUT)', async () => {
    const silent = await silentListener();
    try {
      const started = performance.now();
      await expectEveryCommand(
        `postgres://attest@127.0.0.1:${silent.port}/attest`,
        /no answer within 1 s \(ATTEST_DB_CONNECT_TIMEOUT\)/,
        { ATTEST_DB_CONNECT_TIMEOUT: '1' },
      );
      expect(performance.now() - started).toBeGreaterThanOrEqual(1000);
    } finally {
      await silent.close();
    }
  }, 120_000);

  it.skipIf(!process.env.TEST_DATABASE_URL)(
    'a database that does not exist, and a role that does not exist',
    async () => {
      const missing = new URL(process.env.TEST_DATABASE_URL!);
      missing.pathname = '/attest_no_such_database';
      await expectEveryCommand(
        missing.toString(),
        /database "attest_no_such_database" does not exist/,
      );
      const stranger = new URL(process.env.TEST_DATABASE_URL!);
      stranger.username = 'attest_no_such_role';
      stranger.password = '';
      await expectEveryCommand(
        stranger.toString(),
        /authentication failed \(role "attest_no_such_role" does not exist\)/,
      );
    },
    120_000,
  );
});

describe('a command in a folder without a database', () => {
  it('refuses to create one, naming the folder it looked in and ATTEST_DATA_DIR', async () => {
    const cwd = join(root, 'elsewhere');
    mkdirSync(cwd);
    for (const args of [
      ['keys', 'create', '--name', 'mobile'],
      ['keys', 'list'],
      ['allowlist', 'list'],
      ['db', 'status'],
    ]) {
      const run = await runBin(args, baseEnv(), { cwd });
      expect(run.code).toBe(3);
      expect(run.stdout).toBe('');
      expect(lines(run.stderr)).toEqual([
        `attest: no attest database in ${join(cwd, '.attest')} (the folder ATTEST_DATA_DIR names, default ./.attest): run this where that folder is, set ATTEST_DATA_DIR to it, or create one with "attest db migrate"`,
      ]);
    }
    expect(readdirSync(cwd)).toEqual([]);
  }, 120_000);
});

describe('ATTEST_APPLE_ROOT_CA that cannot be used: serve and verify-file say the same line, exit 2', () => {
  it.each([
    ['a missing file', () => join(root, 'no-such-root.pem'), /cannot read the file \(ENOENT\)/],
    [
      'a file that is not PEM',
      () => {
        const path = join(root, 'not-pem.pem');
        writeFileSync(path, 'this is not a certificate\n');
        return path;
      },
      /trust roots: no PEM certificate found/,
    ],
  ])(
    '%s',
    async (_what, makePath, cause) => {
      const path = makePath();
      const capture = loadCaptures()[0]!;
      const tokenFile = join(root, 'roots-token.cbor');
      writeFileSync(tokenFile, captureToken(capture));
      const env = baseEnv({
        ATTEST_DATA_DIR: join(root, 'roots-unused'),
        ATTEST_APPLE_ROOT_CA: path,
      });
      const [served, verified] = await Promise.all([
        runBin(['serve', '--port', '0', '--host', '127.0.0.1'], env),
        runBin(['verify-file', tokenFile, '--app-id', capture.appId], env),
      ]);
      const shown = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const line = new RegExp(
        `^attest: ATTEST_APPLE_ROOT_CA \\(${shown}\\): ${cause.source}; fix it and run again$`,
      );
      for (const run of [served, verified]) {
        expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 2, stdout: '' });
        expect(lines(run.stderr)).toHaveLength(1);
        expect(lines(run.stderr)[0]).toMatch(line);
      }
      expect(served.stderr).toBe(verified.stderr);
      // the roots are read before the database is touched
      expect(existsSync(join(root, 'roots-unused'))).toBe(false);
    },
    120_000,
  );
});
