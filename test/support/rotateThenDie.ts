/**
 * A child process for test/db/masterKeyRotation.test.ts: rotates the embedded database's default
 * key file in DATA_DIR to the key in NEW_KEY_FILE and kills itself (SIGKILL) right after STEP.
 * Usage: tsx test/support/rotateThenDie.ts DATA_DIR NEW_KEY_FILE STEP
 */
import { openDatabase } from '../../src/db/client.js';
import {
  readMasterKeyFile,
  resolveMasterKey,
  rotateDefaultKeyFile,
  type RotationStep,
} from '../../src/db/masterKey.js';
import { createSecretBox } from '../../src/db/secretBox.js';
import { rotateMasterKey } from '../../src/db/secrets.js';

const [dataDir, newKeyFile, step] = process.argv.slice(2) as [string, string, RotationStep];
const handle = await openDatabase({ dataDir, role: 'cli', create: false });
const current = await resolveMasterKey(
  { dataDir, masterKey: undefined, masterKeyFile: undefined },
  handle,
);
const newKey = readMasterKeyFile(newKeyFile, 'new key');
await rotateDefaultKeyFile({
  path: current.defaultFile!,
  oldKey: current.key,
  newKey,
  db: handle.db,
  commit: () =>
    rotateMasterKey(handle.db, createSecretBox([newKey, current.key]), current.source, {
      actor: 'crash-test',
      log: () => {},
    }),
  after: (done) => {
    if (done === step) process.kill(process.pid, 'SIGKILL');
  },
});
await handle.close();
