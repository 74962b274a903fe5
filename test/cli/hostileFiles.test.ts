/**
 * Files the CLI is given may be hostile: a device that never ends, a FIFO nobody writes, a sparse
 * file of gigabytes. Each is refused in one line (exit 2) before anything is read from it.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputFileError, readInputFile, readInputFileSync } from '../../src/inputFile.js';
import { oneLine, runCli } from '../support/cli.js';

let dir: string;
let fifo: string;
let huge: string;
let token: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'attest-hostile-files-'));
  fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  token = join(dir, 'token.b64');
  writeFileSync(token, `${b64(200)}\n`);
  huge = join(dir, 'huge');
  writeFileSync(huge, '');
  truncateSync(huge, 2 * 1024 * 1024 * 1024); // sparse: 2 GiB that reading would allocate
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const b64 = (n: number) => randomBytes(n).toString('base64');

describe('readInputFile', () => {
  const options = { maxBytes: 1000, what: '--thing' };

  it('reads a regular file within the limit', () => {
    const path = join(dir, 'ok');
    writeFileSync(path, 'hello');
    expect(readInputFileSync(path, options).toString()).toBe('hello');
  });

  it.each([
    ['a FIFO', () => fifo, /--thing: .*fifo is a FIFO \(named pipe\), not a regular file/],
    [
      'a character device',
      () => '/dev/zero',
      /--thing: \/dev\/zero is a character device, not a regular file/,
    ],
    ['a directory', () => dir, /is a directory, not a regular file/],
    [
      'a file over the limit',
      () => huge,
      /--thing: the file is 2147483648 bytes, more than the 1000 bytes/,
    ],
    ['a missing file', () => join(dir, 'nope'), /--thing: cannot read .*nope \(ENOENT\)/],
  ])('refuses %s at once, in one line', async (_name, path, message) => {
    expect(() => readInputFileSync(path(), options)).toThrow(InputFileError);
    expect(() => readInputFileSync(path(), options)).toThrow(message);
    await expect(readInputFile(path(), options)).rejects.toThrow(message);
  });

  it('stdin only when asked: "-" is otherwise a file name', async () => {
    await expect(readInputFile('-', options)).rejects.toThrow(/cannot read - \(ENOENT\)/);
  });
});

describe('the CLI refuses hostile files with one line and exit 2', () => {
  const cases: [string, (file: string) => string[]][] = [
    [
      'token wrap apple --attestation',
      (f) => [
        'token',
        'wrap',
        'apple',
        '--key-id',
        b64(32),
        '--nonce',
        b64(32),
        '--attestation',
        f,
      ],
    ],
    [
      'token wrap apple --assertion',
      (f) => ['token', 'wrap', 'apple', '--key-id', b64(32), '--nonce', b64(32), '--assertion', f],
    ],
    [
      'token wrap gms --integrity-token',
      (f) => [
        'token',
        'wrap',
        'gms',
        '--package',
        'com.example.app',
        '--nonce',
        b64(32),
        '--integrity-token',
        f,
      ],
    ],
    ['verify-file FILE', (f) => ['verify-file', f]],
    [
      'verify-file --decryption-key-file',
      (f) => [
        'verify-file',
        token,
        '--package',
        'com.example.app',
        '--decryption-key-file',
        f,
        '--verification-key',
        'AAAA',
      ],
    ],
    [
      'verify-file --apple-key',
      (f) => ['verify-file', token, '--app-id', 'ABCDE12345.com.x', '--apple-key', f],
    ],
    ['logs FILE', (f) => ['logs', f]],
    [
      'db rotate-master-key --new-key-file',
      (f) => ['db', 'rotate-master-key', '--new-key-file', f],
    ],
  ];

  for (const [name, args] of cases)
    for (const [kind, file] of [
      ['a FIFO nobody writes', () => fifo],
      ['/dev/zero', () => '/dev/zero'],
    ] as const)
      it.skipIf(!existsSync('/dev/zero'))(`${name} ${kind}`, async () => {
        const run = await runCli(...args(file()));
        expect(run.code, run.stderr).toBe(2);
        expect(oneLine(run)).toMatch(/not a regular file/);
      });

  it('a file over the limit is refused from its size, before it is read', async () => {
    const run = await runCli(
      'token',
      'wrap',
      'apple',
      '--key-id',
      b64(32),
      '--nonce',
      b64(32),
      '--attestation',
      huge,
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/--attestation: the file is 2147483648 bytes/);
  });
});

describe('one reader of CLI input files', () => {
  it('no CLI command reads a file by other means', () => {
    const root = join(__dirname, '../../src/cli');
    const offenders: string[] = [];
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const path = join(d, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (/\.tsx?$/.test(name)) {
          const text = readFileSync(path, 'utf8');
          // main.ts reads its own package.json; the log reader streams files it checked first
          if (
            /\breadFileSync\(|\breadSync\(|createReadStream\(/.test(text) &&
            !/main\.ts$/.test(path)
          )
            offenders.push(path);
        }
      }
    };
    walk(root);
    expect(
      offenders,
      'read CLI input files with readCliFile / readCliFileSync (src/cli/inputFiles.ts)',
    ).toEqual([]);
  });
});
