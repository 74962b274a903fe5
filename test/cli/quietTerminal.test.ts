/**
 * Quiet terminals: an admin command on a terminal prints its result and nothing else; its audit
 * event is in the audit table and the log file, and on stderr only with `--log`, or off a
 * terminal when LOG_LEVEL lets info lines through (docs/cli.md, "Output").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect } from 'vitest';
import { auditOnStderr } from '../../src/cli/context.js';
import { runCli } from '../support/cli.js';
import { it } from '../support/fixtures.js';

describe('audit events on stderr', { timeout: 120_000 }, () => {
  let dir: string;
  const saved: Record<string, string | undefined> = {};
  const vars = ['ATTEST_LOG_FILE', 'LOG_LEVEL'];
  const tty = Object.getOwnPropertyDescriptor(process.stderr, 'isTTY');

  function terminal(is: boolean) {
    Object.defineProperty(process.stderr, 'isTTY', { value: is, configurable: true });
  }

  it.beforeAll(async ({ cliDataDir, tempDir }) => {
    void cliDataDir;
    dir = tempDir;
    for (const v of vars) saved[v] = process.env[v];
    process.env.ATTEST_LOG_FILE = join(dir, 'attest.log');
    process.env.LOG_LEVEL = 'info';
  });
  afterEach(() => {
    if (tty) Object.defineProperty(process.stderr, 'isTTY', tty);
    else delete (process.stderr as { isTTY?: boolean }).isTTY;
    process.env.LOG_LEVEL = 'info';
  });
  afterAll(() => {
    for (const v of vars) {
      if (saved[v] === undefined) delete process.env[v];
      else process.env[v] = saved[v];
    }
  });

  const logged = (target: string) =>
    readFileSync(join(dir, 'attest.log'), 'utf8')
      .split('\n')
      .filter((l) => l.includes(`"target":"${target}"`));

  it('on a terminal: the result and nothing else; the event is in the audit table and the log file', async () => {
    terminal(true);
    const run = await runCli('allowlist', 'add', 'apple', 'ABCDE12345.com.example.quiet');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('added apple ABCDE12345.com.example.quiet (env production)\n');
    expect(run.stderr).toBe('');
    expect(logged('apple:ABCDE12345.com.example.quiet')).toHaveLength(1);
    const trail = await runCli('audit', 'list', '--json');
    expect(trail.stdout).toContain('apple:ABCDE12345.com.example.quiet');
  });

  it('on a terminal with --log: one JSON line on stderr as well', async () => {
    terminal(true);
    process.env.LOG_LEVEL = 'warn';
    const run = await runCli('--log', 'allowlist', 'add', 'apple', 'ABCDE12345.com.example.loud');
    expect(run.code).toBe(0);
    const lines = run.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 30,
      audit: { action: 'allowlist.add', target: 'apple:ABCDE12345.com.example.loud' },
    });
  });

  it('off a terminal: a JSON line when LOG_LEVEL lets info through, none at warn', async () => {
    terminal(false);
    const info = await runCli('allowlist', 'add', 'apple', 'ABCDE12345.com.example.piped');
    expect(JSON.parse(info.stderr)).toMatchObject({ audit: { action: 'allowlist.add' } });
    process.env.LOG_LEVEL = 'warn';
    const warn = await runCli(
      'allowlist',
      'remove',
      'apple',
      'ABCDE12345.com.example.piped',
      '--yes',
    );
    expect(warn.code).toBe(0);
    expect(warn.stderr).toBe('');
  });

  it('the rule', () => {
    const at = (logFlag: boolean, stderrIsTTY: boolean, logLevel: string) =>
      auditOnStderr({ logFlag, stderrIsTTY, logLevel });
    expect(at(false, true, 'info')).toBe(false);
    expect(at(false, true, 'debug')).toBe(false);
    expect(at(true, true, 'warn')).toBe(true);
    expect(at(false, false, 'info')).toBe(true);
    expect(at(false, false, 'trace')).toBe(true);
    expect(at(false, false, 'warn')).toBe(false);
    expect(at(false, false, 'silent')).toBe(false);
  });
});
