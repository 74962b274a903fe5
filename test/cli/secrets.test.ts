/**
 * The master key through the built binary: the embedded default key, one-line refusals of a
 * wrong or missing key (CLI and serve), rotation, and an instance left on the old key.
 */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { decodeBase64 } from '../../src/core/base64.js';
import { masterKeyId } from '../../src/db/secretBox.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import {
  createGoogleTestKeys,
  mintIntegrityToken,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { postgresBackend } from '../support/databases.js';
import { keyFileText, testMasterKey } from '../support/secrets.js';
import { PG_DIR } from '../../src/db/embeddedServer.js';
import {
  baseEnv,
  buildOnce,
  oneLine as theOneLine,
  runBin,
  serveBin,
  stopBin,
  type BinResult,
} from '../support/binary.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
/** each embedded-database process starts PGlite (seconds each on a loaded 2-core machine) */
const SLOW = 300_000;

const attest = (args: string[], env: NodeJS.ProcessEnv) => runBin(args, env);

/** the one stderr line of a failed command, which prints nothing else */
function oneLine(run: BinResult): string {
  expect(run.stdout).toBe('');
  return theOneLine(run);
}

/** `attest serve` until stop() */
async function serve(env: NodeJS.ProcessEnv) {
  const served = await serveBin(env);
  return { ...served, stop: () => stopBin(served) };
}

function gmsToken(nonce: Uint8Array, integrityToken: string): string {
  const gms = new Map<string, unknown>([
    ['packageName', TEST_PACKAGE],
    ['integrityToken', integrityToken],
  ]);
  return b64(
    encodeEnvelope({
      nonce,
      service: 'gms',
      evidence: gms,
      device: { model: 'Pixel 9', os: 'Android 16' },
    }),
  );
}

/** a sessionless verify of a freshly minted token for `keys` */
async function verifyGms(url: string, apiKey: string, keys: GoogleTestKeys): Promise<Response> {
  const nonce = randomBytes(32);
  const integrityToken = await mintIntegrityToken({
    keys,
    nonce,
    now: new Date(Date.now() - 1000),
  });
  return fetch(`${url}/api/v1/attestation/verify`, {
    method: 'POST',
    headers: { 'X-Api-Key': apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      attestationToken: gmsToken(nonce, integrityToken),
      expectedNonce: b64(nonce),
    }),
  });
}

const addAndroid = (keys: GoogleTestKeys, env: NodeJS.ProcessEnv) =>
  attest(
    [
      'allowlist',
      'add',
      'android',
      TEST_PACKAGE,
      '--decryption-key',
      b64(keys.decryptionKey),
      '--verification-key',
      b64(keys.verificationKey),
      '--json',
    ],
    env,
  );

/** every file under `dir`, to search the stored bytes */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

let google: GoogleTestKeys;
let dir: string;
// the folder is the fixtures'; the data dir and the databases are made here, by the commands under
// test: what the first migration does with the master key is what this file checks
it.beforeAll(async ({ tempDir }) => {
  buildOnce();
  google = await createGoogleTestKeys();
  dir = tempDir;
}, 120_000);

