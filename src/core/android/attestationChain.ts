/**
 * Android attestation chain validation by the rules of Google's own verifier
 * (android/keyattestation, KeyAttestationCertPathValidator), as docs/token-format.md states them:
 * every signature, issuer/subject name chaining (DER bytes), the top certificate being or signed
 * by a trusted root key, the key description in the leaf only. The leaf's validity is never
 * checked (devices stamp it arbitrarily); issuing certificates must be valid at `now` on remotely
 * provisioned chains, while factory chains keep working after an issuer expired.
 * basicConstraints, keyUsage and CRL distribution points are not examined.
 *
 * The issuing part of a chain (all but the leaf) is shared by many devices: once its signatures
 * verified, it is remembered by the SHA-256 of its DER, and a registration checks one signature.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { LruCache } from '../lruCache.js';
import { Rejection } from '../reasons.js';
import type { AttestationCertificate } from './attestationCertificate.js';
import { KEY_DESCRIPTION_OID } from './keyDescription.js';
import { aospSoftwareRoots, type AndroidRootKey } from './trustRoots.js';

/** Remote key provisioning writes this extension into the intermediate it certifies. */
export const PROVISIONING_INFO_OID = '1.3.6.1.4.1.11129.2.1.30';

export type Provisioning = 'factory' | 'remote';

export interface ChainResult {
  root: AndroidRootKey;
  provisioning: Provisioning;
}

export interface AttestationChainVerifier {
  /**
   * Verifies `certs` (leaf first) at `now`. Throws `Rejection('android_chain_invalid')` naming the
   * first defect; sets `onUntrusted` first when the chain ends at an AOSP software root.
   */
  verify(
    certs: readonly AttestationCertificate[],
    now: Date,
    onUntrusted?: (root: 'aosp-software') => void,
  ): ChainResult;
}

function fail(detail: string): never {
  throw new Rejection('android_chain_invalid', detail);
}

function signedBy(cert: AttestationCertificate, issuer: AttestationCertificate): boolean {
  try {
    return cert.cert.verify(issuer.cert.publicKey);
  } catch {
    return false; // an issuer key OpenSSL cannot use (or none)
  }
}

/**
 * Builds a chain verifier over `roots`.
 * @param roots trusted root keys (`defaultAndroidRoots()` unless replaced); at least one
 * @param cacheSize verified issuing chains remembered; default 256
 */
export function createAttestationChainVerifier(
  roots: readonly AndroidRootKey[],
  cacheSize = 256,
): AttestationChainVerifier {
  if (roots.length === 0) throw new Error('Android key attestation needs at least one root key');
  const verified = new LruCache<string, AndroidRootKey>(cacheSize);

  /**
   * Signatures and names of `issuing` (the chain without its leaf, or a lone leaf) up to a root
   * key: the part devices share.
   */
  function anchor(
    issuing: readonly AttestationCertificate[],
    onUntrusted?: (root: 'aosp-software') => void,
  ): AndroidRootKey {
    const hash = createHash('sha256');
    for (const c of issuing) hash.update(c.der);
    const cacheKey = hash.digest('hex');
    const cached = verified.get(cacheKey);
    if (cached) return cached;

    for (let i = 0; i < issuing.length - 1; i++) link(issuing, i, 1);
    const top = issuing[issuing.length - 1]!;
    const signs = (key: KeyObject) => {
      try {
        return top.cert.verify(key);
      } catch {
        return false;
      }
    };
    // the top certificate is a root key's own, or (the root left out) signed by one
    const root = roots.find((r) => r.spki.equals(top.spki)) ?? roots.find((r) => signs(r.key));
    if (!root) {
      const aosp = aospSoftwareRoots();
      if (aosp.some((r) => r.spki.equals(top.spki) || signs(r.key))) {
        onUntrusted?.('aosp-software');
        fail(
          'the chain ends at the AOSP software attestation root: the key was made by Keystore in software (an emulator, or a device without secure hardware), not by a TEE or StrongBox',
        );
      }
      fail(
        'the top certificate of the chain is neither a trusted root key nor signed by one (an unknown root)',
      );
    }
    verified.set(cacheKey, root);
    return root;
  }

  return {
    verify(certs, now, onUntrusted) {
      if (certs.length === 0) fail('certificateChain is empty');
      for (let i = 1; i < certs.length; i++) {
        if (certs[i]!.extensions.has(KEY_DESCRIPTION_OID)) {
          fail(
            `certificateChain[${i}] carries the key description too: the extension belongs in the leaf only (an ATTEST_KEY chain?)`,
          );
        }
      }
      const root = anchor(certs.length === 1 ? certs : certs.slice(1), onUntrusted);
      if (certs.length > 1) link(certs, 0, 0);

      const remote = certs.slice(1).some((c) => c.extensions.has(PROVISIONING_INFO_OID));
      if (remote) {
        for (let i = 1; i < certs.length; i++) {
          const c = certs[i]!;
          if (now < c.notBefore || now > c.notAfter) {
            fail(
              `certificateChain[${i}] is valid from ${iso(c.notBefore)} to ${iso(c.notAfter)}, not at ${iso(now)} (a remotely provisioned chain: its issuing certificates must be current)`,
            );
          }
        }
      }
      return { root, provisioning: remote ? 'remote' : 'factory' };
    },
  };
}

/** certs[i] is issued by certs[i + 1]; `shift` maps indexes back to certificateChain's. */
function link(certs: readonly AttestationCertificate[], i: number, shift: number): void {
  const cert = certs[i]!;
  const issuer = certs[i + 1]!;
  const [a, b] = [i + shift, i + 1 + shift];
  if (!cert.issuer.equals(issuer.subject)) {
    fail(`certificateChain[${a}]'s issuer name is not certificateChain[${b}]'s subject name`);
  }
  if (!signedBy(cert, issuer)) {
    fail(`certificateChain[${a}]'s signature does not verify with certificateChain[${b}]'s key`);
  }
}

function iso(d: Date): string {
  return d.toISOString().replace('.000Z', 'Z');
}
