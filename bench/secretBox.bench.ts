/**
 * What sealing costs: one Play Integrity key sealed (on `allowlist add android`), opened (every
 * allowlist reload, at most every 5 s per instance, two per key pair) and re-wrapped (rotation).
 * Run: npx vitest bench --run --project shared bench/secretBox.bench.ts
 */
import { randomBytes } from 'node:crypto';
import { bench, describe } from 'vitest';
import { createSecretBox, toMasterKey } from '../src/db/secretBox.js';

const current = toMasterKey(randomBytes(32));
const box = createSecretBox([current]);
const rotating = createSecretBox([toMasterKey(randomBytes(32)), current]);
// a DER SPKI verification key is 91 bytes, the decryption key 32
const secret = randomBytes(91);
const aad = JSON.stringify([
  'android_key_pairs',
  'verification_key',
  'com.example.bank',
  '1f2e3d4c5b6a7980',
]);
const sealed = box.seal(secret, aad);
// a bench that throws is not reported: prove the round trip once at load
if (!Buffer.from(box.open(sealed, aad)).equals(secret))
  throw new Error('the sealed value does not open');

describe('secretBox (AES-256-GCM envelope)', () => {
  bench('seal (new data key, two encryptions)', () => {
    box.seal(secret, aad);
  });
  bench('open (unwrap, decrypt)', () => {
    box.open(sealed, aad);
  });
  bench('rewrap (rotation, per value)', () => {
    rotating.rewrap(sealed, aad);
  });
});
