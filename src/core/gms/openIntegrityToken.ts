import {
  compactDecrypt,
  compactVerify,
  decodeProtectedHeader,
  errors,
  type DecryptOptions,
  type VerifyOptions,
} from 'jose';
import type { webcrypto } from 'node:crypto';
import type { AndroidKeyPair } from '../ports.js';
import type { ImportedKeyPair } from './keyCache.js';
import { quote } from './quote.js';

/**
 * Outer JWE: exactly what Play Integrity produces. Pinning both lists means a token cannot choose
 * `dir`, RSA-OAEP, PBES2 or another content cipher; `maxDecompressedLength: 0` refuses `zip`,
 * which Google never sets and which would only add a decompression step to attack.
 */
const JWE_OPTIONS: DecryptOptions = {
  keyManagementAlgorithms: ['A256KW'],
  contentEncryptionAlgorithms: ['A256GCM'],
  maxDecompressedLength: 0,
};

/** Inner JWS: ES256 only (no `none`, no HMAC keyed with public material, no other curve). */
const JWS_OPTIONS: VerifyOptions = { algorithms: ['ES256'] };

/** How far opening an integrity token got. */
export type OpenedIntegrityToken =
  /** a pair decrypted it and its verification key verified the JWS inside */
  | { stage: 'verified'; pairId: string; payload: Uint8Array }
  /** at least one pair decrypted it, but no decrypting pair's key verified the JWS */
  | { stage: 'decrypted'; pairIds: string[]; problem: string }
  /** no pair decrypted it */
  | { stage: 'sealed'; problem: string };

/**
 * Decrypts and verifies a Play Integrity token with a package's key pairs, for key rotation.
 *
 * Each pair is tried in turn, newest first (the allowlist lists pairs oldest first, and once a
 * rotation is made in the Play Console Google seals every new token with the new pair, so the
 * common case costs one attempt): decrypt with its AES key; on success verify with that same pair's
 * EC key (Google issues the two together, so a pair is a unit); on any failure go on to the next
 * pair. The result names the furthest stage any pair reached, so a token that some pair decrypts
 * but whose signature no pair accepts is a signature failure, not a decryption failure.
 * A failure that does not depend on the key (an algorithm outside the pins, a malformed
 * compact form) ends the loop early: every other pair would fail the same way.
 * @param token the compact JWE from the device
 * @param pairs the package's allowlisted pairs, oldest first (the allowlist's order)
 * @param importPair returns the imported form of a pair (normally `KeyCache.get`)
 */
export async function openIntegrityToken(
  token: string,
  pairs: readonly AndroidKeyPair[],
  importPair: (pair: AndroidKeyPair) => Promise<ImportedKeyPair>,
): Promise<OpenedIntegrityToken> {
  if (pairs.length === 0) return { stage: 'sealed', problem: 'the package has no key pairs' };
  const decryptedBy: string[] = [];
  const unusable: string[] = [];
  let sealedProblem: string | undefined;
  let signatureProblem: string | undefined;

  for (let i = pairs.length - 1; i >= 0; i--) {
    const pair = pairs[i]!;
    const keys = await importPair(pair);
    if (!keys.decryptionKey) {
      unusable.push(`key pair ${quote(pair.id)} has an unusable decryption key`);
      continue;
    }
    const plaintext = await decryptWith(token, keys.decryptionKey);
    if (!plaintext.ok) {
      if (plaintext.keyIndependent) {
        sealedProblem = plaintext.problem;
        break;
      }
      continue;
    }
    decryptedBy.push(pair.id);
    if (!keys.verificationKey) {
      signatureProblem = `key pair ${quote(pair.id)} has an unusable verification key`;
      continue;
    }
    const verified = await verifyWith(plaintext.bytes, keys.verificationKey);
    if (verified.ok) return { stage: 'verified', pairId: pair.id, payload: verified.payload };
    signatureProblem = verified.problem;
  }

  if (decryptedBy.length > 0) {
    const by = decryptedBy.map(quote).join(', ');
    return {
      stage: 'decrypted',
      pairIds: decryptedBy,
      problem: `decrypted with key pair ${by}, but ${signatureProblem ?? 'not verified'}`,
    };
  }
  const problem =
    sealedProblem ??
    `none of the package's ${pairs.length} key pair(s) decrypts it (other keys, or an altered token)`;
  return {
    stage: 'sealed',
    problem: unusable.length > 0 ? `${problem}; ${unusable.join('; ')}` : problem,
  };
}

