import { createInterface } from 'node:readline';
import { negativeError, usageError } from './errors.js';

/** What a confirmation reads and writes: the terminal, or a test's streams. */
export interface PromptIo {
  input: NodeJS.ReadableStream & { isTTY?: boolean };
  output: NodeJS.WritableStream & { isTTY?: boolean };
}

const terminal = (): PromptIo => ({ input: process.stdin, output: process.stderr });

/**
 * Checked before anything else: a destructive command without `--yes` needs a terminal to ask on,
 * so a script learns at once (exit 2) that it must say `--yes`.
 * @param command the command as typed, for the message (`keys revoke`)
 */
export function requireConfirmation(
  command: string,
  yes: boolean | undefined,
  io: PromptIo = terminal(),
): void {
  if (yes || (io.input.isTTY && io.output.isTTY)) return;
  throw usageError(
    `${command} changes what running instances accept and asks first; without a terminal to ask on, add --yes`,
  );
}

/**
 * Shows what will happen and asks on the terminal (stderr, so stdout stays the command's output);
 * anything but y or yes is a no, which is exit 1 with nothing changed. With `--yes` it only returns.
 * @param lines what will happen, one line each
 */
export async function confirm(
  lines: string[],
  yes: boolean | undefined,
  io: PromptIo = terminal(),
): Promise<void> {
  if (yes) return;
  io.output.write(`${lines.join('\n')}\n`);
  const rl = createInterface({
    input: io.input,
    output: io.output,
    terminal: Boolean(io.input.isTTY && io.output.isTTY),
  });
  const answer = await new Promise<string | null>((resolve) => {
    // Ctrl-D or a closed input is a no
    rl.once('close', () => resolve(null));
    rl.question('Proceed? [y/N] ', (a) => resolve(a));
  });
  rl.close();
  if (answer === null) io.output.write('\n');
  if (!/^\s*y(es)?\s*$/i.test(answer ?? '')) throw negativeError('nothing changed (not confirmed)');
}
