/**
 * Administrative commands in-process: the audit trail as the CLI writes and lists it (actor,
 * log line, filters), the confirmation prompt with injected terminal streams, and every help's
 * example. The same behaviours through the built binary and a real terminal: adminProcess.test.ts.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Command } from 'commander';
import { afterAll, beforeEach, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { confirm, requireConfirmation, type PromptIo } from '../../src/cli/confirm.js';
import { CliError } from '../../src/cli/errors.js';
import { buildProgram } from '../../src/cli/main.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

interface EventJson {
  id: number;
  at: string;
  actor: string;
  action: string;
  target: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

const playKeys = () => ({
  decryption: randomBytes(32).toString('base64'),
  verification: generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    .publicKey.export({ format: 'der', type: 'spki' })
    .toString('base64'),
});

/** the exit code, with stderr as the failure message (the one line says why) */
async function runCode(...args: string[]): Promise<number> {
  const run = await runCli(...args);
  if (run.code !== 0)
    process.stdout.write(`attest ${args.join(' ')} exited ${run.code}: ${run.stderr}`);
  return run.code;
}

// several commands per test, each through the server's admin socket
describe('the audit trail through the CLI', { timeout: 120_000 }, () => {
  let dir: string;
  let server: RunningServer;
  /** events recorded since the test started */
  let fromId = 0;
  const events = async (...filter: string[]) => {
    const run = await runCli('audit', 'list', '--json', ...filter);
    expect(run.code).toBe(0);
    return (JSON.parse(run.stdout) as EventJson[]).filter((e) => e.id > fromId);
  };

  it.beforeAll(async ({ cliDataDir, tempDir }) => {
    void cliDataDir;
    dir = tempDir;
    const { logger } = captureLogger();
    server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
      migrate: false,
    });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(async () => {
    fromId = Math.max(
      0,
      ...(JSON.parse((await runCli('audit', 'list', '--json')).stdout) as EventJson[]).map(
        (e) => e.id,
      ),
    );
  }, 120_000);

  it('the actor is --actor (before or after the command), else ATTEST_ACTOR, else user@host', async () => {
    expect(await runCode('--actor', 'bob', 'keys', 'create', '--name', 'a')).toBe(0);
    expect(await runCode('keys', 'create', '--name', 'b', '--actor', 'carol')).toBe(0);
    process.env.ATTEST_ACTOR = 'dave (on call)';
    try {
      expect(await runCode('keys', 'create', '--name', 'c')).toBe(0);
      expect(await runCode('--actor', 'erin', 'keys', 'create', '--name', 'd')).toBe(0);
    } finally {
      delete process.env.ATTEST_ACTOR;
    }
    expect(await runCode('keys', 'create', '--name', 'e')).toBe(0);
    expect((await events()).map((e) => [e.after?.name, e.actor])).toEqual([
      ['a', 'bob'],
      ['b', 'carol'],
      ['c', 'dave (on call)'],
      ['d', 'erin'],
      ['e', `${userInfo().username}@${hostname()}`],
    ]);
    const bad = await runCli('--actor', 'a\u001b[31mb', 'keys', 'create', '--name', 'f');
    expect(bad.code).toBe(2);
    expect(oneLine(bad)).toMatch(/^attest: --actor must be/);
    expect(await events()).toHaveLength(5);
  });

  it('each change is one log line on stderr and in ATTEST_LOG_FILE, holding the event and no secret', async () => {
    const logFile = join(dir, 'admin.log');
    process.env.ATTEST_LOG_FILE = logFile;
    let created: { id: string; key: string };
    try {
      const run = await runCli('--actor', 'ops', 'keys', 'create', '--name', 'logged', '--json');
      created = JSON.parse(run.stdout) as { id: string; key: string };
      const revoke = await runCli('--actor', 'ops', 'keys', 'revoke', created.id, '--yes');
      expect(revoke.code).toBe(0);
      const stderrLines = [run.stderr, revoke.stderr].map(
        (s) => JSON.parse(s.trim()) as { msg: string; audit: EventJson },
      );
      const fileLines = readFileSync(logFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { msg: string; audit: EventJson });
      expect(fileLines).toEqual(stderrLines);
      expect(fileLines.map((l) => l.msg)).toEqual([
        `keys.create ${created.id} by ops`,
        `keys.revoke ${created.id} by ops`,
      ]);
      // the log carries what the trail stores
      expect(fileLines.map((l) => l.audit)).toEqual(await events());
      expect(readFileSync(logFile, 'utf8')).not.toContain(created.key.slice(-43));
    } finally {
      delete process.env.ATTEST_LOG_FILE;
    }
  });

  it('audit list: table, --json, --action (an action or its group), --since; bad filters exit 2', async () => {
    const key = JSON.parse(
      (await runCli('--actor', 'alice', 'keys', 'create', '--name', 'listed', '--json')).stdout,
    ) as { id: string };
    await runCli('--actor', 'alice', 'keys', 'revoke', key.id, '--yes');
    await runCli('--actor', 'alice', 'allowlist', 'add', 'apple', 'ABCDE12345.com.listed');
    const table = await runCli('audit', 'list', '--since', '1h');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^TIME\s+ACTOR\s+ACTION\s+TARGET\s+CHANGE$/);
    expect(table.stdout).toMatch(
      new RegExp(`alice\\s+keys\\.revoke\\s+${key.id}\\s+revokedAt - -> \\d{4}-`),
    );
    expect(table.stdout).toMatch(
      /alice\s+allowlist\.add\s+apple:ABCDE12345\.com\.listed\s+env=production/,
    );
    expect((await events('--action', 'keys')).map((e) => e.action)).toEqual([
      'keys.create',
      'keys.revoke',
    ]);
    expect((await events('--action', 'keys.revoke')).map((e) => e.target)).toEqual([key.id]);
    expect((await events('--action', 'allowlist', '--since', '10m')).map((e) => e.target)).toEqual([
      'apple:ABCDE12345.com.listed',
    ]);
    const none = await runCli('audit', 'list', '--action', 'dev.init');
    expect(none.stdout).toBe('no audit events match\n');
    for (const args of [
      ['--since', '24'],
      ['--since', 'yesterday'],
      ['--action', 'Keys Revoke'],
    ]) {
      const run = await runCli('audit', 'list', ...args);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(/^attest: --(since|action) /);
    }
  });

  it('db prune leaves the audit trail alone', async () => {
    await runCli('keys', 'create', '--name', 'kept');
    const before = await events();
    expect(before).toHaveLength(1);
    expect(await runCode('db', 'prune', '--older-than', '1s')).toBe(0);
    expect(await events()).toEqual(before);
  });

  it('allowlist add apple keeps the stored environment unless --env is given', async () => {
    const app = 'ABCDE12345.com.kept';
    await runCli('allowlist', 'add', 'apple', app, '--env', 'development');
    const again = await runCli('allowlist', 'add', 'apple', app, '--json');
    expect(JSON.parse(again.stdout)).toEqual({
      kind: 'apple',
      appId: app,
      env: 'development',
      result: 'unchanged',
      policy: expect.objectContaining({ env: 'development', requireReceipt: false }),
    });
    // "updated" only when something changed
    const plain = await runCli('allowlist', 'add', 'apple', app);
    expect(plain.stdout).toBe(`unchanged apple ${app} (env development)\n`);
    await runCli('allowlist', 'add', 'apple', app, '--env', 'any');
    const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: { appId: string; env: string }[];
    };
    expect(list.apple.find((a) => a.appId === app)).toMatchObject({ appId: app, env: 'any' });
    // adds that change nothing are not changes
    const appPolicy = (env: string) => ({
      env,
      requireReceipt: false,
      maxRiskMetric: null,
      validationCategories: [],
      minBundleVersion: null,
      allowMissingValidationCategory: false,
      observe: [],
      maxVerifiesPerDevice: null,
      platforms: [],
    });
    expect((await events()).map((e) => [e.action, e.before, e.after])).toEqual([
      ['allowlist.add', null, appPolicy('development')],
      ['allowlist.update', appPolicy('development'), appPolicy('any')],
    ]);
  });

  it('android: add, rotate, retire the last pair; the trail shows fingerprints, never key material', async () => {
    const k1 = playKeys();
    const k2 = playKeys();
    const add = (k: typeof k1) =>
      runCli(
        'allowlist',
        'add',
        'android',
        'com.example.audited',
        '--decryption-key',
        k.decryption,
        '--verification-key',
        k.verification,
        '--json',
      );
    const first = JSON.parse((await add(k1)).stdout) as { keyId: string };
    const second = JSON.parse((await add(k2)).stdout) as { keyId: string };
    expect(
      await runCode(
        'allowlist',
        'remove',
        'android',
        'com.example.audited',
        '--key-id',
        first.keyId,
        '--yes',
      ),
    ).toBe(0);
    const last = await runCli(
      'allowlist',
      'remove',
      'android',
      'com.example.audited',
      '--key-id',
      second.keyId,
      '--yes',
    );
    expect(last.code).toBe(0);
    const trail = await events('--action', 'allowlist');
    expect(
      trail.map((e) => [e.action, e.before?.keyPairs ?? null, e.after?.keyPairs ?? null]),
    ).toEqual([
      ['allowlist.add', null, [first.keyId]],
      ['allowlist.key.add', [first.keyId], [first.keyId, second.keyId]],
      ['allowlist.key.remove', [first.keyId, second.keyId], [second.keyId]],
      ['allowlist.key.remove', [second.keyId], []],
    ]);
    const text = (await runCli('audit', 'list', '--json')).stdout;
    for (const k of [k1, k2]) {
      expect(text).not.toContain(k.decryption);
      expect(text).not.toContain(k.verification.slice(40, 80));
    }
  });

  it('removing or revoking what does not exist is exit 1 with one line, and records nothing', async () => {
    for (const args of [
      ['keys', 'revoke', '0000000000000000', '--yes'],
      ['allowlist', 'remove', 'apple', 'ABCDE12345.com.none', '--yes'],
      ['allowlist', 'remove', 'android', 'com.example.none', '--yes'],
      [
        'allowlist',
        'remove',
        'android',
        'com.example.none',
        '--key-id',
        '0123456789abcdef',
        '--yes',
      ],
    ]) {
      const run = await runCli(...args);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(oneLine(run)).toMatch(
        /^attest: (no API key with id "0000000000000000"|.* is not on the allowlist)/,
      );
    }
    expect(await events()).toEqual([]);
  });

  it('without a terminal and without --yes, revoke and remove exit 2 before changing anything', async () => {
    const key = JSON.parse(
      (await runCli('keys', 'create', '--name', 'asked', '--json')).stdout,
    ) as { id: string };
    await runCli('allowlist', 'add', 'apple', 'ABCDE12345.com.asked');
    for (const args of [
      ['keys', 'revoke', key.id],
      ['allowlist', 'remove', 'apple', 'ABCDE12345.com.asked'],
    ]) {
      const run = await runCli(...args);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(
        /without a terminal to ask on, add --yes \(run "attest [a-z ]+ --help" for usage\)$/,
      );
    }
    expect((await events()).map((e) => e.action)).toEqual(['keys.create', 'allowlist.add']);
  });
});

