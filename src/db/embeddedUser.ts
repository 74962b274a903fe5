/**
 * Who the embedded PostgreSQL runs as. PostgreSQL refuses to run as root, so when attest runs as
 * root the server needs an OS identity of its own: one that no other software shares, since any
 * process of the server's user can enter the cluster's folder (through /proc/<postgres>/cwd),
 * rewrite pg_hba.conf and read every table. `nobody`, which earlier versions used, is shared by
 * other daemons. So, as a database package does at install, attest makes a system user for it:
 * `attest-db`, with no home, no shell and no password, the first time it is needed.
 *
 * A data dir that another (non-root) user owns names that user instead: the operator chose it.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedEngineError } from './embeddedEngineError.js';

/** The system user the embedded database runs as when attest runs as root. */
export const DATABASE_USER = 'attest-db';

export interface DatabaseUser {
  uid: number;
  gid: number;
  name: string;
}

/**
 * The user PostgreSQL runs as, or undefined when attest is not root (it then runs as attest's
 * own user): the data dir's owner when that is not root, else DATABASE_USER, made if missing.
 */
export function runAsUser(dataDir: string): DatabaseUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const st = statSync(dataDir);
  if (st.uid !== 0) return { uid: st.uid, gid: st.gid, name: String(st.uid) };
  return passwdEntry(DATABASE_USER) ?? createSystemUser();
}

function passwdEntry(name: string): DatabaseUser | undefined {
  // getent also answers for users of NSS sources other than /etc/passwd (LDAP, systemd's userdb)
  const getent = spawnSync('getent', ['passwd', name], { encoding: 'utf8' });
  const line =
    getent.status === 0
      ? getent.stdout.trim()
      : readFileSync('/etc/passwd', 'utf8')
          .split('\n')
          .find((l) => l.startsWith(`${name}:`));
  if (!line) return undefined;
  const fields = line.split(':');
  return { uid: Number(fields[2]), gid: Number(fields[3]), name };
}

function createSystemUser(): DatabaseUser {
  // Debian's and Red Hat's useradd, then BusyBox's adduser (Alpine)
  const attempts: [string, string[]][] = [
    [
      'useradd',
      [
        '--system',
        '--user-group',
        '--no-create-home',
        '--home-dir',
        '/nonexistent',
        '--shell',
        '/usr/sbin/nologin',
        '--comment',
        'attest embedded PostgreSQL',
        DATABASE_USER,
      ],
    ],
    ['adduser', ['-S', '-D', '-H', '-h', '/nonexistent', '-s', '/sbin/nologin', DATABASE_USER]],
  ];
  const failures: string[] = [];
  for (const [command, args] of attempts) {
    const run = spawnSync(command, args, { encoding: 'utf8' });
    // another attest may have made it at the same moment
    const made = passwdEntry(DATABASE_USER);
    if (made) return made;
    failures.push(
      run.error
        ? `${command}: ${(run.error as NodeJS.ErrnoException).code ?? run.error.message}`
        : `${command}: ${run.stderr.trim().split('\n').pop() ?? `exit ${run.status}`}`,
    );
  }
  throw new EmbeddedEngineError(
    `PostgreSQL refuses to run as root and attest could not create its system user ${DATABASE_USER} (${failures.join('; ')}): create it ("useradd --system --user-group --no-create-home --shell /usr/sbin/nologin ${DATABASE_USER}"), or run attest as a regular user`,
  );
}

/** Gives `path` and everything below it to `user` (links themselves, never what they point to). */
export function chownTree(path: string, user: { uid: number; gid: number }): void {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) return;
  chownSync(path, user.uid, user.gid);
  if (!st.isDirectory()) return;
  for (const name of readdirSync(path)) chownTree(join(path, name), user);
}
