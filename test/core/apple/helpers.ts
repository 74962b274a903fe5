/** Shared by the Apple tests: reading the real vectors, and turning rejections into their reason. */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Rejection, type RejectReason } from '../../../src/core/reasons.js';

/**
 * The reason a promise (or a function's result) was rejected with; 'accepted' when it resolved.
 * Anything thrown that is not a `Rejection` is a fault and propagates, failing the test.
 */
export async function reasonOf(
  work: Promise<unknown> | (() => unknown),
): Promise<RejectReason | 'accepted'> {
  try {
    await (typeof work === 'function' ? work() : work);
    return 'accepted';
  } catch (err) {
    if (err instanceof Rejection) return err.reason;
    throw err;
  }
}

export interface VectorAssertion {
  assertion: string;
  clientDataHash: string;
  expectedCounter: number;
  publicKeyPem: string;
}

export interface Vector {
  id: string;
  appId: string;
  keyId: string;
  environment?: 'development' | 'production';
  attestation?: string;
  challenge?: string | null;
  clientDataHash?: string;
  verifyAt?: string;
  leafNotBefore?: string;
  leafNotAfter?: string;
  leafPublicKeyPem?: string;
  authDataExtensions?: Record<string, string>;
  assertions: VectorAssertion[];
}

export const FIXTURES_DIR = fileURLToPath(new URL('../../fixtures/apple/', import.meta.url));

/** Every real App Attest capture in test/fixtures/apple, by file order. */
export function loadVectors(): Vector[] {
  return readdirSync(FIXTURES_DIR)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => JSON.parse(readFileSync(FIXTURES_DIR + name, 'utf8')) as Vector);
}

export const b64 = (text: string): Buffer => Buffer.from(text, 'base64');
