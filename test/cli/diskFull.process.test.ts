/**
 * A full disk under the embedded database: `attest serve` says so in its one line (naming the
 * data dir and ENOSPC, not "cannot start: unreachable"), and leaves no lock behind, so that it
 * starts again once there is room. Needs a small file system of its own: a tmpfs, mounted as root.
 *
 * Builds its data dir by hand (not from test/support/fixtures.ts): it must live on the tmpfs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, buildOnce, oneLine, runBin, serveBin, stopBin } from '../support/binary.js';

/** A 48 MB tmpfs at a new folder, or null where mounting is not allowed (not root, a container). */
function mountTmpfs(): string | null {
  if (process.getuid?.() !== 0) return null;
  const dir = mkdtempSync(join(tmpdir(), 'attest-full-'));
  const run = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0700', 'tmpfs', dir]);
  if (run.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  return dir;
}

const mount = mountTmpfs();

describe.skipIf(mount === null)('attest serve on a full disk', () => {
  const dataDir = join(mount ?? '/nonexistent', 'data');
  const filler = join(mount ?? '/nonexistent', 'filler');
  const env = baseEnv({ ATTEST_DATA_DIR: dataDir });
  beforeAll(async () => {
    buildOnce();
    expect((await runBin(['db', 'migrate'], env)).code).toBe(0);
  }, 120_000);
  afterAll(() => {
    spawnSync('umount', [mount!]);
    rmSync(mount!, { recursive: true, force: true });
  });

  it('names the disk in its one line, leaves no lock, and starts once there is room', async () => {
    // fill the file system to its last byte
    const chunk = Buffer.alloc(1024 * 1024);
    for (let i = 0; ; i++) {
      try {
        writeFileSync(filler, chunk, { flag: 'a' });
      } catch {
        break;
      }
    }
    for (const size of [64 * 1024, 4096, 512]) {
      try {
        for (;;) writeFileSync(`${filler}.${size}`, Buffer.alloc(size), { flag: 'a' });
      } catch {
        // full at this grain
      }
    }
    const full = await runBin(['serve', '--port', '0', '--host', '127.0.0.1'], env);
    expect(full.code).toBe(3);
    expect(oneLine(full)).toMatch(
      new RegExp(
        `^attest: cannot use the embedded database in ${dataDir}: the disk is full \\(ENOSPC, no space left on device\\), \\d+ (bytes|KiB) free; make room on its disk and start again$`,
      ),
    );
    expect(existsSync(join(dataDir, 'attest.lock'))).toBe(false);
    for (const f of [filler, `${filler}.65536`, `${filler}.4096`, `${filler}.512`])
      rmSync(f, { force: true });
    const served = await serveBin(env);
    await stopBin(served);
    expect((await served.exited).code).toBe(0);
  }, 120_000);
});
