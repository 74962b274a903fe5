/**
 * `attest apple credentials add|list|remove` (sealed, audited, never printed) and
 * `attest apple receipts show`, in process on an embedded database.
 */
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { describe, expect } from 'vitest';
import { createReceiptVerifier } from '../../src/core/apple/verifyReceipt.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf } from '../../src/db/database.js';
import { runCli } from '../support/cli.js';
import { after, loadReceiptVectors } from '../support/receiptVectors.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { it } from '../support/fixtures.js';

let dir: string;
const pem = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) =>
  k.export({ type: 'pkcs8', format: 'pem' }).toString();
const withDb = async <T>(work: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>) => {
  const handle = await openDatabase({ dataDir: process.env.ATTEST_DATA_DIR!, role: 'cli' });
  try {
    return await work(handle);
  } finally {
    await handle.close();
  }
};

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });
it.beforeAll(async ({ cliDataDir, tempDir }) => {
  void cliDataDir;
  dir = tempDir;
});

describe('attest apple credentials', () => {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const keyText = pem(key);

  it('add seals the key, list shows its fingerprint only, remove asks and is audited', async () => {
    const file = join(dir, 'AuthKey_KEY1234567.p8');
    writeFileSync(file, keyText);
    const add = await runCli(
      'apple',
      'credentials',
      'add',
      'ABCDE12345',
      '--key-id',
      'KEY1234567',
      '--private-key-file',
      file,
      '--json',
    );
    expect(add.code, add.stderr).toBe(0);
    const added = JSON.parse(add.stdout);
    expect(added).toEqual({
      teamId: 'ABCDE12345',
      keyId: 'KEY1234567',
      fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/),
      result: 'added',
    });
    // the log line is the audit event: fingerprint, never the key
    expect(add.stderr).toContain('apple.credentials.add');
    expect(add.stderr).not.toContain(keyText.split('\n')[1]!);
    // sealed in the database: the PKCS#8 bytes are nowhere in the row
    const der = key.export({ type: 'pkcs8', format: 'der' });
    const stored = await withDb(async (h) =>
      rowsOf<{ private_key: Uint8Array; master_key_id: string }>(
        await h.db.execute(sql`select private_key, master_key_id from apple_credentials`),
      ),
    );
    expect(stored[0]!.master_key_id).toBeTruthy();
    expect(Buffer.from(stored[0]!.private_key).includes(der.subarray(-32))).toBe(false);

    const list = JSON.parse((await runCli('apple', 'credentials', 'list', '--json')).stdout);
    expect(list).toEqual([
      {
        teamId: 'ABCDE12345',
        keyId: 'KEY1234567',
        fingerprint: added.fingerprint,
        createdAt: expect.any(String),
        rejectedAt: null,
      },
    ]);
    const again = await runCli(
      'apple',
      'credentials',
      'add',
      'ABCDE12345',
      '--key-id',
      'KEY7654321',
      '--private-key-file',
      file,
      '--json',
    );
    expect(JSON.parse(again.stdout).result).toBe('replaced');
    // the text says what was done, and that Apple was not asked
    const text = await runCli(
      'apple',
      'credentials',
      'add',
      'ABCDE12345',
      '--key-id',
      'KEY7654321',
      '--private-key-file',
      file,
    );
    expect(text.stdout).toMatch(
      /^replaced DeviceCheck key KEY7654321 for team ABCDE12345 .*stored, sealed; Apple has not been asked yet/,
    );
    expect(text.stdout).not.toMatch(/\bok\b/);
    const table = await runCli('apple', 'credentials', 'list');
    expect(table.stdout).toMatch(/not refused by Apple/);

    const audit = JSON.parse((await runCli('audit', 'list', '--json')).stdout) as {
      action: string;
      target: string;
      after: unknown;
    }[];
    expect(
      audit
        .filter((e) => e.action.startsWith('apple.credentials'))
        .map((e) => [e.action, e.target, e.after]),
    ).toEqual([
      [
        'apple.credentials.add',
        'apple-team:ABCDE12345',
        { keyId: 'KEY1234567', fingerprint: added.fingerprint },
      ],
      [
        'apple.credentials.replace',
        'apple-team:ABCDE12345',
        { keyId: 'KEY7654321', fingerprint: added.fingerprint },
      ],
      [
        'apple.credentials.replace',
        'apple-team:ABCDE12345',
        { keyId: 'KEY7654321', fingerprint: added.fingerprint },
      ],
    ]);

    const remove = await runCli('apple', 'credentials', 'remove', 'ABCDE12345', '--yes');
    expect(remove.code).toBe(0);
    expect((await runCli('apple', 'credentials', 'remove', 'ABCDE12345', '--yes')).code).toBe(1);
    expect(JSON.parse((await runCli('apple', 'credentials', 'list', '--json')).stdout)).toEqual([]);
  });

  it('bad input: exit 2 with one line', async () => {
    const rsa = join(dir, 'rsa.p8');
    writeFileSync(rsa, pem(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey));
    const notKey = join(dir, 'text.p8');
    writeFileSync(notKey, 'hello');
    for (const [args, message] of [
      [['abc', '--key-id', 'KEY1234567', '--private-key-file', rsa], /not a team ID/],
      [['ABCDE12345', '--private-key-file', rsa], /--key-id/],
      [['ABCDE12345', '--key-id', 'k', '--private-key-file', rsa], /not a key ID/],
      [['ABCDE12345', '--key-id', 'KEY1234567'], /--private-key-file/],
      [['ABCDE12345', '--key-id', 'KEY1234567', '--private-key-file', rsa], /not an EC P-256 key/],
      [
        ['ABCDE12345', '--key-id', 'KEY1234567', '--private-key-file', notKey],
        /not a PEM private key/,
      ],
      [
        ['ABCDE12345', '--key-id', 'KEY1234567', '--private-key-file', join(dir, 'none')],
        /cannot read/,
      ],
    ] as const) {
      const run = await runCli('apple', 'credentials', 'add', ...args);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
    }
  });
});

