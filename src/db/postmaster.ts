/**
 * What attest knows of a cluster's postmaster and its processes: which one is alive and really
 * that cluster's, which one attest spawned this time, how to stop one left by an attest that is
 * gone, and what one killed without a shutdown leaves behind.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedEngineError } from './embeddedEngineError.js';

/** The postmaster that `postmaster.pid` of the cluster names, when it is alive and is that cluster's. */
export function livePostmaster(pgDir: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  // a reused pid: only a process working in the cluster's folder is its postmaster
  try {
    if (readlinkSync(`/proc/${pid}/cwd`) !== realpathSync(pgDir)) return undefined;
  } catch (err) {
    // no /proc (macOS): the pid is all there is
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || existsSync('/proc/self'))
      return undefined;
  }
  return pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > until) return false;
    await sleep(20);
  }
  return true;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Stops a postmaster left running by an attest that is gone (the caller holds the lock): fast
 * shutdown, then immediate, then SIGKILL. Returns its pid when there was one.
 */
export async function stopOrphan(pgDir: string): Promise<number | undefined> {
  const pid = livePostmaster(pgDir);
  if (pid === undefined) return undefined;
  for (const [signal, ms] of [
    ['SIGINT', 15_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return pid;
    }
    if (await waitGone(pid, ms)) return pid;
  }
  throw new EmbeddedEngineError(
    `the PostgreSQL server (pid ${pid}) left running in ${pgDir} does not stop: stop it, then start again`,
  );
}

/**
 * What a postmaster killed without a shutdown (SIGKILL, a crash, a power cut) leaves behind, once
 * no postmaster of the cluster lives (the caller checked): its backends, which hold its shared
 * memory until they notice and which the next postmaster would refuse to start beside, and a
 * postmaster.pid that may name a pid now reused by another process (as in a container, where
 * pids repeat), which PostgreSQL would also refuse. Linux only: elsewhere PostgreSQL decides.
 */
export async function clearLeftovers(pgDir: string, socketFiles: string[]): Promise<void> {
  for (const file of socketFiles) rmSync(file, { force: true });
  if (!existsSync('/proc/self')) return;
  const cluster = realpathSync(pgDir);
  const leftovers = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === cluster;
      } catch {
        return false;
      }
    });
  for (const pid of leftovers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (const pid of leftovers) await waitGone(pid, 5_000);
  rmSync(join(pgDir, 'postmaster.pid'), { force: true });
}

/**
 * The pid of the postmaster that `postmaster.pid` names once it accepts connections (line 8 says
 * "ready", PostgreSQL 10+), when that postmaster is the one `wrapper` (the shell attest spawned
 * this time) started: a file left by an earlier run, or planted, names another process. Where
 * there is no /proc (macOS), its start time (line 3) must be this run's.
 */
export function ourPostmaster(
  pgDir: string,
  wrapper: number,
  spawnedAt: number,
): number | undefined {
  let lines: string[];
  try {
    lines = readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || lines[7]?.trim() !== 'ready') return undefined;
  if (existsSync('/proc/self')) return parentOf(pid) === wrapper ? pid : undefined;
  return Number(lines[2]) >= Math.floor(spawnedAt / 1000) ? pid : undefined;
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) is in parentheses and may hold spaces: count from the last ')'
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}
