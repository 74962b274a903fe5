/**
 * `attest logs` for security staff (issue 11 item 4, issue 8 item 6): hostile text escaped in
 * plain and viewer output, detail and the API key cause kept, time and status filters, several
 * files merged by time with their instance, `--service android`, stdin shown before it ends.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { cleanup, render } from 'ink-testing-library';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { logsCommand, parseLogsOptions } from '../../../src/cli/commands/logs.js';
import { NO_FILTER } from '../../../src/cli/logs/logFilter.js';
import { LogStore } from '../../../src/cli/logs/logStore.js';
import { LogViewer } from '../../../src/cli/logs/LogViewer.js';
import { runPlain } from '../../../src/cli/logs/runLogs.js';
import { HOSTILE, INERT } from '../../support/hostileText.js';
import { captureOut, fakeIo } from './helpers.js';
import { plainLine, requestLine } from './sampleLog.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'attest-staff-'));
});
afterEach(() => {
  cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const run = (args: string[], io: ReturnType<typeof fakeIo>) =>
  logsCommand(io).parseAsync(args, { from: 'user' });
const plain = async (args: string[], input?: string) => {
  const out = captureOut();
  await run(args, fakeIo({ stdout: out.stream, ...(input === undefined ? {} : { input }) }));
  return out;
};
const at = (s: number) => new Date(Date.parse('2026-11-22T21:00:00.000Z') + s * 1000).toISOString();
/** Lines whose every field, key name and raw text carries `payload`. */
const hostileLines = (payload: string) => [
  requestLine({
    isValid: false,
    reason: payload,
    detail: payload,
    service: payload,
    route: payload,
    keyId: payload,
    apiKeyId: payload,
    requestId: payload,
    [`k${payload}`]: 1,
  }),
  requestLine({
    status: 403,
    auth: payload,
    isValid: undefined,
    service: undefined,
    apiKeyId: undefined,
  }),
  plainLine(50, payload, { [payload]: payload, err: { message: payload } }),
  `raw ${payload.replace(/\n/g, '')}`, // a newline really ends a line that is not JSON
];

describe('hostile text in the log', () => {
  it.each(Object.entries(HOSTILE))(
    'plain output escapes %s in every field, key name and raw line',
    async (_name, payload) => {
      const out = await plain(['-'], `${hostileLines(payload).join('\n')}\n`);
      const lines = out.lines();
      expect(lines).toHaveLength(4);
      for (const line of lines) expect(line).toMatch(INERT);
      expect(lines[3]!.startsWith('raw a')).toBe(true);
    },
  );

  it.each(Object.entries(HOSTILE))(
    'the viewer escapes %s in the list and in the whole record',
    async (_name, payload) => {
      const store = new LogStore(100, 'app.log');
      store.append(hostileLines(payload));
      store.setStatus({ phase: 'done' });
      const ui = render(<LogViewer store={store} width={160} height={40} />);
      const inert = (frame: string) =>
        frame.split('\n').forEach((row) => expect(row).toMatch(INERT));
      inert(ui.lastFrame() ?? '');
      // the record of each line, key names included
      for (let i = 0; i < 4; i++) {
        ui.stdin.write(i === 0 ? 'g' : 'j');
        ui.stdin.write('\r');
        await vi.waitFor(() => expect(ui.lastFrame()).toMatch(/record|not JSON/), {
          timeout: 10_000,
          interval: 5,
        });
        inert(ui.lastFrame() ?? '');
        ui.stdin.write('\u001B');
      }
    },
  );

  it('--json stays the lines as written: valid JSON, control characters still escaped by JSON', async () => {
    const lines = hostileLines(HOSTILE.csi).slice(0, 3);
    const out = await plain(['-', '--json'], `${lines.join('\n')}\n`);
    expect(out.lines()).toEqual(lines);
    for (const l of out.lines()) expect(() => JSON.parse(l)).not.toThrow();
  });
});

