import { randomBytes } from 'node:crypto';
import argon2 from 'argon2';

/**
 * API keys look like `<prefix>_<id><secret>`: `id` is 16 characters of [0-9a-z] (the row to
 * check, so one row is read per request) and `secret` 43 characters of base64url (256 bits).
 * The pattern is anchored with fixed lengths, so a secret containing `_` or `-` is never split.
 */
const KEY_PATTERN = /^([a-z][a-z0-9]{0,15})_([0-9a-z]{16})([A-Za-z0-9_-]{43})$/;
const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** OWASP's argon2id minimum: m=19 MiB, t=2, p=1. */
export const ARGON2_OPTIONS = {
  type: argon2.argon2id,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
} as const;

export interface ParsedApiKey {
  prefix: string;
  id: string;
}

/** Splits a presented key; `null` when it is not of the key format. */
export function parseApiKey(presented: string): ParsedApiKey | null {
  const m = KEY_PATTERN.exec(presented);
  return m ? { prefix: m[1]!, id: m[2]! } : null;
}

/** A new key and its lookup id. The key is shown once; only `hashApiKey(key)` is stored. */
export function generateApiKey(prefix: string): { id: string; key: string } {
  // 16 characters from 36 with rejection of biased bytes: ids are not secret, only unique
  let id = '';
  while (id.length < 16) {
    for (const byte of randomBytes(32)) {
      if (byte < 252 && id.length < 16) id += ID_ALPHABET[byte % 36];
    }
  }
  const secret = randomBytes(32).toString('base64url');
  return { id, key: `${prefix}_${id}${secret}` };
}

/** argon2id PHC string of the whole key. */
export function hashApiKey(key: string): Promise<string> {
  return argon2.hash(key, ARGON2_OPTIONS);
}

/** Constant-time check of a presented key against its stored hash. */
export function verifyApiKeyHash(hash: string, presented: string): Promise<boolean> {
  return argon2.verify(hash, presented);
}
