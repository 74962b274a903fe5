/**
 * The built binary (bin/attest.js) in real processes: real exit codes, real stderr, and the
 * moments lines appear, for tests of start-up, shutdown and failure paths.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'attest.js');

function newest(dir: string): number {
  let max = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    max = Math.max(max, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return max;
}

/** Builds dist/ unless it is newer than src/. */
export function buildOnce(): void {
  const built = join(ROOT, 'dist', 'cli', 'main.js');
  if (existsSync(built) && statSync(built).mtimeMs >= newest(join(ROOT, 'src'))) return;
  // tsc emits even when a file elsewhere has a type error; what matters here is that it emitted
  spawnSync(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(ROOT, 'tsconfig.build.json'),
    ],
    { stdio: 'ignore' },
  );
  if (!existsSync(built)) throw new Error('the build did not produce dist/cli/main.js');
}

export interface BinResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A minimal environment: nothing from the test runner's own configuration leaks in. */
export function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // tests never reach Google's status list (no network here, and none wanted): the shipped snapshot serves
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: 'warn',
    ATTEST_ANDROID_REVOCATION_URL: 'off',
    ...extra,
  };
}

/** Runs `command` to its end; stdin holds `input` (empty by default), so it is never a terminal. */
export function runProcess(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { cwd?: string; input?: string } = {},
): Promise<BinResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env,
      cwd: options.cwd ?? ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // a command that exits before reading its input closes the pipe: that is not the test's concern
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs the binary to its end. */
export function runBin(
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { cwd?: string; input?: string } = {},
): Promise<BinResult> {
  return runProcess(process.execPath, [BIN, ...args], env, options);
}

/** The one line a failed command prints on stderr (anything else is a failure). */
export function oneLine(run: { stderr: string }): string {
  const lines = run.stderr.split('\n').filter(Boolean);
  if (lines.length !== 1)
    throw new Error(`expected one stderr line, got ${lines.length}: ${run.stderr}`);
  return lines[0]!;
}

export interface Watched {
  child: ChildProcess;
  /** stderr so far */
  stderr(): string;
  /** resolves with the first stderr match of `pattern` and when it came (performance.now()) */
  line(pattern: RegExp): Promise<{ match: RegExpExecArray; at: number }>;
  /** the JSON log lines on stdout so far */
  logs(): readonly Record<string, unknown>[];
  /** resolves with the first JSON log line on stdout that passes `test` (lines already logged count) */
  logLine(test: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** the exit code and when it came */
  exited: Promise<{ code: number | null; at: number }>;
}

/** Starts the binary and watches its stderr line by line, and its stdout as JSON log lines. */
export function watchBin(args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Watched {
  const child = spawn(process.execPath, [BIN, ...args], {
    env,
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  const waiters: {
    pattern: RegExp;
    resolve: (v: { match: RegExpExecArray; at: number }) => void;
  }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      const match = w.pattern.exec(stderr);
      if (match) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve({ match, at: performance.now() });
      }
    }
  };
  child.stderr!.on('data', (d) => {
    stderr += d;
    check();
  });
  const logs: Record<string, unknown>[] = [];
  const logWaiters: {
    test: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  let pending = '';
  child.stdout!.on('data', (d) => {
    pending += d;
    const parts = pending.split('\n');
    pending = parts.pop()!;
    for (const part of parts.filter(Boolean)) {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(part) as Record<string, unknown>;
      } catch {
        continue; // not a log line
      }
      logs.push(line);
      for (const w of logWaiters.filter((w) => w.test(line))) w.resolve(line);
    }
  });
  const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
    child.on('exit', (code) => resolve({ code, at: performance.now() })),
  );
  // 'close' comes after the last output chunk: a line that came at all has been seen by then
  const closed = (what: string) =>
    new Promise<never>((_, reject) =>
      child.once('close', (code) => reject(new Error(`exited ${code} before ${what}: ${stderr}`))),
    );
  return {
    child,
    stderr: () => stderr,
    logs: () => logs,
    line: (pattern) =>
      Promise.race([
        new Promise<{ match: RegExpExecArray; at: number }>((resolve) => {
          waiters.push({ pattern, resolve });
          check();
        }),
        closed(String(pattern)),
      ]),
    logLine: (test) =>
      Promise.race([
        new Promise<Record<string, unknown>>((resolve) => {
          const seen = logs.find(test);
          if (seen) resolve(seen);
          else logWaiters.push({ test, resolve });
        }),
        closed('the log line'),
      ]),
    exited,
  };
}

/** Stops a watched process (SIGTERM) and waits for it. */
export async function stopBin(w: Watched): Promise<void> {
  if (w.child.exitCode === null && w.child.signalCode === null) {
    w.child.kill('SIGTERM');
    await w.exited;
  }
}

export interface Served extends Watched {
  /** the address it listens on */
  url: string;
}

/** Starts `attest serve` on a free port and resolves once it listens; rejects with its stderr if it exits first. */
export async function serveBin(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<Served> {
  const w = watchBin(['serve', '--port', '0', '--host', '127.0.0.1', ...extra], env);
  const { match } = await w.line(/attest listening on (http:\/\/\S+)/);
  return { ...w, url: match[1]! };
}
