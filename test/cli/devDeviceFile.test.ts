/** The simulated device file is rewritten without following a symlink planted beside it. */
import { randomBytes } from 'node:crypto';
import {
  lstatSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { writePrivateFile } from '../../src/writePrivateFile.js';
import { runCli } from '../support/cli.js';
import { it } from '../support/fixtures.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });
let dir: string;
it.beforeAll(async ({ cliDataDir, tempDir }) => {
  void cliDataDir;
  dir = tempDir;
  expect((await runCli('dev', 'init')).code).toBe(0);
}, 120_000);

const nonce = () => randomBytes(32).toString('base64');

it('dev mint --device: a symlink planted at the old temporary name is not followed', async () => {
  const device = join(dir, 'device.json');
  const first = await runCli(
    'dev',
    'mint',
    'apple',
    '--app-id',
    'ABCDE12345.com.example.rp',
    '--device',
    device,
    '--nonce',
    nonce(),
  );
  expect(first.code, first.stderr).toBe(0);
  const victim = join(dir, 'victim');
  writeFileSync(victim, 'untouched\n');
  // the name the CLI used to write through (this process runs the CLI, so its pid)
  symlinkSync(victim, `${device}.tmp-${process.pid}`);
  const second = await runCli('dev', 'mint', 'apple', '--device', device, '--nonce', nonce());
  expect(second.code, second.stderr).toBe(0);
  expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
  const written = JSON.parse(readFileSync(device, 'utf8')) as {
    counter: number;
    privateKey: string;
  };
  expect(written.counter).toBe(1);
  expect(statSync(device).mode & 0o777).toBe(0o600);
  // nothing else is left beside it
  expect(
    readdirSync(dir)
      .filter((n) => n.includes('device.json'))
      .sort(),
  ).toEqual(['device.json', `device.json.tmp-${process.pid}`]);
});

it('writePrivateFile replaces a symlink at the path itself, not its target; 0600', () => {
  const victim = join(dir, 'victim2');
  writeFileSync(victim, 'untouched\n');
  const path = join(dir, 'secret');
  symlinkSync(victim, path);
  writePrivateFile(path, 'secret\n');
  expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
  expect(lstatSync(path).isFile()).toBe(true);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  expect(readFileSync(path, 'utf8')).toBe('secret\n');
});