describe('the confirmation prompt', () => {
  /** streams that claim to be a terminal, as process.stdin/stderr do on one */
  function fakeTerminal() {
    const input = Object.assign(new PassThrough(), { isTTY: true });
    const output = Object.assign(new PassThrough(), { isTTY: true });
    let text = '';
    output.on('data', (d) => (text += String(d)));
    return { input, output, written: () => text } satisfies PromptIo & { written: () => string };
  }

  const answered = async (answer: string | null) => {
    const io = fakeTerminal();
    const done = confirm(['This removes everything.'], false, io);
    // answer once the question is shown
    await new Promise<void>((resolve) => {
      const check = () =>
        io.written().includes('Proceed? [y/N]') ? resolve() : io.output.once('data', check);
      check();
    });
    if (answer === null) io.input.end();
    else io.input.write(`${answer}\n`);
    const outcome = await done.then(
      () => 'confirmed',
      (err: unknown) => err,
    );
    return { outcome, written: io.written() };
  };

  it('shows what will happen and goes on only on y or yes', async () => {
    for (const yes of ['y', 'Y', 'yes', ' YES '])
      expect((await answered(yes)).outcome).toBe('confirmed');
    const first = await answered('y');
    expect(first.written).toContain('This removes everything.\n');
  });

  it('anything else, or a closed input, is a no: exit 1, "nothing changed"', async () => {
    for (const answer of ['', 'n', 'no', 'yep', null]) {
      const { outcome } = await answered(answer);
      expect(outcome).toBeInstanceOf(CliError);
      expect((outcome as CliError).exitCode).toBe(1);
      expect((outcome as CliError).message).toMatch(/nothing changed/);
    }
  });

  it('--yes asks nothing; no terminal without --yes is a usage error', async () => {
    const io = fakeTerminal();
    await confirm(['x'], true, io);
    expect(io.written()).toBe('');
    const pipe: PromptIo = { input: new PassThrough(), output: new PassThrough() };
    expect(() => requireConfirmation('keys revoke', false, pipe)).toThrow(
      /keys revoke .* add --yes/,
    );
    expect(() => requireConfirmation('keys revoke', true, pipe)).not.toThrow();
    expect(() => requireConfirmation('keys revoke', false, fakeTerminal())).not.toThrow();
  });
});

const wholeProgram = await buildProgram();

describe('help', () => {
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  const path = (c: Command): string[] => (c.parent ? [...path(c.parent), c.name()] : []);

  it.each(all(wholeProgram).map((c) => [path(c).join(' ') || '(root)', path(c)] as const))(
    '%s --help has an example',
    async (_, args) => {
      const run = await runCli(...args, '--help');
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/\nExamples?( \([^)]*\))?:\n {2}\$ .*attest/);
    },
  );
});