describe('the embedded database’s own master key', () => {
  let env: NodeJS.ProcessEnv;
  let data: string;
  const keyFile = () => join(data, 'master.key');
  beforeAll(() => {
    data = join(dir, 'embedded');
    env = baseEnv({ ATTEST_DATA_DIR: data });
  });

  it(
    'is created once (0600, said once on stderr), and the key material never reaches the data files',
    async () => {
      const migrate = await attest(['db', 'migrate'], env);
      expect(migrate.code).toBe(0);
      // said once, between the progress lines of the first migration
      expect(migrate.stderr.split('\n').filter((l) => l.includes('master key'))).toEqual([
        `attest: created a master key in ${keyFile()}: back it up with the data dir (not inside the same backup)`,
      ]);
      expect(statSync(keyFile()).mode & 0o777).toBe(0o600);
      const add = await addAndroid(google, env);
      expect(add.stderr).toBe('');
      expect(add.code).toBe(0);
      const list = await attest(['allowlist', 'list', '--json'], env);
      expect(list.code).toBe(0);
      expect(
        (JSON.parse(list.stdout) as { android: { keyPairs: string[] }[] }).android[0]!.keyPairs,
      ).toEqual([JSON.parse(add.stdout).keyId]);
      const decryption = Buffer.from(google.decryptionKey);
      const files = filesUnder(join(data, PG_DIR));
      expect(files.length).toBeGreaterThan(10);
      for (const file of files) expect(readFileSync(file).indexOf(decryption), file).toBe(-1);
    },
    SLOW,
  );

  it(
    'a wrong key is one line naming both key ids, from the CLI and from serve (exit 2)',
    async () => {
      const currentId = masterKeyId(decodeBase64(readFileSync(keyFile(), 'utf8').trim())!);
      const other = join(dir, 'other.key');
      writeFileSync(other, keyFileText(testMasterKey(0x33)));
      const wrong = { ...env, ATTEST_MASTER_KEY_FILE: other };
      const line = `attest: wrong master key: the database's secrets are sealed with master key ${currentId}, but the key given (${other}) is ${testMasterKey(0x33).id}; give the key ${currentId} (ATTEST_MASTER_KEY_FILE)`;
      for (const args of [
        ['allowlist', 'list'],
        [
          'allowlist',
          'add',
          'android',
          TEST_PACKAGE,
          '--decryption-key',
          b64(randomBytes(32)),
          '--verification-key',
          b64(google.verificationKey),
        ],
      ]) {
        const run = await attest(args, wrong);
        expect(run.code, args.join(' ')).toBe(2);
        expect(oneLine(run)).toBe(line);
      }
      const served = await attest(['serve', '--port', '0', '--host', '127.0.0.1'], wrong);
      expect(served.code).toBe(2);
      expect(oneLine(served)).toBe(line);
      const garbled = { ...env, ATTEST_MASTER_KEY: 'c2hvcnQ=' };
      const bad = await attest(['allowlist', 'list'], garbled);
      expect(bad.code).toBe(2);
      expect(oneLine(bad)).toMatch(
        /^attest: environment variable ATTEST_MASTER_KEY must be 32 bytes in base64/,
      );
    },
    SLOW,
  );

  it(
    'a lost key file is one line, never a new key',
    async () => {
      renameSync(keyFile(), `${keyFile()}.saved`);
      try {
        const run = await attest(['allowlist', 'list'], env);
        expect(run.code).toBe(2);
        expect(oneLine(run)).toMatch(
          new RegExp(
            `^attest: the database's secrets are sealed with master key [0-9a-f]{16}, but ${keyFile()} is missing: restore it from a backup`,
          ),
        );
        expect(existsSync(keyFile())).toBe(false);
      } finally {
        renameSync(`${keyFile()}.saved`, keyFile());
      }
    },
    SLOW,
  );

  it(
    'rotate-master-key replaces the default key; the old one is moved aside and opens nothing',
    async () => {
      const oldText = readFileSync(keyFile(), 'utf8');
      const newKey = testMasterKey(0x44);
      const newFile = join(dir, 'new.key');
      writeFileSync(newFile, keyFileText(newKey), { mode: 0o600 });
      const rotate = await attest(
        ['--actor', 'ops-rotate', 'db', 'rotate-master-key', '--new-key-file', newFile, '--json'],
        env,
      );
      expect(rotate.code).toBe(0);
      const result = JSON.parse(rotate.stdout) as {
        rewrapped: number;
        keyId: string;
        previousKeyId: string;
        previousKeyFile: string;
      };
      // LOG_LEVEL=warn: the audit event's info line is not printed
      expect(rotate.stderr).toBe('');
      // the trail holds the event, with key ids only
      const event = {
        actor: 'ops-rotate',
        action: 'master_key.rotate',
        target: newKey.id,
        before: { keyId: result.previousKeyId },
        after: { keyId: newKey.id, rewrapped: 1 },
      };
      const trail = await attest(['audit', 'list', '--action', 'master_key.rotate', '--json'], env);
      expect({ code: trail.code, stderr: trail.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(trail.stdout)).toMatchObject([event]);
      expect(trail.stdout).not.toContain(b64(newKey.key));
      expect(result).toMatchObject({ rewrapped: 1, keyId: newKey.id, keyFile: keyFile() });
      expect(readFileSync(keyFile(), 'utf8')).toBe(keyFileText(newKey));
      expect(statSync(keyFile()).mode & 0o777).toBe(0o600);
      expect(readFileSync(result.previousKeyFile, 'utf8')).toBe(oldText);
      expect((await attest(['allowlist', 'list', '--json'], env)).code).toBe(0);
      const old = await attest(['allowlist', 'list'], {
        ...env,
        ATTEST_MASTER_KEY_FILE: result.previousKeyFile,
      });
      expect(old.code).toBe(2);
      expect(oneLine(old)).toContain(
        `sealed with master key ${newKey.id}, but the key given (${result.previousKeyFile}) is ${result.previousKeyId}`,
      );
      const again = await attest(['db', 'rotate-master-key', '--new-key-file', newFile], env);
      expect(again.code).toBe(2);
      expect(oneLine(again)).toMatch(/--new-key-file holds the current master key/);
      // a rotation from a wrong current key is refused and records nothing
      const thirdFile = join(dir, 'third.key');
      writeFileSync(thirdFile, keyFileText(testMasterKey(0x45)), { mode: 0o600 });
      const wrong = await attest(['db', 'rotate-master-key', '--new-key-file', thirdFile], {
        ...env,
        ATTEST_MASTER_KEY_FILE: result.previousKeyFile,
      });
      expect(wrong.code).toBe(2);
      expect(oneLine(wrong)).toContain(`sealed with master key ${newKey.id}`);
      const after = await attest(['audit', 'list', '--action', 'master_key', '--json'], env);
      expect({ code: after.code, stderr: after.stderr }).toEqual({ code: 0, stderr: '' });
      expect((JSON.parse(after.stdout) as unknown[]).length).toBe(1);
      const missing = await attest(
        ['db', 'rotate-master-key', '--new-key-file', join(dir, 'nope.key')],
        env,
      );
      expect(missing.code).toBe(2);
      expect(oneLine(missing)).toMatch(
        /^attest: --new-key-file: cannot read .*nope\.key \(ENOENT\) \(run "attest db rotate-master-key --help" for usage\)$/,
      );
    },
    SLOW,
  );

  it(
    'serve uses the default key and verifies a token with the sealed keys',
    async () => {
      const server = await serve(env);
      try {
        const created = await attest(['keys', 'create', '--name', 'rp', '--json'], env);
        const res = await verifyGms(
          server.url,
          (JSON.parse(created.stdout) as { key: string }).key,
          google,
        );
        expect(await res.json()).toMatchObject({
          isValid: true,
          googleTokenDetails: { packageName: TEST_PACKAGE },
        });
        // a running server holds the key: rotating under it is refused
        const rotate = await attest(
          ['db', 'rotate-master-key', '--new-key-file', join(dir, 'other.key')],
          env,
        );
        expect(rotate.code).toBe(3);
        expect(oneLine(rotate)).toMatch(
          /a running "attest serve" holds .* stop it, rotate, then start it again/,
        );
      } finally {
        await server.stop();
      }
    },
    SLOW,
  );
});

const pg = postgresBackend();
describe.skipIf(!pg)('PostgreSQL: no default key, and rotation under a running instance', () => {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const name = `attest_test_secrets_${randomBytes(5).toString('hex')}`;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let keyA: string;
  let keyB: string;
  beforeAll(async () => {
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    url = u.toString();
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: url,
      ATTEST_DATA_DIR: join(dir, 'unused'),
      LOG_LEVEL: 'warn',
    };
    keyA = join(dir, 'pg-a.key');
    keyB = join(dir, 'pg-b.key');
    writeFileSync(keyA, keyFileText(testMasterKey(0xa1)), { mode: 0o600 });
    writeFileSync(keyB, keyFileText(testMasterKey(0xb2)), { mode: 0o600 });
  });
  afterAll(async () => {
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it(
    'every command that needs the key refuses with one line without one (exit 2); serve too',
    async () => {
      const noKey =
        /^attest: no master key: on PostgreSQL set ATTEST_MASTER_KEY_FILE to a file holding 32 random bytes in base64/;
      const serveRun = await attest(['serve', '--port', '0', '--host', '127.0.0.1'], env);
      expect(serveRun.code).toBe(2);
      expect(oneLine(serveRun)).toMatch(noKey);
      const migrate = await attest(['db', 'migrate'], env);
      expect(migrate.code).toBe(2);
      expect(oneLine(migrate)).toMatch(noKey);
      expect((await attest(['db', 'migrate'], { ...env, ATTEST_MASTER_KEY_FILE: keyA })).code).toBe(
        0,
      );
      for (const args of [
        ['allowlist', 'list'],
        [
          'allowlist',
          'add',
          'android',
          TEST_PACKAGE,
          '--decryption-key',
          b64(google.decryptionKey),
          '--verification-key',
          b64(google.verificationKey),
        ],
      ]) {
        const run = await attest(args, env);
        expect(run.code, args.join(' ')).toBe(2);
        expect(oneLine(run)).toMatch(noKey);
      }
      // what needs no secret still works without the key
      expect((await attest(['keys', 'list'], env)).code).toBe(0);
    },
    SLOW,
  );

  it(
    'a raw select shows no key bytes',
    async () => {
      const add = await addAndroid(google, { ...env, ATTEST_MASTER_KEY_FILE: keyA });
      expect(add.code).toBe(0);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const rows = await sql`select *, t::text as whole from android_key_pairs t`;
        expect(rows).toHaveLength(1);
        for (const value of Object.values(rows[0]!)) {
          const bytes = Buffer.isBuffer(value) ? value : Buffer.from(String(value));
          expect(bytes.indexOf(Buffer.from(google.decryptionKey))).toBe(-1);
          expect(bytes.indexOf(Buffer.from(google.verificationKey))).toBe(-1);
          expect(bytes.indexOf(Buffer.from(google.decryptionKey).toString('hex'))).toBe(-1);
        }
      } finally {
        await sql.end();
      }
    },
    SLOW,
  );

  it(
    'after a rotation, an instance still on the old key says why once per reload and never verifies with stale keys',
    async () => {
      const withA = { ...env, ATTEST_MASTER_KEY_FILE: keyA };
      const apiKey = (
        JSON.parse((await attest(['keys', 'create', '--name', 'rp', '--json'], withA)).stdout) as {
          key: string;
        }
      ).key;
      const stale = await serve(withA);
      try {
        const rotate = await attest(['db', 'rotate-master-key', '--new-key-file', keyB], withA);
        expect(rotate.code).toBe(0);
        expect(rotate.stderr).toBe('');
        expect(rotate.stdout).toContain(
          `re-encrypted 1 row(s) of secrets under master key ${testMasterKey(0xb2).id} (was ${testMasterKey(0xa1).id})`,
        );
        expect(rotate.stdout).toContain(
          `the old key (${keyA}) opens nothing in this database now: delete it once no backup needs it`,
        );
        // its first allowlist load happens now, after the rotation
        const res = await verifyGms(stale.url, apiKey, google);
        expect(res.status).toBe(500);
        const line = await stale.logLine(
          (l) =>
            l.msg ===
            'cannot load the allowlist: restart this instance with the current master key',
        );
        expect(line.level).toBe(50);
        expect(String(line.reason)).toContain(
          `sealed with master key ${testMasterKey(0xb2).id}, which is not the one given (${testMasterKey(0xa1).id})`,
        );
      } finally {
        await stale.stop();
      }
      const fresh = await serve({ ...env, ATTEST_MASTER_KEY_FILE: keyB });
      try {
        const res = await verifyGms(fresh.url, apiKey, google);
        expect(await res.json()).toMatchObject({ isValid: true });
      } finally {
        await fresh.stop();
      }
      const old = await attest(['serve', '--port', '0', '--host', '127.0.0.1'], withA);
      expect(old.code).toBe(2);
      expect(oneLine(old)).toContain(
        `wrong master key: the database's secrets are sealed with master key ${testMasterKey(0xb2).id}`,
      );
    },
    SLOW,
  );
});
