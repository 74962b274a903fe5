import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Replaces `path` with `text`, readable by this user only (0600), as one step: the text goes to a
 * new file of a random name beside it, created with O_EXCL (`wx`, so a symlink or file planted
 * there in a shared folder is refused, never followed), synced, then renamed over `path` (a
 * rename replaces a symlink at `path` itself, not what it points to). A crash leaves the old file
 * or the new one, never half of one. Throws the fs error (its `code` says why).
 */
export function writePrivateFile(path: string, text: string): void {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(8).toString('hex')}.tmp`);
  const fd = openSync(temp, 'wx', 0o600);
  try {
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}
