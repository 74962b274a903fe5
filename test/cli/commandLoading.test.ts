/**
 * A run builds only the command it runs (src/cli/main.ts): the listing of the others is a
 * manifest, held equal here to the commands themselves; and the modules a quick command loads
 * are counted in a real process, so that the database drivers, argon2, pino or the verifiers
 * creeping back into `--help`, `keys list` through a server, or tab completion fails a test.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Help } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toWire } from '../../src/admin/wire.js';
import { buildProgram, commandRun, COMMANDS } from '../../src/cli/main.js';
import { baseEnv, BIN, buildOnce, ROOT, runProcess } from '../support/binary.js';

describe('the command manifest', () => {
  it('lists every command as the command itself says, in order', async () => {
    const whole = await buildProgram();
    const help = new Help();
    expect(
      whole.commands.map((c) => ({
        name: c.name(),
        term: help.subcommandTerm(c),
        description: c.description(),
        hidden: (c as unknown as { _hidden: boolean })._hidden,
      })),
    ).toEqual(
      COMMANDS.map((e) => ({
        name: e.name,
        term: e.term,
        description: e.description,
        hidden: e.hidden === true,
      })),
    );
  });

  it('gives `attest --help` as the whole tree does, whichever command is built', async () => {
    const whole = (await buildProgram()).helpInformation();
    expect((await buildProgram([])).helpInformation()).toBe(whole);
    for (const { name } of COMMANDS)
      expect((await buildProgram([name, '--help'])).helpInformation()).toBe(whole);
  });

  it.each([
    [[], undefined],
    [['--help'], undefined],
    [['keys', 'list'], 'keys'],
    [['--actor', 'alice', 'keys', 'revoke', 'x'], 'keys'],
    [['--actor=alice', '--log', 'allowlist', 'list'], 'allowlist'],
    // --actor takes the next word whatever it is, as commander does
    [['--actor', 'keys', 'list'], 'list'],
    [['help', 'keys'], 'keys'],
    [['help', '--log', 'status'], 'status'],
    [['--', 'keys'], 'keys'],
    // commander takes no command after an option that is not the root's
    [['-h', 'keys'], undefined],
    [['--nope', 'keys'], undefined],
    [['kyes'], 'kyes'],
  ])('attest %j runs %s', (args, name) => {
    expect(commandRun(args)).toBe(name);
  });

  it.each([[['completion', 'bash']], [['help', 'completion']], [['-Vh']]])(
    'attest %j builds every command',
    async (args) => {
      expect(typeof commandRun(args)).toBe('symbol');
      const built = await buildProgram(args);
      expect(
        built.commands.every(
          (c) => c.commands.length > 0 || c.options.length > 0 || c.registeredArguments.length > 0,
        ),
      ).toBe(true);
    },
  );
});

/** Modules that cost a quick command most of its time, and that it has no use for. */
const HEAVY =
  /\/node_modules\/(postgres|drizzle-orm|argon2|pino|hono|@hono|ink|react|jose|cbor-x|@peculiar)\/|\/dist\/(db\/client|db\/migrate|admin\/operations|core\/verifiers|server\/)/;

describe('what a quick command loads', () => {
  let dir: string;
  let admin: Server;
  const ops: string[] = [];

  beforeAll(async () => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-modules-'));
    // a running server as the CLI finds it: a lock naming a live process and its admin socket
    const socketDir = mkdtempSync(join(tmpdir(), 'attest-modules-socket-'));
    const socket = join(socketDir, 'admin.sock');
    admin = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        ops.push((JSON.parse(body) as { op: string }).op);
        const key = { id: 'k1k1k1k1k1k1k1k1', name: 'one', mode: 'live', resultTokens: false };
        const at = new Date('2026-01-02T03:04:05Z');
        res.setHeader('content-type', 'application/json');
        res.end(
          toWire({
            ok: true,
            result: [{ ...key, createdAt: at, lastUsedAt: null, expiresAt: null, revokedAt: null }],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => admin.listen(socket, resolve));
    chmodSync(socket, 0o600);
    writeFileSync(
      join(dir, 'attest.lock'),
      JSON.stringify({ pid: process.pid, admin: { socket, secret: 'test' } }),
    );
  });

  afterAll(async () => {
    await new Promise((resolve) => admin?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  async function loaded(...args: string[]): Promise<{ stdout: string; modules: string[] }> {
    const record = join(dir, `modules-${args.join('-')}.txt`);
    const run = await runProcess(
      process.execPath,
      ['--import', join(ROOT, 'test', 'support', 'recordModules.mjs'), BIN, ...args],
      baseEnv({ ATTEST_DATA_DIR: dir, ATTEST_RECORD_MODULES: record }),
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    return { stdout: run.stdout, modules: readFileSync(record, 'utf8').split('\n') };
  }

  it('--version: only the binary itself', async () => {
    const run = await loaded('--version');
    expect(run.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect(run.modules.filter((m) => m.includes('/dist/'))).toEqual([]);
  });

  it('--help: no command module', async () => {
    const run = await loaded('--help');
    expect(run.stdout).toContain('API keys of relying parties');
    expect(run.modules.filter((m) => /\/dist\/cli\/commands\//.test(m))).toEqual([]);
    expect(run.modules.filter((m) => HEAVY.test(m))).toEqual([]);
  });

  it('keys list and a completion through a running server: the admin client, no database', async () => {
    const list = await loaded('keys', 'list', '--json');
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: 'k1k1k1k1k1k1k1k1', state: 'active' }]);
    expect(list.modules.filter((m) => HEAVY.test(m))).toEqual([]);
    const ids = await loaded('__complete-ids', 'keys');
    expect(ids.stdout).toBe('k1k1k1k1k1k1k1k1\n');
    expect(ids.modules.filter((m) => HEAVY.test(m))).toEqual([]);
    expect(ops).toEqual(['keys.list', 'keys.list']);
  });
});
