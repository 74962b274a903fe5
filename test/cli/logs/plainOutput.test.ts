import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { NO_FILTER } from '../../../src/cli/logs/logFilter.js';
import { runPlain, type LogsOptions } from '../../../src/cli/logs/runLogs.js';
import { captureOut, fakeIo } from './helpers.js';
import { plainLine, requestLine } from './sampleLog.js';

const replay = requestLine({
  requestId: 'r-replay',
  isValid: false,
  reason: 'apple_counter_replay',
  keyId: 'KID1',
});
const stale = requestLine({
  requestId: 'r-stale',
  service: 'gms',
  isValid: false,
  reason: 'gms_token_stale',
  packageName: 'com.example',
  apiKeyId: 'other',
});
const ok = requestLine({ requestId: 'r-ok', isValid: true, keyId: 'KID2' });
const LOG = [
  plainLine(30, 'listening', { port: 8080 }),
  replay,
  'Killed',
  ok,
  '{"cut":',
  stale,
].join('\n');

const opts = (patch: Partial<LogsOptions> = {}): LogsOptions => ({
  follow: false,
  json: false,
  filter: NO_FILTER,
  ...patch,
});

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'attest-plain-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('runPlain', () => {
  it('prints one human line per line, raw text for lines that are not JSON', async () => {
    const out = captureOut();
    await runPlain(opts(), fakeIo({ input: LOG, stdout: out.stream }));
    const lines = out.lines();
    expect(lines).toHaveLength(6);
    expect(lines[0]).toMatch(/INFO +listening port=8080$/);
    expect(lines[1]?.split(/\s+/).slice(1)).toEqual([
      '200',
      '/api/v1/attestation/verify',
      'apple',
      'invalid',
      'apple_counter_replay',
      'KID1',
      'r-replay',
    ]);
    expect(lines[2]).toBe('Killed');
    expect(lines[4]).toBe('{"cut":');
    expect(lines[5]).toMatch(/ gms +invalid +gms_token_stale +com\.example +r-stale$/);
  });

  it('applies the filters', async () => {
    const out = captureOut();
    await runPlain(
      opts({ filter: { ...NO_FILTER, rejectionsOnly: true, apiKeyId: 'other' } }),
      fakeIo({ input: LOG, stdout: out.stream }),
    );
    expect(out.lines().map((l) => l.split(/\s+/).at(-1))).toEqual(['r-stale']);
  });

  it('--observed: only valid verifies that failed an observed rule, their codes as the reason', async () => {
    const observed = requestLine({
      requestId: 'r-observed',
      isValid: true,
      observed: ['apple_risk_exceeded', 'apple_receipt_invalid'],
      keyId: 'KID3',
    });
    const out = captureOut();
    await runPlain(
      opts({ filter: { ...NO_FILTER, observedOnly: true } }),
      fakeIo({ input: `${LOG}\n${observed}`, stdout: out.stream }),
    );
    const lines = out.lines();
    expect(lines).toHaveLength(1);
    expect(lines[0]?.split(/\s+/).slice(1)).toEqual([
      '200',
      '/api/v1/attestation/verify',
      'apple',
      'valid',
      'observed:apple_risk_exceeded,apple_receipt_invalid',
      'KID3',
      'r-observed',
    ]);
  });

  it('prints matching lines verbatim as NDJSON with --json, leaving out lines that are not JSON', async () => {
    const out = captureOut();
    await runPlain(
      opts({ json: true, filter: { ...NO_FILTER, search: 'e' } }),
      fakeIo({ input: LOG, stdout: out.stream }),
    );
    expect(out.lines()).toEqual([plainLine(30, 'listening', { port: 8080 }), replay, ok, stale]);
    for (const line of out.lines()) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('prints only the last N matching lines with a limit', async () => {
    const out = captureOut();
    await runPlain(
      opts({ limit: 2, filter: { ...NO_FILTER, rejectionsOnly: true } }),
      fakeIo({ input: `${LOG}\n${LOG}\n${replay}`, stdout: out.stream }),
    );
    expect(out.lines().map((l) => l.split(/\s+/).at(-1))).toEqual(['r-stale', 'r-replay']);
  });

  it('waits for a slow reader instead of failing or losing lines', async () => {
    const out = captureOut({ slow: true });
    const many = Array.from({ length: 300 }, (_, i) => requestLine({ requestId: `q${i}` })).join(
      '\n',
    );
    await runPlain(opts({ json: true }), fakeIo({ input: many, stdout: out.stream }));
    expect(out.lines()).toHaveLength(300);
    expect(JSON.parse(out.lines()[299] ?? '{}').requestId).toBe('q299');
  });

  it('ends quietly when the reader of the output goes away (EPIPE), even while following', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, `${replay}\n`);
    const out = captureOut({ failAfter: 1 });
    const done = runPlain(
      opts({ file: path, follow: true, pollMs: 5 }),
      fakeIo({ stdout: out.stream }),
    );
    // The first line is printed; the next write fails with EPIPE, which must end following.
    // Appended once the first line is out (a timer could fire before the first read on a busy machine).
    await vi.waitFor(() => expect(out.lines()).toHaveLength(1), { timeout: 10_000, interval: 5 });
    appendFileSync(path, `${ok}\n`);
    await expect(done).resolves.toBeUndefined();
    expect(out.lines()).toHaveLength(1);
  });

  it('reports another write error as a runtime failure (exit 3)', async () => {
    const out = captureOut({ failAfter: 0, code: 'EIO' });
    await expect(
      runPlain(opts(), fakeIo({ input: LOG, stdout: out.stream })),
    ).rejects.toMatchObject({ exitCode: 3 });
  });
});
