/**
 * Finding 5: the CLI connected to whatever socket the lock named. Now it checks the socket, its
 * folder and every folder above it before it connects: a socket planted where another user could
 * put it is refused with one line (exit 3), and the planted listener never sees a connection.
 * The server, for its part, never makes its socket folder under a base another user controls.
 */
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ADMIN_SOCKET_FILE,
  checkSocketPath,
  createPrivateSocketPath,
  removeSocket,
  SocketPathError,
  untrustedFolder,
} from '../../src/socketPath.js';
import { oneLine, runCli } from '../support/cli.js';

const isRoot = process.getuid?.() === 0;
const posix = process.getuid !== undefined;
// `nobody` on Debian and most distributions; any uid that is not ours would do
const OTHER_UID = 65534;

let root: string;
let dataDir: string;
const planted: Server[] = [];
let connections = 0;

/** A listening socket at `path`, counting who connects; mode as given. */
async function plant(path: string, mode = 0o600): Promise<void> {
  const server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  chmodSync(path, mode);
  planted.push(server);
}

/** The data dir's lock names `socket` as the admin socket of a live server (this process). */
function lockNaming(socket: string): void {
  writeFileSync(
    join(dataDir, 'attest.lock'),
    JSON.stringify({ pid: process.pid, admin: { socket, secret: 'planted-secret' } }),
    { mode: 0o600 },
  );
}

async function refused(pattern: RegExp): Promise<void> {
  const run = await runCli('keys', 'list');
  expect(run.code).toBe(3);
  expect(run.stdout).toBe('');
  expect(oneLine(run)).toMatch(/^attest: refusing the admin socket .* that the lock file names: /);
  expect(oneLine(run)).toMatch(pattern);
  expect(connections).toBe(0);
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'attest-planted-'));
  dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  delete process.env.DATABASE_URL;
  process.env.ATTEST_DATA_DIR = dataDir;
});
afterAll(async () => {
  await Promise.all(planted.map((s) => new Promise((resolve) => s.close(resolve))));
  rmSync(root, { recursive: true, force: true });
  delete process.env.ATTEST_DATA_DIR;
});
beforeEach(() => {
  connections = 0;
});

describe.skipIf(!posix)('the CLI refuses a socket it cannot trust', () => {
  it('a folder with mode 0755 (others may reach the socket)', async () => {
    const folder = join(root, 'open-folder');
    mkdirSync(folder, { mode: 0o700 });
    chmodSync(folder, 0o755);
    await plant(join(folder, ADMIN_SOCKET_FILE));
    lockNaming(join(folder, ADMIN_SOCKET_FILE));
    await refused(/its folder has mode 755, not 700/);
  });

  it('a socket with mode 0666', async () => {
    const folder = join(root, 'open-socket');
    mkdirSync(folder, { mode: 0o700 });
    await plant(join(folder, ADMIN_SOCKET_FILE), 0o666);
    lockNaming(join(folder, ADMIN_SOCKET_FILE));
    await refused(/it has mode 666, not 600/);
  });

  it('a folder that is a symbolic link to a private folder', async () => {
    const real = join(root, 'real');
    mkdirSync(real, { mode: 0o700 });
    await plant(join(real, ADMIN_SOCKET_FILE));
    symlinkSync(real, join(root, 'link'));
    lockNaming(join(root, 'link', ADMIN_SOCKET_FILE));
    await refused(/its folder is a symbolic link/);
  });

  it('a path that is not a socket', async () => {
    const folder = join(root, 'file');
    mkdirSync(folder, { mode: 0o700 });
    writeFileSync(join(folder, ADMIN_SOCKET_FILE), 'x', { mode: 0o600 });
    lockNaming(join(folder, ADMIN_SOCKET_FILE));
    await refused(/it is not a socket/);
  });

  it.skipIf(!isRoot)('a folder owned by another user', async () => {
    const folder = join(root, 'foreign');
    mkdirSync(folder, { mode: 0o700 });
    await plant(join(folder, ADMIN_SOCKET_FILE));
    chownSync(folder, OTHER_UID, OTHER_UID);
    lockNaming(join(folder, ADMIN_SOCKET_FILE));
    await refused(new RegExp(`its folder belongs to user ${OTHER_UID}, not to you`));
  });

  it.skipIf(!isRoot)(
    'XDG_RUNTIME_DIR inside another user’s folder: a private-looking folder below it is refused too',
    async () => {
      // the other user owns the base, so could have swapped the folder below it for their own
      const base = join(root, 'eve');
      mkdirSync(base, { mode: 0o755 });
      const folder = join(base, 'attest-abcdef');
      mkdirSync(folder, { mode: 0o700 });
      await plant(join(folder, ADMIN_SOCKET_FILE));
      chownSync(base, OTHER_UID, OTHER_UID);
      lockNaming(join(folder, ADMIN_SOCKET_FILE));
      await refused(new RegExp(`eve belongs to user ${OTHER_UID}, who could replace`));
    },
  );

  it('a folder above that others may write to (and not sticky)', async () => {
    const base = join(root, 'shared');
    mkdirSync(base, { mode: 0o700 });
    chmodSync(base, 0o777);
    const folder = join(base, 'attest-abcdef');
    mkdirSync(folder, { mode: 0o700 });
    await plant(join(folder, ADMIN_SOCKET_FILE));
    lockNaming(join(folder, ADMIN_SOCKET_FILE));
    await refused(/shared is writable by other users \(mode 777\) and not sticky/);
  });
});

describe.skipIf(!posix)('the server’s socket folder', () => {
  it('is a new 0700 folder under a private base; the checks pass for it', async () => {
    const base = join(root, 'run');
    mkdirSync(base, { mode: 0o700 });
    const path = createPrivateSocketPath(base);
    try {
      expect(dirname(dirname(path))).toBe(base);
      expect(statSync(dirname(path)).mode & 0o777).toBe(0o700);
      await plant(path);
      expect(checkSocketPath(path)).toBe(path);
    } finally {
      removeSocket(path);
    }
  });

  it('skips a base that others may write to, for the OS temporary folder', () => {
    const base = join(root, 'world');
    mkdirSync(base, { mode: 0o700 });
    chmodSync(base, 0o777);
    expect(untrustedFolder(base)).toMatch(/writable by other users/);
    const path = createPrivateSocketPath(base);
    try {
      expect(path.startsWith(base)).toBe(false);
      expect(untrustedFolder(dirname(path))).toBeNull();
    } finally {
      removeSocket(path);
    }
  });

  it('/tmp (sticky, root) is a trusted base', () => {
    expect(untrustedFolder('/tmp')).toBeNull();
  });

  it('a path with nothing there is refused with a reason, not an exception of fs', () => {
    expect(() => checkSocketPath(join(root, 'nowhere', ADMIN_SOCKET_FILE))).toThrow(
      SocketPathError,
    );
  });
});
