/**
 * `attest db backup` of the embedded server: PostgreSQL's online base backup, taken while
 * requests go on. On a connection of its own: a temporary replication slot keeps the WAL from now
 * on, pg_backup_start (a fast checkpoint, run by the checkpointer, not by a request), a copy of
 * the cluster's files into a tar, pg_backup_stop, then the backup_label it returns and the WAL
 * written meanwhile. No lock is held across the copy: statements run as usual. The files are
 * read with fs streams and gzipped by zlib in libuv's thread pool, so the event loop only passes
 * buffers along.
 */
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { pack, type Pack } from 'tar-stream';
import { PG_DIR } from './embeddedServer.js';
import { postgresTarget } from './postgresUrl.js';

// what a base backup leaves out (PostgreSQL's own list, see "Backing Up the Data Directory")
const SKIPPED = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'backup_label.old',
  'tablespace_map',
  'pg_internal.init',
]);
const EMPTIED = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);

/** The backup of the embedded cluster (`url` reaches it, `dataDir` holds it) as a gzipped tar stream. */
export function backupCluster(url: string, dataDir: string): Readable {
  const out = new PassThrough();
  const tar = pack();
  const gzip = createGzip();
  const done = pipeline(tar, gzip, out).catch((err: unknown) => out.destroy(err as Error));
  void writeBackup(url, join(dataDir, PG_DIR), tar).then(
    () => tar.finalize(),
    (err: unknown) => {
      tar.destroy(err as Error);
      out.destroy(err as Error);
    },
  );
  void done;
  return out;
}

async function writeBackup(url: string, clusterDir: string, tar: Pack): Promise<void> {
  const { default: postgres } = await import('postgres');
  const target = postgresTarget(url);
  const sql = postgres(target.url, {
    ...target.options,
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    connection: { application_name: 'attest-backup' },
  });
  try {
    await sql`select pg_create_physical_replication_slot(${`attest_backup_${process.pid}`}, true, true)`;
    await sql`select pg_backup_start('attest db backup', true)`;
    let stopped = false;
    try {
      await addTree(tar, clusterDir, '');
      const [stop] = await sql<{ labelfile: string; spcmapfile: string | null }[]>`
        select labelfile, spcmapfile from pg_backup_stop(true)`;
      stopped = true;
      await addEntry(tar, { name: 'backup_label', mode: 0o600 }, Buffer.from(stop!.labelfile));
      if (stop!.spcmapfile)
        await addEntry(tar, { name: 'tablespace_map', mode: 0o600 }, Buffer.from(stop!.spcmapfile));
      // the WAL from the start to the stop: the slot kept every segment since before the start
      await addTree(tar, join(clusterDir, 'pg_wal'), 'pg_wal', true);
    } finally {
      if (!stopped) await sql`select pg_backup_stop(false)`.catch(() => {});
    }
  } finally {
    // the session's end drops the temporary slot
    await sql.end({ timeout: 5 });
  }
}

async function addTree(tar: Pack, dir: string, name: string, wal = false): Promise<void> {
  if (name) await addEntry(tar, { name, type: 'directory', mode: 0o700 });
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const inner = name ? `${name}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      if (!wal && !name && EMPTIED.has(entry.name)) {
        await addEntry(tar, { name: inner, type: 'directory', mode: 0o700 });
        continue;
      }
      await addTree(tar, path, inner, wal);
      continue;
    }
    if (!entry.isFile() || SKIPPED.has(entry.name) || entry.name.startsWith('.s.PGSQL')) continue;
    if (!wal && entry.name.startsWith('pgsql_tmp')) continue;
    await addFile(tar, path, inner);
  }
}

/**
 * One file, as long as it is when the header is written: PostgreSQL may extend a relation while
 * it is copied, and the WAL replay at restore fixes whatever the copy caught half-written.
 */
async function addFile(tar: Pack, path: string, name: string): Promise<void> {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return; // dropped meanwhile (a temporary file, a dropped table): the WAL says so
  }
  let entry!: ReturnType<Pack['entry']>;
  const finished = new Promise<void>((resolve, reject) => {
    entry = tar.entry({ name, size, mode: 0o600 }, (err) => (err ? reject(err) : resolve()));
  });
  let read = 0;
  if (size > 0) {
    for await (const chunk of createReadStream(path, { start: 0, end: size - 1 })) {
      read += (chunk as Buffer).length;
      if (!entry.write(chunk)) await once(entry, 'drain');
    }
  }
  // a file truncated meanwhile (a vacuum): padded to its header's size, replay rewrites it
  if (read < size) entry.write(Buffer.alloc(size - read));
  entry.end(Buffer.alloc(0));
  await finished;
}

function addEntry(
  tar: Pack,
  header: { name: string; type?: 'directory'; mode: number },
  body?: Buffer,
): Promise<void> {
  return new Promise((resolve, reject) =>
    tar.entry(header, body ?? Buffer.alloc(0), (err) => (err ? reject(err) : resolve())),
  );
}
