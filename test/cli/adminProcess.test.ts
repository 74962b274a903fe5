/**
 * Issue 11's administrative behaviours through the built binary: usage errors and helps as an
 * operator meets them, completion scripts run by bash, and destructive commands on a real
 * pseudo-terminal (util-linux `script`) against a running `attest serve`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import {
  baseEnv,
  BIN,
  buildOnce,
  oneLine,
  runBin,
  runProcess,
  serveBin,
  stopBin,
  type Served,
} from '../support/binary.js';
import { it } from '../support/fixtures.js';

const HAS_SCRIPT = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0;

let env: NodeJS.ProcessEnv;

const attest = (args: string[], extraEnv: NodeJS.ProcessEnv = {}) =>
  runBin(args, { ...env, ...extraEnv });

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs attest on a pseudo-terminal and answers its question once it is asked.
 * @returns everything the terminal showed, and the exit code
 */
function onTerminal(
  args: string[],
  answer: string,
): Promise<{ code: number | null; screen: string }> {
  return new Promise((resolve) => {
    const command = [process.execPath, BIN, ...args].map(shellQuote).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let screen = '';
    let answered = false;
    child.stdout.on('data', (d) => {
      screen += d;
      if (!answered && screen.includes('Proceed? [y/N]')) {
        answered = true;
        child.stdin.write(`${answer}\n`);
      }
    });
    child.stderr.on('data', (d) => (screen += d));
    child.on('close', (code) => {
      child.stdin.destroy();
      resolve({ code, screen });
    });
  });
}

const playKeys = () => ({
  decryption: randomBytes(32).toString('base64'),
  verification: generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    .publicKey.export({ format: 'der', type: 'spki' })
    .toString('base64'),
});

let dir: string;
it.beforeAll(async ({ dataDir, tempDir }) => {
  buildOnce();
  dir = tempDir;
  env = baseEnv({ ...dataDir.env, ATTEST_ACTOR: 'ops-test' });
}, 120_000);

