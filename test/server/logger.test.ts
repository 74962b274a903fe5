import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger, LOG_FILE_MODE } from '../../src/server/logger.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the log file', () => {
  it('is created 0640 (group may read, others not), in a folder it creates', async () => {
    dir = mkdtempSync(join(tmpdir(), 'attest-log-'));
    const path = join(dir, 'logs', 'attest.log');
    const logger = createLogger({ level: 'info', file: path, stdout: false });
    logger.info({ requestId: 'r1' }, 'request');
    logger.flush();
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(0), {
      timeout: 10_000,
      interval: 5,
    });
    const umask = process.umask();
    expect(LOG_FILE_MODE).toBe(0o640);
    expect(statSync(path).mode & 0o777).toBe(0o640 & ~umask);
    expect(statSync(path).mode & 0o007).toBe(0);
  });
});