describe('plain lines', () => {
  it('keep the detail (as a JSON string, last) and the cause of a refused API key', async () => {
    const replay = requestLine({
      requestId: 'r1',
      isValid: false,
      reason: 'apple_counter_replay',
      detail: 'counter 3 is not above the stored 5',
      keyId: 'KID',
    });
    const revoked = requestLine({
      requestId: 'r2',
      status: 403,
      auth: 'revoked',
      isValid: undefined,
      service: undefined,
      approach: undefined,
    });
    const [a, b] = (await plain(['-'], `${replay}\n${revoked}\n`)).lines();
    expect(a!.split(/\s+/).slice(1, 8)).toEqual([
      '200',
      '/api/v1/attestation/verify',
      'apple',
      'invalid',
      'apple_counter_replay',
      'KID',
      'r1',
    ]);
    expect(a).toMatch(/ r1 "counter 3 is not above the stored 5"$/);
    expect(b!.split(/\s+/).slice(1, 8)).toEqual([
      '403',
      '/api/v1/attestation/verify',
      '-',
      '-',
      'auth:revoked',
      '-',
      'r2',
    ]);
  });

  it('are coloured on a terminal, not with NO_COLOR', async () => {
    const line = `${requestLine({ isValid: false, reason: 'apple_counter_replay' })}\n`;
    const tty = captureOut({ isTTY: true });
    await runPlain(
      { follow: false, json: false, filter: NO_FILTER },
      fakeIo({ input: line, stdout: tty.stream }),
    );
    expect(tty.text()).toContain('\u001b[31minvalid');
    const saved = process.env.NO_COLOR;
    process.env.NO_COLOR = '1';
    try {
      const off = captureOut({ isTTY: true });
      await runPlain(
        { follow: false, json: false, filter: NO_FILTER },
        fakeIo({ input: line, stdout: off.stream }),
      );
      expect(off.text()).not.toContain('\u001b');
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
  });
});

describe('filters', () => {
  const log = [
    requestLine({ time: at(0), requestId: 'early', status: 200 }),
    requestLine({
      time: at(60),
      requestId: 'forbidden',
      status: 403,
      auth: 'revoked',
      isValid: undefined,
    }),
    requestLine({
      time: at(120),
      requestId: 'unauth',
      status: 401,
      auth: 'missing',
      isValid: undefined,
    }),
    requestLine({
      time: at(180),
      requestId: 'late-gms',
      service: 'gms',
      isValid: false,
      reason: 'gms_token_stale',
    }),
    'no time here',
  ].join('\n');
  const ids = async (args: string[]) =>
    (await plain(['-', ...args], `${log}\n`)).lines().map((l) => l.split(/\s+/)[7]);

  it('--since / --until take ISO times', async () => {
    expect(await ids(['--since', at(60), '--until', at(120)])).toEqual(['forbidden', 'unauth']);
    expect(await ids(['--since', '2026-11-22T22:02:00+01:00'])).toEqual(['unauth', 'late-gms']);
  });

  it('--since takes a duration before now, on the injected clock', async () => {
    const now = () => new Date(Date.parse(at(180)) + 90_000);
    const opts = await parseLogsOptions('-', { since: '3m' }, now);
    expect(opts.filter.since).toBe(Date.parse(at(90)));
  });

  it('--status takes a code or a class', async () => {
    expect(await ids(['--status', '403'])).toEqual(['forbidden']);
    expect(await ids(['--status', '4xx'])).toEqual(['forbidden', 'unauth']);
  });

  it('--service android is gms', async () => {
    expect(await ids(['--service', 'android'])).toEqual(['late-gms']);
  });

  it('refuses bad values in one line', async () => {
    for (const args of [
      ['--since', 'yesterday'],
      ['--until', '2026-11-22T21:00:00'],
      ['--status', '42'],
      ['--since', at(10), '--until', at(0)],
      ['--reason', 'nope'],
    ]) {
      const error = await parseLogsOptions(
        '-',
        Object.fromEntries([
          [args[0]!.slice(2), args[1]],
          ...(args[2] ? [[args[2].slice(2), args[3]]] : []),
        ]),
      ).catch((e: unknown) => e);
      expect(error).toMatchObject({ exitCode: 2 });
    }
    const reason = await parseLogsOptions('-', { reason: 'nope' }).catch((e: Error) => e.message);
    expect(reason).toContain('docs/checks.md');
    expect(reason).not.toContain('token-format.md');
  });
});

describe('several files', () => {
  const write = (name: string, lines: string[]) => {
    const path = join(dir, name);
    writeFileSync(path, `${lines.join('\n')}\n`);
    return path;
  };

  it('are merged by time, each line with its instance', async () => {
    const a = write('a.log', [
      requestLine({ time: at(0), hostname: 'attest-a', requestId: 'a0' }),
      requestLine({ time: at(2), hostname: 'attest-a', requestId: 'a2' }),
      'a crash line without time',
      requestLine({ time: at(5), hostname: 'attest-a', requestId: 'a5' }),
    ]);
    const b = write('b.log', [
      requestLine({ time: at(1), hostname: 'attest-b', requestId: 'b1' }),
      requestLine({ time: at(3), hostname: undefined, requestId: 'b3' }),
    ]);
    const lines = (await plain([a, b])).lines();
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual([
      'attest-a',
      'attest-b',
      'attest-a',
      'a.log',
      'b.log',
      'attest-a',
    ]);
    expect(lines.map((l) => l.split(/\s+/).at(-1))).toEqual(['a0', 'b1', 'a2', 'time', 'b3', 'a5']);
  });

  it('a quoted glob is expanded; --follow takes one file', async () => {
    write('x-1.log', [requestLine({ time: at(1), requestId: 'x1' })]);
    write('x-2.log', [requestLine({ time: at(0), requestId: 'x2' })]);
    write('other.txt', [requestLine({ requestId: 'nope' })]);
    const lines = (await plain([join(dir, 'x-*.log'), '--json'])).lines();
    expect(lines.map((l) => JSON.parse(l).requestId)).toEqual(['x2', 'x1']);
    const error = await run(
      [join(dir, 'x-*.log'), '--follow'],
      fakeIo({ stdout: captureOut().stream }),
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ exitCode: 2 });
  });
});

describe('stdin in the viewer', () => {
  it('shows a short input at once, without waiting for the stream to end', async () => {
    const out = captureOut({ isTTY: true });
    Object.assign(out.stream, { columns: 100, rows: 30 });
    const keyboard = Object.assign(new PassThrough(), {
      isTTY: true,
      setRawMode: () => undefined,
      ref: () => undefined,
      unref: () => undefined,
    });
    const io = fakeIo({ stdout: out.stream, keyboard: keyboard as unknown as NodeJS.ReadStream });
    const stdin = io.stdin as unknown as PassThrough;
    stdin.write(
      `${requestLine({ requestId: 'only', isValid: false, reason: 'apple_counter_replay' })}\n`,
    ); // never ended
    const done = run([], io);
    await vi.waitFor(() => expect(out.text()).toContain('● following'), {
      timeout: 15_000,
      interval: 10,
    });
    expect(out.text()).toContain('apple_counter_replay');
    keyboard.write('q');
    await done;
  });
});