// each process starts in seconds on a loaded machine, and some tests run several
describe('sharp edges, before any database is opened', { timeout: 120_000 }, () => {
  it('an unknown option is reported as such, not as a missing required one', async () => {
    const result = await attest(['keys', 'create', '--nme', 'x']);
    expect(result.code).toBe(2);
    expect(oneLine(result)).toMatch(/^attest: unknown option '--nme' \(Did you mean --name\?\)/);
    const missing = await attest(['keys', 'create']);
    expect(missing.code).toBe(2);
    expect(oneLine(missing)).toMatch(/^attest: required option '--name <name>' not specified/);
  });

  it('a duration needs its unit', async () => {
    const result = await attest(['keys', 'create', '--name', 'x', '--expires-in', '90']);
    expect(result.code).toBe(2);
    expect(oneLine(result)).toBe(
      'attest: --expires-in 90 has no unit: write 90s, 90m, 90h, 90d or 90w (run "attest keys create --help" for usage)',
    );
  });

  it('a bad environment variable says what is wanted (and never repeats a database URL)', async () => {
    const port = await attest(['keys', 'list'], { PORT: 'http' });
    expect(port.code).toBe(2);
    expect(oneLine(port)).toBe(
      'attest: environment variable PORT must be a port number from 0 to 65535, got "http"; fix it and run again',
    );
    const url = await attest(['keys', 'list'], { DATABASE_URL: 'mysql://attest:s3cret@db/attest' });
    expect(url.code).toBe(2);
    expect(oneLine(url)).toBe(
      'attest: environment variable DATABASE_URL must be a postgres:// or postgresql:// URL; fix it and run again',
    );
  });

  it('a PEM key and swapped keys are named as such', async () => {
    const keys = playKeys();
    const pem = `-----BEGIN PUBLIC KEY-----\n${keys.verification}\n-----END PUBLIC KEY-----\n`;
    const pemFile = join(dir, 'ver.pem');
    writeFileSync(pemFile, pem);
    const add = (...args: string[]) =>
      attest(['allowlist', 'add', 'android', 'com.example.app', ...args]);
    for (const result of [
      await add('--decryption-key', keys.decryption, '--verification-key', pem),
      await add('--decryption-key', keys.decryption, '--verification-key-file', pemFile),
    ]) {
      expect(result.code).toBe(2);
      expect(oneLine(result)).toMatch(
        /^attest: the verification key is a PEM block; give the base64 the Play Console shows/,
      );
    }
    const swapped = await add(
      '--decryption-key',
      keys.verification,
      '--verification-key',
      keys.decryption,
    );
    expect(swapped.code).toBe(2);
    expect(oneLine(swapped)).toMatch(/^attest: the decryption and verification keys are swapped/);
    const twoPublic = await add(
      '--decryption-key',
      keys.verification,
      '--verification-key',
      keys.verification,
    );
    expect(oneLine(twoPublic)).toMatch(
      /^attest: the decryption key is a public key, the verification key by its look/,
    );
  });

  it('keys revoke never prints a secret it was given', async () => {
    const secret = randomBytes(32).toString('base64url').slice(0, 43);
    const whole = await attest(['keys', 'revoke', `attest_0h3k5x9q2m7c1b4n${secret}`, '--yes']);
    expect(whole.code).toBe(2);
    expect(oneLine(whole)).toMatch(
      /^attest: that is a whole API key, not its id; its id is 0h3k5x9q2m7c1b4n/,
    );
    expect(whole.stderr + whole.stdout).not.toContain(secret);
    const other = await attest(['keys', 'revoke', `my-${secret}`, '--yes']);
    expect(other.code).toBe(2);
    expect(other.stderr + other.stdout).not.toContain(secret);
  });

  it.each(
    [['db'], ['keys'], ['allowlist'], ['allowlist', 'add'], ['allowlist', 'remove'], ['audit']].map(
      (a) => [a.join(' '), a] as const,
    ),
  )('attest %s --help has examples', async (_, args) => {
    const result = await attest([...args, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\nExamples:\n {2}\$ attest /);
  });
});

describe('attest completion', { timeout: 120_000 }, () => {
  let script: string;
  beforeAll(async () => {
    const result = await attest(['completion', 'bash']);
    expect(result.code).toBe(0);
    script = join(dir, 'attest.bash');
    writeFileSync(script, result.stdout);
  }, 120_000);

  /** what bash offers after `words` (the last one is being typed) */
  async function complete(...words: string[]): Promise<string[]> {
    const line = ['attest', ...words];
    const program = `source ${shellQuote(script)}; COMP_WORDS=(${line.map(shellQuote).join(' ')}); COMP_CWORD=${line.length - 1}; _attest_complete; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const result = await runProcess('bash', ['--norc', '-c', program], env);
    expect(result.stderr).toBe('');
    return result.stdout.split('\n').filter(Boolean).sort();
  }

  it('bash completes commands, subcommands, options and choices from the command tree', async () => {
    expect(await complete('')).toEqual(
      expect.arrayContaining([
        'allowlist',
        'audit',
        'completion',
        'db',
        'keys',
        'serve',
        '--actor',
      ]),
    );
    expect(await complete('k')).toEqual(['keys']);
    expect(await complete('keys', '')).toEqual([
      '--actor',
      '--help',
      '--log',
      'create',
      'list',
      'revoke',
      'update',
    ]);
    expect(await complete('keys', 'revoke', 'abc', '--')).toEqual([
      '--actor',
      '--help',
      '--json',
      '--log',
      '--yes',
    ]);
    expect(await complete('allowlist', 'add', 'apple', 'ABCDE12345.com.x', '--env', '')).toEqual([
      'any',
      'development',
      'production',
    ]);
    expect(
      await complete('--actor', 'bob', 'allowlist', 'remove', 'android', 'com.x', '--k'),
    ).toEqual(['--key-id']);
    expect(await complete('completion', '')).toEqual([
      '--actor',
      '--help',
      '--log',
      'bash',
      'fish',
      'zsh',
    ]);
  });

  it('bash completes active key ids and allowlisted IDs from the database', async () => {
    // `attest` as the shell finds it: the scripts call the command that was typed
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      join(bin, 'attest'),
      `#!/bin/sh\nexec ${shellQuote(process.execPath)} ${shellQuote(BIN)} "$@"\n`,
      {
        mode: 0o755,
      },
    );
    const withBin = { ...env, PATH: `${bin}:${env.PATH}` };
    const created = JSON.parse(
      (await attest(['keys', 'create', '--name', 'completion', '--json'])).stdout,
    ) as { id: string };
    const revoked = JSON.parse(
      (await attest(['keys', 'create', '--name', 'gone', '--json'])).stdout,
    ) as { id: string };
    expect((await attest(['keys', 'revoke', revoked.id, '--yes'])).code).toBe(0);
    expect((await attest(['allowlist', 'add', 'apple', 'ABCDE12345.com.example.done'])).code).toBe(
      0,
    );
    expect(
      (await attest(['allowlist', 'add', 'android', 'com.example.done', '--without-keys'])).code,
    ).toBe(0);
    const offered = async (...words: string[]) => {
      const line = ['attest', ...words];
      const program = `source ${shellQuote(script)}; COMP_WORDS=(${line.map(shellQuote).join(' ')}); COMP_CWORD=${line.length - 1}; _attest_complete; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const result = await runProcess('bash', ['--norc', '-c', program], withBin);
      return result.stdout.split('\n').filter(Boolean).sort();
    };
    const keys = await offered('keys', 'revoke', '');
    expect(keys).toContain(created.id);
    expect(keys).not.toContain(revoked.id);
    expect(await offered('allowlist', 'remove', 'apple', 'ABCDE')).toEqual([
      'ABCDE12345.com.example.done',
    ]);
    expect(await offered('allowlist', 'remove', 'android', '')).toContain('com.example.done');
    // the helper stays out of help and out of the completed commands
    expect((await attest(['--help'])).stdout).not.toContain('__complete');
    expect(await complete('__')).toEqual([]);
  }, 300_000);

  it('zsh and fish get scripts of their own; another shell is a usage error', async () => {
    const zsh = await attest(['completion', 'zsh']);
    expect(zsh.code).toBe(0);
    expect(zsh.stdout).toMatch(/^#compdef attest\n/);
    expect(zsh.stdout).toContain('complete -o default -F _attest_complete attest');
    const fish = await attest(['completion', 'fish']);
    expect(fish.code).toBe(0);
    expect(fish.stdout).toContain(
      `complete -c attest -n 'test (__attest_path) = "attest keys"' -a 'revoke'`,
    );
    expect(fish.stdout).toContain(
      `complete -c attest -n 'test (__attest_path) = "attest allowlist add apple"' -l env -x -a 'production development any'`,
    );
    const tcsh = await attest(['completion', 'tcsh']);
    expect(tcsh.code).toBe(2);
    expect(oneLine(tcsh)).toMatch(/^attest: .*tcsh.*bash, zsh, fish/);
  });
});

describe('destructive commands against a running serve', { timeout: 120_000 }, () => {
  let server: Served | undefined;
  beforeAll(async () => {
    server = await serveBin(env);
  }, 120_000);
  afterAll(async () => {
    if (server) await stopBin(server);
  });

  const state = async (id: string) =>
    (
      JSON.parse((await attest(['keys', 'list', '--json'])).stdout) as {
        id: string;
        state: string;
      }[]
    ).find((k) => k.id === id)?.state;

  it('keys revoke: without a terminal it needs --yes; on a terminal it shows the key and asks', async () => {
    const created = JSON.parse(
      (await attest(['keys', 'create', '--name', 'payments', '--json'])).stdout,
    ) as { id: string };
    const piped = await attest(['keys', 'revoke', created.id]);
    expect(piped.code).toBe(2);
    expect(oneLine(piped)).toBe(
      'attest: keys revoke changes what running instances accept and asks first; without a terminal to ask on, add --yes (run "attest keys revoke --help" for usage)',
    );
    expect(await state(created.id)).toBe('active');

    if (!HAS_SCRIPT) return;
    const declined = await onTerminal(['keys', 'revoke', created.id], 'n');
    expect(declined.code).toBe(1);
    expect(declined.screen).toContain(`This revokes API key ${created.id} (payments)`);
    expect(declined.screen).toContain('attest: nothing changed (not confirmed)');
    expect(await state(created.id)).toBe('active');

    const confirmed = await onTerminal(['keys', 'revoke', created.id], 'y');
    expect(confirmed.code).toBe(0);
    expect(confirmed.screen).toContain(`revoked ${created.id} (payments)`);
    expect(await state(created.id)).toBe('revoked');
  });

  it('revoking what does not exist is exit 1 with one line', async () => {
    const result = await attest(['keys', 'revoke', 'zzzzzzzzzzzzzzzz', '--yes']);
    expect(result.code).toBe(1);
    expect(oneLine(result)).toBe(
      'attest: no API key with id "zzzzzzzzzzzzzzzz"; see "attest keys list"',
    );
  });

  it.skipIf(!HAS_SCRIPT)(
    'retiring a package’s last key pair says that no token can pass after it',
    async () => {
      const keys = playKeys();
      const added = await attest([
        'allowlist',
        'add',
        'android',
        'com.example.last',
        '--decryption-key',
        keys.decryption,
        '--verification-key',
        keys.verification,
        '--json',
      ]);
      const { keyId } = JSON.parse(added.stdout) as { keyId: string };
      const asked = await onTerminal(
        ['allowlist', 'remove', 'android', 'com.example.last', '--key-id', keyId],
        'yes',
      );
      expect(asked.code).toBe(0);
      expect(asked.screen).toContain(
        `This retires key pair ${keyId}, the last one of com.example.last: after it no token of com.example.last can pass`,
      );
      const trail = JSON.parse(
        (await attest(['audit', 'list', '--action', 'allowlist', '--json'])).stdout,
      ) as { actor: string; action: string; target: string; after: { keyPairs: string[] } }[];
      const mine = trail.filter((e) => e.target === 'android:com.example.last');
      expect(mine.map((e) => [e.actor, e.action, e.after.keyPairs])).toEqual([
        ['ops-test', 'allowlist.add', [keyId]],
        ['ops-test', 'allowlist.key.remove', []],
      ]);
    },
  );
});
