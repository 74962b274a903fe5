/**
 * `attest db restore` refuses every archive that is not an attest backup with one line and exit 2,
 * before anything is put in place: a gzip bomb (stopped by counting what it unpacks to, never
 * inflated whole), an archive that holds a PostgreSQL database other than attest's, names that
 * leave the folder (`../`), links, a directory entry without a database, 100,000 folder entries
 * (bounded by count, not only bytes), and a backup of the earlier PGlite engine. The data dir is
 * left without a database (nor a half-unpacked one) each time.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pipeline } from 'node:stream/promises';
import { createWriteStream } from 'node:fs';
import { backupCluster } from '../../src/db/embeddedBackup.js';
import { createCluster, startServer } from '../../src/db/embeddedServer.js';
import { clientOf } from '../support/databases.js';
import { pack, type Header } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneLine, runCli } from '../support/cli.js';

let root: string;
let n = 0;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'attest-restore-'));
});
afterAll(() => {
  delete process.env.ATTEST_DATA_DIR;
  rmSync(root, { recursive: true, force: true });
});

/** A gzipped tar of these entries, made with tar-stream (a file's `body`, else a directory). */
type Entry = { header: Partial<Header> & { name: string }; body?: Buffer };

async function archive(entries: Entry[]): Promise<Buffer> {
  const tar = pack();
  for (const e of entries) {
    if (e.body) tar.entry(e.header as Header, e.body);
    else tar.entry(e.header as Header);
  }
  tar.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of tar) chunks.push(chunk as Buffer);
  return gzipSync(Buffer.concat(chunks));
}

