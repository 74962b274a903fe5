/**
 * attest audit verify, head and export through the CLI, with the running server owning the
 * database (the commands go through its admin socket); export --follow and a closed pipe with the
 * built binary in real processes. The chain itself, tampering included: test/db/auditChain.test.ts.
 */
import { spawn } from 'node:child_process';
import { afterAll, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { baseEnv, BIN, buildOnce, stopBin, watchBin } from '../support/binary.js';
import { oneLine, runCli } from '../support/cli.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

interface CloudEventJson {
  specversion: string;
  type: string;
  source: string;
  id: string;
  time: string;
  subject: string;
  datacontenttype: string;
  data: { seq: number; action: string; target: string; prevHash: string; hash: string };
}

const lines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CloudEventJson);

describe('attest audit verify, head and export', { timeout: 120_000 }, () => {
  let dataDir: string;
  let server: RunningServer;
  const env = () => baseEnv({ ATTEST_DATA_DIR: dataDir });

  it.beforeAll(async ({ cliDataDir }) => {
    buildOnce();
    dataDir = cliDataDir.path;
    const { logger } = captureLogger();
    server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
      migrate: false,
    });
    for (const name of ['one', 'two', 'three'])
      expect((await runCli('--actor', 'ops', 'keys', 'create', '--name', name)).code).toBe(0);
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it('head prints SEQ:HASH; verify walks the chain to it and checks an anchor', async () => {
    const head = await runCli('audit', 'head');
    expect(head.code).toBe(0);
    const [seq, hash] = head.stdout.trim().split(':');
    expect(Number(seq)).toBeGreaterThanOrEqual(3);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    const json = JSON.parse((await runCli('audit', 'head', '--json')).stdout) as unknown;
    expect(json).toEqual({ seq: Number(seq), hash });

    const verify = await runCli('audit', 'verify');
    expect(verify).toMatchObject({
      code: 0,
      stdout: `audit chain intact: ${seq} events, head ${seq}:${hash}\n`,
    });
    const anchored = await runCli('audit', 'verify', '--anchor', head.stdout.trim());
    expect(anchored.code).toBe(0);
    expect(anchored.stdout).toContain(`anchor ${seq} matches`);
    expect(JSON.parse((await runCli('audit', 'verify', '--json')).stdout)).toEqual({
      events: Number(seq),
      head: { seq: Number(seq), hash },
      broken: null,
    });
  });

  it('verify against an anchor the chain no longer has: exit 1 and one line naming the event', async () => {
    const wrong = await runCli('audit', 'verify', '--anchor', `1:${'ab'.repeat(32)}`);
    expect(wrong.code).toBe(1);
    expect(oneLine(wrong)).toMatch(
      /^attest: audit chain broken at event 1: its hash [0-9a-f]{16}… is not the anchor's abababababababab…/,
    );
    const gone = await runCli('audit', 'verify', '--anchor', `999999:${'ab'.repeat(32)}`);
    expect(gone.code).toBe(1);
    expect(oneLine(gone)).toMatch(/broken at event 999999: the anchored event is gone/);
    const json = await runCli('audit', 'verify', '--json', '--anchor', `1:${'ab'.repeat(32)}`);
    expect(json.code).toBe(1);
    expect((JSON.parse(json.stdout) as { broken: { seq: number } }).broken.seq).toBe(1);
  });

  it('export writes one CloudEvents envelope a line, in chain order, from --after or --since', async () => {
    const all = lines((await runCli('audit', 'export')).stdout);
    expect(all.length).toBeGreaterThanOrEqual(3);
    all.forEach((e, i) => {
      expect(e).toMatchObject({
        specversion: '1.0',
        type: `dev.attest.audit.${e.data.action}`,
        source: 'attest/audit',
        id: String(e.data.seq),
        subject: e.data.target,
        datacontenttype: 'application/json',
      });
      expect(e.data.seq).toBe(i + 1);
      if (i > 0) expect(e.data.prevHash).toBe(all[i - 1]!.data.hash);
    });
    const after = lines((await runCli('audit', 'export', '--after', '2')).stdout);
    expect(after.map((e) => e.data.seq)).toEqual(all.slice(2).map((e) => e.data.seq));
    expect(lines((await runCli('audit', 'export', '--since', '1h')).stdout)).toHaveLength(
      all.length,
    );
  });

  it('bad flags: one line, exit 2', async () => {
    for (const args of [
      ['verify', '--anchor', 'nonsense'],
      ['verify', '--anchor', '3:abc'],
      ['export', '--after', '-1'],
      ['export', '--after', 'x'],
      ['export', '--since', 'yesterday'],
    ]) {
      const run = await runCli('audit', ...args);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(/^attest: --(anchor|after|since) /);
    }
  });

  it('export --follow writes new events as they are recorded', async () => {
    const last = Number((await runCli('audit', 'head')).stdout.split(':')[0]);
    const follow = watchBin(['audit', 'export', '--follow', '--after', String(last)], env());
    try {
      expect((await runCli('--actor', 'ops', 'keys', 'create', '--name', 'followed')).code).toBe(0);
      const line = (await follow.logLine(
        (l) => (l as unknown as CloudEventJson).data?.seq === last + 1,
      )) as unknown as CloudEventJson;
      expect(line.data).toMatchObject({ action: 'keys.create', seq: last + 1 });
    } finally {
      await stopBin(follow);
    }
  });

  it('export --follow into a pipe its reader closed ends cleanly at the next event (exit 0, nothing on stderr)', async () => {
    // pipefail: the pipeline's code is attest's, not head's
    const child = spawn(
      'bash',
      ['-c', `set -o pipefail; "${process.execPath}" "${BIN}" audit export --follow | head -n 1`],
      { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    const firstLine = new Promise<void>((resolve) =>
      child.stdout.on('data', (d) => {
        stdout += d;
        if (stdout.includes('\n')) resolve();
      }),
    );
    child.stderr.on('data', (d) => (stderr += d));
    const code = new Promise<number | null>((resolve) => child.on('close', resolve));
    await firstLine;
    // head has gone; the next event is written into the closed pipe
    expect((await runCli('--actor', 'ops', 'keys', 'create', '--name', 'unread')).code).toBe(0);
    expect(await code).toBe(0);
    expect(stderr).toBe('');
    expect(lines(stdout)).toHaveLength(1);
  });
});