/**
 * Decrypts the outer JWE with one AES key under the pins.
 * Any error from jose counts as "does not open": its input is the untrusted token and our keys
 * always suit A256KW, so a throw is about the token, never a fault worth an HTTP 500.
 * @param token the compact JWE
 * @param key an imported AES-KW key
 */
export async function decryptWith(
  token: string,
  key: webcrypto.CryptoKey,
): Promise<
  { ok: true; bytes: Uint8Array } | { ok: false; keyIndependent: boolean; problem: string }
> {
  try {
    const { plaintext } = await compactDecrypt(token, key, JWE_OPTIONS);
    return { ok: true, bytes: plaintext };
  } catch (err) {
    return {
      ok: false,
      keyIndependent: !(err instanceof errors.JWEDecryptionFailed),
      problem: describeJweError(err, token),
    };
  }
}

/**
 * Verifies the inner JWS with one key under the pin. As with `decryptWith`, any error from jose
 * counts as "does not verify".
 * @param jws the decrypted compact JWS
 * @param key an imported verification key
 */
export async function verifyWith(
  jws: Uint8Array,
  key: webcrypto.CryptoKey,
): Promise<{ ok: true; payload: Uint8Array } | { ok: false; problem: string }> {
  try {
    const { payload } = await compactVerify(jws, key, JWS_OPTIONS);
    return { ok: true, payload };
  } catch (err) {
    return { ok: false, problem: describeJwsError(err, jws) };
  }
}

function describeJweError(err: unknown, token: string): string {
  if (err instanceof errors.JOSEAlgNotAllowed) {
    const { alg, enc } = headerOf(token);
    return `JWE algorithm ${quote(alg)} with ${quote(enc)} is not allowed (only A256KW with A256GCM)`;
  }
  if (err instanceof errors.JWEDecryptionFailed)
    return 'the key does not decrypt it (wrong key or altered token)';
  if (err instanceof errors.JOSENotSupported)
    return `the JWE uses an unsupported feature: ${clean(err.message)}`;
  if (err instanceof errors.JWEInvalid)
    return `not a well-formed compact JWE: ${clean(err.message)}`;
  return `jose refused the JWE (${err instanceof Error ? err.name : 'unknown error'})`;
}

function describeJwsError(err: unknown, jws: Uint8Array): string {
  if (err instanceof errors.JOSEAlgNotAllowed) {
    const { alg } = headerOf(new TextDecoder().decode(jws));
    return `JWS algorithm ${quote(alg)} is not allowed (only ES256)`;
  }
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return 'the ES256 signature does not verify with its verification key';
  if (err instanceof errors.JWSInvalid)
    return `not a well-formed compact JWS: ${clean(err.message)}`;
  if (err instanceof errors.JOSENotSupported)
    return `the JWS uses an unsupported feature: ${clean(err.message)}`;
  return `jose refused the JWS (${err instanceof Error ? err.name : 'unknown error'})`;
}

function headerOf(compact: string): { alg: unknown; enc: unknown } {
  try {
    const header = decodeProtectedHeader(compact);
    return { alg: header.alg, enc: (header as { enc?: unknown }).enc };
  } catch {
    return { alg: undefined, enc: undefined };
  }
}

function clean(message: string): string {
  const oneLine = message.replace(/[\u0000-\u001f\u007f]/g, ' ');
  return oneLine.length > 100 ? `${oneLine.slice(0, 100)}…` : oneLine;
}
