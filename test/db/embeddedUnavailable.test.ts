/** A full disk is named in the one line that says why the embedded database cannot be used. */
import { describe, expect, it } from 'vitest';
import { DatabaseUnavailableError, embeddedUnavailable } from '../../src/db/errors.js';

const fsError = (code: string) =>
  Object.assign(new Error(`${code}: something, write`), { code, syscall: 'write' });

describe('embeddedUnavailable', () => {
  it('names ENOSPC and the like, with the room left', () => {
    const err = embeddedUnavailable('/data', fsError('ENOSPC'), { free: () => 0 });
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as Error).message).toBe(
      'cannot use the embedded database in /data: the disk is full (ENOSPC, no space left on device), 0 bytes free; make room on its disk and start again',
    );
    expect(
      (embeddedUnavailable('/data', fsError('EROFS'), { free: () => undefined }) as Error).message,
    ).toBe(
      'cannot use the embedded database in /data: the file system is read-only (EROFS); make its file system writable and start again',
    );
    // PostgreSQL's disk_full inside drizzle's wrapper
    const wrapped = new Error('Failed query: insert ...', {
      cause: Object.assign(new Error('could not extend file'), { code: '53100' }),
    });
    expect((embeddedUnavailable('/data', wrapped, { free: () => 8192 }) as Error).message).toMatch(
      /^cannot use the embedded database in \/data: the disk is full \(PostgreSQL: disk_full\), 8 KiB free;/,
    );
  });

  it('says the disk is nearly full when PGlite aborts ("unreachable") with little room left', () => {
    const trap = Object.assign(new Error('unreachable'), { name: 'RuntimeError' });
    const err = embeddedUnavailable('/data', trap, { free: () => 3 * 1024 * 1024 });
    expect((err as Error).message).toBe(
      'cannot use the embedded database in /data: its disk is nearly full (3 MiB free) and the database failed (unreachable); make room on its disk and start again',
    );
    // with room to spare the failure is not the disk's: left as it was
    expect(embeddedUnavailable('/data', trap, { free: () => 10 * 1024 ** 3 })).toBe(trap);
    const other = new Error('master key mismatch');
    expect(embeddedUnavailable('/data', other, { free: () => 0 })).toBe(other);
  });
});