describe('attest apple receipts show', () => {
  it("prints a key's receipt facts; an unknown key is exit 1, a bad id exit 2", async () => {
    const v = loadReceiptVectors().find((x) => x.name === 'veehaitch-ios-14.2')!;
    const verdict = await createReceiptVerifier().verify(
      v.receipt,
      { type: 'ATTEST', appId: v.appId, attestedCertificate: v.leaf },
      after(v.check.fields.creationTime.parsed, 5),
    );
    const f = verdict.facts!;
    await withDb((h) =>
      createAppleKeyRepository(h.db).register({
        keyId: v.keyId,
        publicKey: Buffer.alloc(91),
        appId: v.appId,
        environment: 'Development',
        counter: 0,
        receipt: {
          bytes: v.receipt,
          problem: null,
          type: f.type,
          creationTime: f.creationTime,
          notBefore: f.notBefore,
          expirationTime: f.expirationTime,
          riskMetric: f.riskMetric,
        },
      }),
    );
    const id = v.keyId.toString('base64');
    const json = await runCli('apple', 'receipts', 'show', id, '--json');
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      keyId: id,
      appId: v.appId,
      environment: 'Development',
      receipt: {
        valid: true,
        type: 'ATTEST',
        creationTime: f.creationTime.toISOString(),
        riskMetric: null,
        environment: 'sandbox',
        problem: null,
      },
      refresh: {
        refreshable: true,
        lastOutcome: null,
        nextAttemptAt: f.creationTime.toISOString(),
      },
    });
    const text = await runCli('apple', 'receipts', 'show', id);
    expect(text.stdout).toMatch(/receipt: valid, ATTEST, created 2020-11-21T22:13:02\.796Z/);
    expect(text.stdout).toMatch(/risk metric: not known yet/);
    expect(
      (await runCli('apple', 'receipts', 'show', Buffer.alloc(32, 1).toString('base64'))).code,
    ).toBe(1);
    expect((await runCli('apple', 'receipts', 'show', 'nope')).code).toBe(2);
  });
});
