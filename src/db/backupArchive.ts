/**
 * Unpacks a backup made by `attest db backup` (a gzipped tar of a PostgreSQL base backup,
 * entries named `PG_VERSION`, `base/1/...`) into a new folder,
 * streaming: the gunzipped bytes are counted as they come and the unpacking stops at a limit, so a
 * small file that inflates to gigabytes costs neither memory nor more than the limit of disk.
 * tar-stream parses the tar; every entry is checked before a byte of it is written: a plain file
 * or a directory only (no links, devices or fifos), a name inside the folder (no `..`, no empty
 * or odd path segments), a size within what is left of the limit, and within the count of
 * entries and of folders (each an inode: an archive of 100,000 folder entries is small). Each refusal is a
 * BackupRefusedError whose message says what is wrong in one line.
 */
import { Fault } from '../core/fault.js';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract, type Header } from 'tar-stream';

/** The archive is not a usable attest backup; the message says why in one line. */
export class BackupRefusedError extends Fault {
  override readonly name = 'BackupRefusedError';
  constructor(message: string) {
    super('backup_refused', message);
  }
}

/** The default ceiling on what a backup may unpack to: far above an embedded attest database. */
export const DEFAULT_MAX_UNPACKED_BYTES = 2 * 1024 ** 3;

/** What a backup may unpack to: bytes, and entries and folders (each an inode, and time). */
export interface UnpackLimits {
  /** the tar's bytes, headers included */
  maxBytes: number;
  /** entries of any kind (files and folders, repeated ones included) */
  maxEntries?: number;
  /** folders */
  maxDirectories?: number;
}

/**
 * A fresh attest cluster has about 1,000 files in 30 folders (a database is a folder of its
 * files); these are far above one, and far below what fills a disk's inodes or takes minutes.
 */
export const DEFAULT_MAX_ENTRIES = 10_000;
export const DEFAULT_MAX_DIRECTORIES = 2_000;
export const DEFAULT_LIMITS: UnpackLimits = {
  maxBytes: DEFAULT_MAX_UNPACKED_BYTES,
  maxEntries: DEFAULT_MAX_ENTRIES,
  maxDirectories: DEFAULT_MAX_DIRECTORIES,
};

// a PostgreSQL data directory's names: base/16384/2619_fsm, pg_wal/000000010000000000000005...
const SEGMENT = /^[A-Za-z0-9_.-]{1,100}$/;
const MAX_DEPTH = 8;
const TAR_BLOCK = 512;

/**
 * Unpacks the gzipped tar read from `source` into `dir` (which must not exist yet).
 * @returns the number of files written
 */
export async function unpackBackup(
  source: Readable,
  dir: string,
  limits: UnpackLimits,
): Promise<{ files: number }> {
  const maxEntries = limits.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const maxDirectories = limits.maxDirectories ?? DEFAULT_MAX_DIRECTORIES;
  mkdirSync(dir, { mode: 0o700 });
  let refusal: BackupRefusedError | undefined;
  const refuse = (message: string) => (refusal ??= new BackupRefusedError(message));
  let unpacked = 0;
  let first = true;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      unpacked += chunk.length;
      if (unpacked > limits.maxBytes)
        return done(refuse(`it unpacks to more than ${limits.maxBytes} bytes (the limit)`));
      // a tar starts with a header; an empty block first is zeros, not an archive
      if (first && chunk.length >= TAR_BLOCK) {
        first = false;
        if (chunk.subarray(0, TAR_BLOCK).every((b) => b === 0))
          return done(refuse('it is not a tar archive (it starts with an empty block)'));
      }
      done(null, chunk);
    },
  });
  const gunzip = createGunzip();
  const tar = extract();
  const feeding = pipeline(source, gunzip, counter, tar).catch((err: unknown) => {
    if (refusal) return;
    const code = (err as { code?: string }).code;
    if (code === 'Z_DATA_ERROR' || code === 'Z_BUF_ERROR')
      refuse(`it is not gzip data, or a damaged one (${firstLine(err)})`);
    else refuse(`it is not a tar archive, or a damaged one (${firstLine(err)})`);
  });
  let files = 0;
  let declared = 0;
  let entries = 0;
  const seen = new Set<string>();
  const folders = new Set<string>();
  // a folder made for a file's path counts as a folder too
  const makeFolder = (name: string) => {
    const parts = name.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const folder = parts.slice(0, i).join('/');
      if (folders.has(folder)) continue;
      if (folders.size >= maxDirectories)
        throw refuse(`it holds more than ${maxDirectories} folders (the limit)`);
      folders.add(folder);
      mkdirSync(join(dir, folder), { mode: 0o700 });
    }
  };
  try {
    for await (const entry of tar) {
      const header = entry.header;
      if (++entries > maxEntries)
        throw refuse(`it holds more than ${maxEntries} entries (the limit)`);
      const name = entryName(header);
      if (typeof name !== 'string') throw refuse(name.problem);
      if (header.type === 'directory') {
        if (name !== '') makeFolder(name);
        entry.resume();
        continue;
      }
      if (header.type !== 'file' && header.type !== 'contiguous-file')
        throw refuse(
          `it holds ${JSON.stringify(shown(header.name))}, a ${header.type ?? 'odd'} entry`,
        );
      if (name === '' || seen.has(name))
        throw refuse(`it holds ${JSON.stringify(shown(header.name))} twice or without a name`);
      seen.add(name);
      // the sizes headers declare count before their bytes are read
      declared += (header.size ?? 0) + TAR_BLOCK;
      if (declared > limits.maxBytes)
        throw refuse(`it unpacks to more than ${limits.maxBytes} bytes (the limit)`);
      const path = join(dir, name);
      if (folders.has(name))
        throw refuse(`it holds ${JSON.stringify(shown(header.name))} as a folder and a file`);
      const parent = name.split('/').slice(0, -1).join('/');
      if (parent) makeFolder(parent);
      await pipeline(entry, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
      files++;
    }
  } catch (err) {
    tar.destroy();
    await feeding;
    if (refusal) throw refusal;
    throw new BackupRefusedError(`it could not be unpacked (${firstLine(err)})`);
  }
  await feeding;
  if (refusal) throw refusal;
  if (files === 0) throw new BackupRefusedError('it holds no files');
  if (!existsSync(join(dir, 'PG_VERSION')))
    throw new BackupRefusedError('it holds no PostgreSQL data directory (no PG_VERSION)');
  return { files };
}

/** The entry's path inside the folder ('' for the folder itself), or why it is refused. */
function entryName(header: Header): string | { problem: string } {
  // "base/1/...", or "./base/1/..." and "/base/1/..." as other tools write them
  const trimmed = header.name.replace(/^\.?\/+/, '').replace(/\/+$/, '');
  if (trimmed === '' || trimmed === '.') return '';
  const segments = trimmed.split('/');
  if (
    segments.length > MAX_DEPTH ||
    segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..')
  )
    return {
      problem: `it holds ${JSON.stringify(shown(header.name))}, a name outside a database folder`,
    };
  return segments.join('/');
}

/** A name as quoted in a message: at most 80 characters, printable ASCII only. */
function shown(name: string): string {
  const safe = name.replace(/[^\x20-\x7e]/g, '?');
  return safe.length > 80 ? `${safe.slice(0, 80)}…` : safe;
}

function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return (message ?? '').split('\n')[0]!.slice(0, 200);
}
