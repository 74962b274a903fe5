import { render } from 'ink';
import type { StatsTotal } from '../../db/statsDimensions.js';
import { usageError } from '../errors.js';
import { StatsWatch } from './StatsWatch.js';

/** Runs the live view on the terminal until `q` (or Ctrl-C). */
export async function runStatsWatch(
  load: () => Promise<readonly StatsTotal[]>,
  filters: string,
  io: { stdin: NodeJS.ReadStream; stdout: NodeJS.WriteStream } = {
    stdin: process.stdin,
    stdout: process.stdout,
  },
): Promise<void> {
  if (io.stdout.isTTY !== true || io.stdin.isTTY !== true)
    throw usageError(
      '--watch needs a terminal; without one, run attest stats (--json) on a schedule',
    );
  // the alternate screen, as `attest logs` does: the shell's scrollback is left as it was
  io.stdout.write('\u001b[?1049h');
  try {
    const app = render(<StatsWatch load={load} filters={filters} />, {
      stdin: io.stdin,
      stdout: io.stdout,
      exitOnCtrlC: true,
      patchConsole: false,
    });
    try {
      await app.waitUntilExit();
    } finally {
      app.cleanup();
    }
  } finally {
    io.stdout.write('\u001b[?1049l');
  }
}
