import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import argon2 from 'argon2';
import { PRINTABLE_NAME } from './printableName.js';

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

/**
 * Whether `name` may name an API key: PRINTABLE_NAME, with no surrounding spaces (the CLI trims
 * what it is given). One rule for the CLI and for the admin API, which gets names from a socket.
 */
export function isApiKeyName(name: string): boolean {
  return PRINTABLE_NAME.test(name) && name.trim() === name;
}

/**
 * The argon2id PHC strings `hashApiKey` makes, with parameters bounded so that checking a stored
 * hash costs at most a few times what ours cost: m 19 to 64 MiB, t 2 to 8, p 1 to 4, salt and
 * hash 16 to 64 bytes (unpadded base64).
 */
const HASH_PATTERN =
  /^\$argon2id\$v=19\$m=(\d{5}),t=(\d),p=(\d)\$[A-Za-z0-9+/]{22,86}\$[A-Za-z0-9+/]{22,86}$/;

/** Whether `hash` is an API key hash as `hashApiKey` makes it (the admin API and the authenticator check it before argon2). */
export function isApiKeyHash(hash: string): boolean {
  const m = HASH_PATTERN.exec(hash);
  if (!m) return false;
  const [memory, time, lanes] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return memory >= 19_456 && memory <= 65_536 && time >= 2 && time <= 8 && lanes >= 1 && lanes <= 4;
}

/**
 * The pre-check of a key: `hs256$<salt>$<mac>`, HMAC-SHA256 of the whole key under a random
 * 16-byte salt (base64url). It is stored beside the argon2 hash so a wrong secret is refused for
 * the cost of one HMAC, before argon2 and before any failure budget. Keys carry 256 random bits,
 * so the value, like the argon2 hash, gives nothing to guess from.
 */
export function apiKeyCheck(key: string, salt: Uint8Array = randomBytes(16)): string {
  const mac = createHmac('sha256', salt).update(key, 'utf8').digest('base64url');
  return `hs256$${Buffer.from(salt).toString('base64url')}$${mac}`;
}

const CHECK_PATTERN = /^hs256\$([A-Za-z0-9_-]{22})\$([A-Za-z0-9_-]{43})$/;

/** Whether `check` is of the form `apiKeyCheck` makes. */
export function isApiKeyCheck(check: string): boolean {
  return CHECK_PATTERN.test(check);
}

/** Whether `presented` fits the stored pre-check (constant time); null when `check` is not a pre-check. */
export function matchesApiKeyCheck(check: string, presented: string): boolean | null {
  const m = CHECK_PATTERN.exec(check);
  if (!m) return null;
  const salt = Buffer.from(m[1]!, 'base64url');
  const expected = Buffer.from(m[2]!, 'base64url');
  const actual = createHmac('sha256', salt).update(presented, 'utf8').digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