/** One ustar header of a folder entry (tar-stream takes a minute for 100,000 of them under load). */
function folderHeader(name: string): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'ascii');
  h.write('0000700\0', 100, 'ascii');
  h.write('0000000\0', 108, 'ascii');
  h.write('0000000\0', 116, 'ascii');
  h.write('00000000000\0', 124, 'ascii');
  h.write('00000000000\0', 136, 'ascii');
  h.write('        ', 148, 'ascii');
  h.write('5', 156, 'ascii');
  h.write('ustar\0' + '00', 257, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** A gzipped tar of PG_VERSION then these folder entries, written block by block. */
async function folderBomb(names: string[]): Promise<Buffer> {
  const head = await archive([
    { header: { name: 'PG_VERSION', size: 3 }, body: Buffer.from('18\n') },
  ]);
  const { gunzipSync } = await import('node:zlib');
  const first = gunzipSync(head);
  // PG_VERSION's header and block, then the folders, then the two zero blocks that end a tar
  return gzipSync(
    Buffer.concat([first.subarray(0, 1024), ...names.map(folderHeader), Buffer.alloc(1024)]),
  );
}

/** Restores `backup` into a new data dir; returns the run and that dir. */
async function restore(backup: Buffer, ...args: string[]) {
  const file = join(root, `backup-${++n}.tgz`);
  writeFileSync(file, backup);
  const dataDir = join(root, `data-${n}`);
  process.env.ATTEST_DATA_DIR = dataDir;
  const run = await runCli('db', 'restore', file, ...args);
  // nothing that looks like a database, nor a partial one, is left behind
  const left = existsSync(dataDir) ? readdirSync(dataDir) : [];
  expect(left.filter((f) => f === 'postgresql' || f.startsWith('postgresql.restoring'))).toEqual(
    [],
  );
  return { run, dataDir };
}

describe('attest db restore refuses what is not an attest backup', () => {
  it('a 1 MB gzip of 1 GiB of zeros: exit 2 at once, nothing inflated', async () => {
    // gzip members concatenated are one gzip stream: 1,024 x 1 MiB of zeros
    const member = gzipSync(Buffer.alloc(1024 * 1024));
    const bomb = Buffer.concat(Array.from({ length: 1024 }, () => member));
    expect(bomb.length).toBeLessThan(1.1 * 1024 * 1024);
    const { run } = await restore(bomb);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(
      /not a backup made by "attest db backup": it is not a tar archive/,
    );
  });

  it('a tar that unpacks past the limit is stopped at the limit (counted, not inflated)', async () => {
    const zeros = Buffer.alloc(1024 * 1024);
    const entries: Entry[] = [
      { header: { name: '/PG_VERSION', size: 3 }, body: Buffer.from('17\n') },
    ];
    for (let i = 0; i < 32; i++)
      entries.push({ header: { name: `/base/1/${16384 + i}`, size: zeros.length }, body: zeros });
    const bomb = await archive(entries); // 32 MiB unpacked, some 32 KB packed
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    const { run } = await restore(bomb, '--max-unpacked', '4');
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/it unpacks to more than 4194304 bytes \(the limit\)/);
  });

  it('a PostgreSQL database that is not attest: exit 2, nothing replaced', async () => {
    // a real backup (attest's own method) of a cluster that holds another application's table
    const other = mkdtempSync(join(tmpdir(), 'attest-other-'));
    createCluster(other);
    const server = await startServer(other);
    const file = join(root, 'other.tgz');
    try {
      const sql = clientOf(server.url, { max: 1 });
      await sql`create table notes (id int)`;
      await sql.end();
      await pipeline(backupCluster(server.url, other), createWriteStream(file));
    } finally {
      await server.stop();
      rmSync(other, { recursive: true, force: true });
    }
    const { run, dataDir } = await restore(readFileSync(file));
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/it holds a PostgreSQL database, but not attest's/);
    expect(existsSync(join(dataDir, 'postgresql'))).toBe(false);
  }, 120_000);

  it('100,000 folder entries in 834 KB: refused at the folder limit, fast, few inodes', async () => {
    const bomb = await folderBomb(Array.from({ length: 100_000 }, (_, i) => `base/${i}/`));
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    const started = Date.now();
    const { run, dataDir } = await restore(bomb);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/it holds more than 2000 folders \(the limit\)/);
    // seconds, not the minutes and 100,000 inodes of an unbounded unpack
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(readdirSync(dataDir).filter((f) => f.startsWith('postgresql.restoring'))).toEqual([]);
  }, 60_000);

  it('the same folder entry 100,000 times: refused at the entry limit', async () => {
    const entries: Entry[] = [];
    for (let i = 0; i < 100_000; i++)
      entries.push({ header: { name: 'base/', type: 'directory' } });
    const { run } = await restore(await archive(entries));
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/it holds more than 10000 entries \(the limit\)/);
  }, 60_000);

  it("a backup of the earlier engine (PGlite's PostgreSQL 17 tar): exit 2, says so", async () => {
    const { run } = await restore(
      await archive([
        { header: { name: '/PG_VERSION', size: 3 }, body: Buffer.from('17\n') },
        { header: { name: '/global/', type: 'directory' } },
      ]),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/earlier embedded engine \(PGlite, PostgreSQL 17\)/);
  });

  it('a ../ name: exit 2, one line, nothing written outside', async () => {
    const { run } = await restore(
      await archive([
        { header: { name: '/PG_VERSION', size: 3 }, body: Buffer.from('17\n') },
        { header: { name: '../escaped', size: 2 }, body: Buffer.from('hi') },
      ]),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/"\.\.\/escaped", a name outside a database folder/);
    expect(existsSync(join(root, 'escaped'))).toBe(false);
  });

  it('a symbolic link: exit 2, one line', async () => {
    const { run } = await restore(
      await archive([{ header: { name: '/base', type: 'symlink', linkname: '/etc' } }]),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/"\/base", a symlink entry/);
  });

  it('a directory entry and no database: exit 2, one line', async () => {
    const { run } = await restore(
      await archive([
        { header: { name: 'pg_wal/', type: 'directory' } },
        { header: { name: 'pg_wal/notes.txt', size: 2 }, body: Buffer.from('hi') },
      ]),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/it holds no PostgreSQL data directory \(no PG_VERSION\)/);
  });

  it('a directory entry and a broken database: exit 2, one line', async () => {
    const { run } = await restore(
      await archive([
        { header: { name: './', type: 'directory' } },
        { header: { name: './global/', type: 'directory' } },
        { header: { name: './PG_VERSION', size: 3 }, body: Buffer.from('17\n') },
      ]),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/not a backup made by "attest db backup": it/);
  }, 120_000);
});
