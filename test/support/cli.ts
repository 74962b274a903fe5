/** Runs the CLI in this process (`main(argv)`) and captures what it writes. */
import { vi } from 'vitest';
import { main } from '../../src/cli/main.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runCli(...args: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const o = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk: unknown) => (out.push(String(chunk)), true));
  const e = vi
    .spyOn(process.stderr, 'write')
    .mockImplementation((chunk: unknown) => (err.push(String(chunk)), true));
  const listeners = process.stdout.listeners('error');
  process.exitCode = undefined;
  let code: number;
  try {
    code = await main(['node', 'attest', ...args]);
  } finally {
    o.mockRestore();
    e.mockRestore();
    // main() adds an EPIPE handler per call: drop the ones this run added
    for (const l of process.stdout.listeners('error'))
      if (!listeners.includes(l)) process.stdout.off('error', l as never);
    process.exitCode = undefined;
  }
  return { code, stdout: out.join(''), stderr: err.join('') };
}

export { oneLine } from './binary.js';
