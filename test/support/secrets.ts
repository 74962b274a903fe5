/** Master keys for tests: fixed bytes, so a failure names the same key ids run after run. */
import {
  createSecretBox,
  toMasterKey,
  type MasterKey,
  type SecretBox,
} from '../../src/db/secretBox.js';
import { encodeBase64 } from '../../src/core/base64.js';

export function testMasterKey(fill = 7): MasterKey {
  return toMasterKey(new Uint8Array(32).fill(fill));
}

/** The box the shared test fixtures seal with. */
export const TEST_SECRETS: SecretBox = createSecretBox([testMasterKey()]);

/** TEST_SECRETS' key as ATTEST_MASTER_KEY, for CLI runs over a database the fixtures sealed */
export const TEST_MASTER_KEY_ENV = encodeBase64(testMasterKey().key);

/** a key file's content (what `openssl rand -base64 32` writes) */
export function keyFileText(key: MasterKey): string {
  return `${encodeBase64(key.key)}\n`;
}
