/**
 * Docs that run: the shell blocks of README.md's quick start and of docs/rp-integration.md's
 * five-minute path, run as written by bash in a scratch folder (the checkout's bin, dist and
 * node_modules linked in) on a free port (PORT). `npm ci && npm run build` is the one line not
 * run: the checkout is built already (buildOnce), so `npm` is a shell function that says so.
 * Also the README's `verify-file` walk-through on the example token it ships.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, buildOnce } from '../support/binary.js';

/** The ```sh blocks of the section under `heading`, up to the next heading of its level. */
export function shellBlocks(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`no section "${heading}"`);
  const level = heading.split(' ')[0]!;
  const rest = markdown.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`^${level} `, 'm'));
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** The `$ attest …` commands of a ```console block, continuation lines joined. */
function consoleCommands(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n${heading}\n`);
  const section = markdown.slice(start, markdown.indexOf('\n## ', start + 1));
  const block = /^```console\n([\s\S]*?)^```$/m.exec(section)![1]!;
  return [...block.replace(/\\\n\s*/g, '').matchAll(/^\$ (attest .*)$/gm)].map((m) => m[1]!);
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `script` with bash -e in `cwd`; whatever it left running in the background is stopped after. */
async function runScript(script: string, cwd: string, port: number): Promise<Ran> {
  const prelude = [
    'set -e',
    // the checkout is built: `npm ci && npm run build` only says so
    'npm() { echo "(npm $*: skipped, the checkout is built)"; }',
  ].join('\n');
  const child = spawn('bash', ['-c', `${prelude}\n${script}`], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), LOG_LEVEL: 'warn' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  // 'exit', not 'close': a server it started in the background keeps the pipes open
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    process.kill(-child.pid!, 'SIGTERM');
  } catch {
    // nothing left running
  }
  return { code, stdout, stderr };
}

describe('docs that run as written', { timeout: 240_000 }, () => {
  let scratch: string;

  beforeAll(() => {
    buildOnce();
    scratch = mkdtempSync(join(tmpdir(), 'attest-docs-'));
    for (const name of ['bin', 'dist', 'drizzle', 'node_modules', 'package.json', 'examples'])
      symlinkSync(join(ROOT, name), join(scratch, name));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('README.md quick start: the server starts, is waited for, and a new key opens a session', async () => {
    const blocks = shellBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'), '## Quick start');
    expect(blocks.length).toBeGreaterThan(0);
    const cwd = mkdtempSync(join(scratch, 'readme-'));
    for (const name of ['bin', 'dist', 'drizzle', 'node_modules', 'package.json'])
      symlinkSync(join(ROOT, name), join(cwd, name));
    const run = await runScript(blocks.join('\n'), cwd, await freePort());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('{"status":"ready"}');
    expect(run.stdout).toMatch(/"sessionReference":"ses_[^"]+","serverNonce"/);
  });

  it('docs/rp-integration.md five-minute path: isValid true for a registration, an assertion and a Play token', async () => {
    const blocks = shellBlocks(
      readFileSync(join(ROOT, 'docs', 'rp-integration.md'), 'utf8'),
      '## Five minutes: from `npm ci` to `isValid: true`',
    );
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    const cwd = mkdtempSync(join(scratch, 'rp-'));
    for (const name of ['bin', 'dist', 'drizzle', 'node_modules', 'package.json'])
      symlinkSync(join(ROOT, name), join(cwd, name));
    const run = await runScript(blocks.join('\n'), cwd, await freePort());
    expect(run.code, run.stderr).toBe(0);
    const valid = run.stdout.split('\n').filter((l) => l.startsWith('{"isValid":true'));
    expect(valid, run.stdout).toHaveLength(3);
    expect(valid[0]).toContain('"assertionCounter":0');
    expect(valid[1]).toContain('"assertionCounter":1');
    expect(valid[2]).toContain('googleTokenDetails');
  });

  it('README.md verify-file walk-through: the shipped token, rejected as of now, valid with --at', async () => {
    const commands = consoleCommands(
      readFileSync(join(ROOT, 'README.md'), 'utf8'),
      '## Why was a token rejected? (`attest verify-file`)',
    );
    expect(commands).toHaveLength(2);
    const run = async (command: string) =>
      runScript(command.replace(/^attest /, 'node bin/attest.js '), scratch, 0);
    const now = await run(commands[0]!);
    expect(now.code).toBe(1);
    expect(now.stdout).toContain('REJECTED: apple_chain_invalid');
    expect(now.stdout).toContain('--at 2021-01-24T00:13:35Z');
    const then = await run(commands[1]!);
    expect(then.code, then.stdout + then.stderr).toBe(0);
    expect(then.stdout).toContain('VALID (apple)');
  });
});
