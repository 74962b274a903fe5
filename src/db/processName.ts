import { readFileSync } from 'node:fs';

/**
 * A process as messages name it: `attest serve (pid 123, --port 8080)` when its command line is
 * an attest command, else `process 123`. Read from /proc on Linux; elsewhere the pid alone.
 * @param pid the process id (0: unknown, a lock being written)
 */
export function processName(pid: number): string {
  if (pid <= 0) return 'a process that is starting';
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return `process ${pid}`;
  }
  const script = argv.findIndex((a) => /(^|\/)attest(\.js)?$/.test(a));
  if (script < 0) return `process ${pid}`;
  const words = argv.slice(script + 1);
  const command = words.filter((w) => !w.startsWith('-')).slice(0, 2);
  // `dev up` is two words; every other long-running command is one
  const name = command[0] === 'dev' ? command.join(' ') : (command[0] ?? '');
  const port = words.indexOf('--port');
  const where = port >= 0 && words[port + 1] ? `, --port ${words[port + 1]}` : '';
  return `attest ${name}`.trim() + ` (pid ${pid}${where})`;
}
