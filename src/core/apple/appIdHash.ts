import { createHash } from 'node:crypto';
import { LruCache } from '../lruCache.js';

// App IDs are few and hashed on every attestation (against each allowlisted app) and every
// assertion; the digest is a pure function of the text, so a shared bounded memo is safe.
const digests = new LruCache<string, Buffer>(1024);

/**
 * SHA-256 of an App ID `TEAMID.bundle.id` as UTF-8: the `rpIdHash` App Attest puts in authData.
 * @param appId the App ID, team ID first
 */
export function appIdHash(appId: string): Buffer {
  let digest = digests.get(appId);
  if (digest === undefined) {
    digest = createHash('sha256').update(appId, 'utf8').digest();
    digests.set(appId, digest);
  }
  return digest;
}
