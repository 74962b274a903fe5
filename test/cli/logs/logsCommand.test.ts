import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { logsCommand } from '../../../src/cli/commands/logs.js';
import { CliError } from '../../../src/cli/errors.js';
import { captureOut, fakeIo } from './helpers.js';
import { requestLine } from './sampleLog.js';
import { HOSTILE, INERT } from '../../support/hostileText.js';

const replay = requestLine({
  requestId: 'r-replay',
  isValid: false,
  reason: 'apple_counter_replay',
});
const ok = requestLine({ requestId: 'r-ok', service: 'gms', isValid: true });
const LOG = `${replay}\n${ok}\nnot json\n`;

// the command loads the viewer (ink, react) on first use: load it here, not inside a test's time
beforeAll(() => import('../../../src/cli/logs/runLogs.js'));

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'attest-cmd-'));
  file = join(dir, 'app.log');
  writeFileSync(file, LOG);
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const run = (args: string[], io: ReturnType<typeof fakeIo>) =>
  logsCommand(io).parseAsync(args, { from: 'user' });

/** Runs and returns the usage error it must fail with. */
async function usageFailure(
  args: string[],
  io = fakeIo({ input: '', stdout: captureOut().stream }),
): Promise<CliError> {
  const error = await run(args, io).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CliError);
  const e = error as CliError;
  expect(e.exitCode).toBe(2);
  expect(e.message).not.toContain('\n');
  return e;
}

describe('attest logs', () => {
  it('prints plain lines of a FILE when stdout is not a terminal', async () => {
    const out = captureOut();
    await run([file, '--rejections'], fakeIo({ stdout: out.stream }));
    expect(out.lines()).toHaveLength(1);
    expect(out.lines()[0]).toMatch(/apple_counter_replay .* r-replay$/);
  });

  it('reads stdin for "-" and for no FILE', async () => {
    for (const args of [['-'], []]) {
      const out = captureOut();
      await run(
        [...args, '--service', 'gms', '--json'],
        fakeIo({ input: LOG, stdout: out.stream }),
      );
      expect(out.lines()).toEqual([ok]);
    }
  });

  it('--json escapes C1, bidi, format and separator characters as \\uXXXX, and keeps the values', async () => {
    const hostile = Object.values(HOSTILE).join('|');
    const line = requestLine({ requestId: 'r-hostile', detail: hostile });
    writeFileSync(file, `${line}\n`);
    const out = captureOut();
    await run([file, '--json'], fakeIo({ stdout: out.stream }));
    expect(out.lines()).toHaveLength(1);
    expect(out.lines()[0]).toMatch(INERT);
    expect(JSON.parse(out.lines()[0]!)).toEqual(JSON.parse(line));
  });

  it('prints NDJSON with --json even on a terminal', async () => {
    const out = captureOut({ isTTY: true });
    await run(
      [file, '--json', '--reason', 'apple_counter_replay'],
      fakeIo({ stdout: out.stream, stdinTTY: true }),
    );
    expect(out.lines()).toEqual([replay]);
  });

  it('falls back to plain lines on a terminal when the log is on stdin and no terminal can be opened for keys', async () => {
    const out = captureOut({ isTTY: true });
    await run(
      ['--search', 'r-ok'],
      fakeIo({ input: LOG, stdout: out.stream, keyboard: undefined }),
    );
    expect(out.lines()).toHaveLength(1);
    expect(out.text()).not.toContain('\u001b[?1049h');
  });

  it('runs the viewer on a terminal, reading keys from the opened terminal, until q', async () => {
    const out = captureOut({ isTTY: true });
    Object.assign(out.stream, { columns: 100, rows: 30 });
    const keyboard = Object.assign(new PassThrough(), {
      isTTY: true,
      setRawMode: () => undefined,
      ref: () => undefined,
      unref: () => undefined,
    });
    const io = fakeIo({
      input: LOG,
      stdout: out.stream,
      keyboard: keyboard as unknown as NodeJS.ReadStream,
    });
    const done = run([], io);
    // the first ink render loads React: generous under a loaded CI machine
    await vi.waitFor(() => expect(out.text()).toContain('apple_counter_replay'), {
      timeout: 15_000,
      interval: 10,
    });
    expect(out.text()).toContain('\u001b[?1049h'); // the alternate screen
    expect(out.text()).toContain('attest logs');
    keyboard.write('q');
    await done;
    expect(out.text().endsWith('\u001b[?1049l')).toBe(true);
    expect(keyboard.destroyed).toBe(true);
    expect((io.stdin as unknown as PassThrough).destroyed).toBe(true);
  });

  it('fails with a one-line usage error (exit 2) on bad input', async () => {
    expect((await usageFailure([join(dir, 'missing.log')])).message).toMatch(/no such file/);
    expect((await usageFailure([dir])).message).toMatch(/is a directory/);
    expect((await usageFailure([file, '--service', 'ios'])).message).toMatch(/apple, or gms/);
    expect((await usageFailure([file, '--reason', 'counter_replay'])).message).toMatch(
      /unknown reason/,
    );
    for (const limit of ['0', '-5', '1.5', 'ten', '2000000'])
      await usageFailure([file, '--limit', limit]);
    await usageFailure([file, '--key', '']);
    const terminal = fakeIo({ stdout: captureOut().stream, stdinTTY: true });
    expect((await usageFailure([], terminal)).message).toMatch(/no log given: .*pipe the log/);
  });

  it('has help with examples', () => {
    let help = '';
    const cmd = logsCommand().configureOutput({ writeOut: (s) => (help += s) });
    cmd.outputHelp();
    expect(help).toContain('Examples:');
    expect(help).toContain('--follow');
  });
});

describe('attest logs on a terminal with no FILE', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("reads the server's ATTEST_LOG_FILE", async () => {
    vi.stubEnv('ATTEST_LOG_FILE', file);
    const out = captureOut();
    await run(['--json'], fakeIo({ stdout: out.stream, stdinTTY: true }));
    expect(out.lines()).toEqual([replay, ok]);
  });

  it("reads dev up's log in the data dir", async () => {
    vi.stubEnv('ATTEST_LOG_FILE', '');
    vi.stubEnv('ATTEST_DATA_DIR', dir);
    writeFileSync(join(dir, 'attest.log'), `${ok}\n`);
    const out = captureOut();
    await run(['--json'], fakeIo({ stdout: out.stream, stdinTTY: true }));
    expect(out.lines()).toEqual([ok]);
  });

  it('says where the log goes when there is no file to read', async () => {
    vi.stubEnv('ATTEST_LOG_FILE', '');
    vi.stubEnv('ATTEST_DATA_DIR', join(dir, 'empty'));
    const e = await usageFailure([], fakeIo({ stdout: captureOut().stream, stdinTTY: true }));
    expect(e.message).toMatch(/stdout/);
    expect(e.message).toMatch(/ATTEST_LOG_FILE/);
  });
});
