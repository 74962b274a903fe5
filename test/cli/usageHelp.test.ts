/**
 * docs/cli.md and the code agree: every usage error names the --help of the command it came from
 * (commander's own errors and the commands' checks alike); a bad setting names the setting instead.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { oneLine, runCli } from '../support/cli.js';

describe('usage errors name their --help', () => {
  afterEach(() => {
    delete process.env.ATTEST_SESSION_TTL_SECONDS;
  });

  it.each([
    [['keys', 'create'], 'attest keys create', "required option '--name <name>' not specified"],
    [['keys', 'create', '--name', 'x', '--expires-in', '90'], 'attest keys create', 'no unit'],
    [['keys', 'revoke', 'nope'], 'attest keys revoke', 'an API key id is 16 characters'],
    [['allowlist', 'add', 'apple', 'nope'], 'attest allowlist add apple', 'is not an app ID'],
    [['serve', '--port', 'http'], 'attest serve', 'a port is 0 to 65535'],
    [['dev', 'up', '--port', '-1'], 'attest dev up', 'a port is 0 to 65535'],
    [['keys', 'list', '--nope'], 'attest keys list', "unknown option '--nope'"],
  ])('attest %j', async (args, path, what) => {
    const run = await runCli(...args);
    expect(run.code).toBe(2);
    const line = oneLine(run);
    expect(line).toContain(what);
    expect(line.endsWith(`(run "${path} --help" for usage)`)).toBe(true);
  });

  it('a bad setting names the setting, not --help', async () => {
    process.env.ATTEST_SESSION_TTL_SECONDS = 'forever';
    const run = await runCli('keys', 'list');
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/ATTEST_SESSION_TTL_SECONDS .*; fix it and run again$/);
  });
});
