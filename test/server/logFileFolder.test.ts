/**
 * The data dir is private before anything is written into it, also when the log file lies inside
 * it (as under `attest dev up`, whose log is <data-dir>/attest.log and is opened first).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { once, type EventEmitter } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/server/logger.js';

describe.skipIf(process.getuid?.() === undefined)('a log file inside a new data dir', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'attest-logdir-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('makes the data dir (and any folder above it it creates) 0700, the log file 0640', async () => {
    const previous = process.umask(0o022);
    try {
      const dataDir = join(root, 'parent', '.attest-dev');
      const logger = createLogger({
        level: 'info',
        file: join(dataDir, 'attest.log'),
        stdout: false,
      });
      // before anything is written: the folders exist already, private
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      expect(statSync(join(root, 'parent')).mode & 0o777).toBe(0o700);
      // the file stream opens asynchronously: wait for it, then for the line
      const { stream } = (
        logger as unknown as Record<
          symbol,
          { streams: { stream: EventEmitter & { fd: number } }[] }
        >
      )[pino.symbols.streamSym]!.streams[0]!;
      if (stream.fd < 0) await once(stream, 'ready');
      logger.info('written');
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      expect(statSync(join(root, 'parent')).mode & 0o777).toBe(0o700);
      expect(statSync(join(dataDir, 'attest.log')).mode & 0o777).toBe(0o640);
    } finally {
      process.umask(previous);
    }
  });
});
