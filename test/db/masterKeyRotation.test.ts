import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { openDatabase } from '../../src/db/client.js';
import type { Database, DatabaseHandle } from '../../src/db/database.js';
import {
  DEFAULT_MASTER_KEY_FILE,
  resolveMasterKey,
  rotateDefaultKeyFile,
  type RotationStep,
} from '../../src/db/masterKey.js';
import { runMigrations } from '../../src/db/migrate.js';
import { createSecretBox, type MasterKey } from '../../src/db/secretBox.js';
import { checkMasterKey, rotateMasterKey } from '../../src/db/secrets.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { keyFileText, testMasterKey } from '../support/secrets.js';

const A = testMasterKey(0x0a);
const B = testMasterKey(0x0b);
const STEPS: RotationStep[] = ['pending-written', 'old-set-aside', 'committed', 'renamed'];
const pair = () => ({
  id: 'fp1',
  decryptionKey: randomBytes(32),
  verificationKey: randomBytes(91),
});

class Crash extends Error {}

/** what a fresh start finds: the key it resolves opens every secret, and no half-done rotation is left */
async function startAgain(dataDir: string, db: Database) {
  const resolved = await resolveMasterKey(
    { dataDir, masterKey: undefined, masterKeyFile: undefined },
    { db, kind: 'embedded' },
  );
  const box = createSecretBox([resolved.key]);
  await checkMasterKey(db, box, { source: resolved.source });
  const [pkg] = await createAllowlistRepository(db, box).listAndroid();
  expect(pkg!.keys.map((k) => k.id)).toEqual(['fp1']);
  expect(readdirSync(dataDir).filter((n) => n.includes('.rotating.'))).toEqual([]);
  return resolved.key.id;
}

async function seal(dataDir: string, db: Database, key: MasterKey) {
  writeFileSync(join(dataDir, DEFAULT_MASTER_KEY_FILE), keyFileText(key), { mode: 0o600 });
  const box = createSecretBox([key]);
  await checkMasterKey(db, box, { source: 'test' });
  await createAllowlistRepository(db, box).addAndroid('com.x', pair(), {});
}

function rotate(
  dataDir: string,
  db: Database,
  from: MasterKey,
  to: MasterKey,
  crashAfter?: RotationStep,
) {
  return rotateDefaultKeyFile({
    path: join(dataDir, DEFAULT_MASTER_KEY_FILE),
    oldKey: from,
    newKey: to,
    db,
    commit: () =>
      rotateMasterKey(db, createSecretBox([to, from]), 'test', { actor: 't', log: () => {} }),
    after: (step) => {
      if (step === crashAfter) throw new Crash(step);
    },
  });
}

describe.each(backends().slice(0, 1))('default key file rotation on $name', (backend) => {
  let handle: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    handle = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await handle?.close();
  });
  beforeEach(async () => {
    await handle.reset();
    dataDir = mkdtempSync(join(tmpdir(), 'attest-rotate-'));
    await seal(dataDir, handle.db, A);
    return () => rmSync(dataDir, { recursive: true, force: true });
  });

  for (const step of STEPS)
    it(`a crash right after "${step}" leaves a key file that opens the database at the next start`, async () => {
      await expect(rotate(dataDir, handle.db, A, B, step)).rejects.toThrow(Crash);
      const committed = step === 'committed' || step === 'renamed';
      expect(await startAgain(dataDir, handle.db)).toBe(committed ? B.id : A.id);
      // and a rotation after the recovery works
      const next = committed ? A : B;
      const from = committed ? B : A;
      await rotate(dataDir, handle.db, from, next);
      expect(await startAgain(dataDir, handle.db)).toBe(next.id);
    });

  it('a commit that fails leaves the old key file alone and no pending or set-aside file', async () => {
    const before = readdirSync(dataDir).sort();
    await expect(
      rotateDefaultKeyFile({
        path: join(dataDir, DEFAULT_MASTER_KEY_FILE),
        oldKey: A,
        newKey: B,
        db: handle.db,
        commit: async () => {
          throw new Error('the database went away');
        },
      }),
    ).rejects.toThrow('the database went away');
    expect(readdirSync(dataDir).sort()).toEqual(before);
    expect(await startAgain(dataDir, handle.db)).toBe(A.id);
  });

  it('A -> B -> A -> B: set-aside names never collide', async () => {
    const asides = [];
    for (const [from, to] of [
      [A, B],
      [B, A],
      [A, B],
    ] as const)
      asides.push((await rotate(dataDir, handle.db, from, to)).aside);
    expect(new Set(asides).size).toBe(3);
    expect(readFileSync(asides[2]!, 'utf8')).toBe(keyFileText(A));
    expect(await startAgain(dataDir, handle.db)).toBe(B.id);
  });

  it('a pending file cut short by a crash while it was written is discarded', async () => {
    writeFileSync(join(dataDir, `${DEFAULT_MASTER_KEY_FILE}.rotating.${B.id}.x`), 'AAAA');
    expect(await startAgain(dataDir, handle.db)).toBe(A.id);
  });
});

describe('a real process killed during the rotation', () => {
  for (const step of ['old-set-aside', 'committed'] as const)
    it(`SIGKILL right after "${step}": the next start opens the database`, async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'attest-rotate-kill-'));
      try {
        let h: DatabaseHandle = await openDatabase({ dataDir, role: 'cli', create: true });
        await runMigrations(h);
        await seal(dataDir, h.db, A);
        await h.close();
        const newKeyFile = join(dataDir, 'new.key');
        writeFileSync(newKeyFile, keyFileText(B), { mode: 0o600 });
        const child = spawn(
          process.execPath,
          [
            '--import',
            'tsx',
            join(__dirname, '../support/rotateThenDie.ts'),
            dataDir,
            newKeyFile,
            step,
          ],
          { stdio: ['ignore', 'ignore', 'pipe'] },
        );
        let stderr = '';
        child.stderr.on('data', (c) => (stderr += c));
        const signal = await new Promise((resolve) =>
          child.once('exit', (_code, sig) => resolve(sig)),
        );
        expect(signal, stderr).toBe('SIGKILL');
        h = await openDatabase({ dataDir, role: 'cli', create: false });
        try {
          expect(await startAgain(dataDir, h.db)).toBe(step === 'committed' ? B.id : A.id);
        } finally {
          await h.close();
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 120_000);
});
