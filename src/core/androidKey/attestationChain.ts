/**
 * Android attestation chain validation by the rules of Google's own verifier
 * (android/keyattestation, KeyAttestationCertPathValidator), as docs/token-format.md states them:
 * every signature, issuer/subject name chaining (DER bytes), the top certificate being or signed
 * by a trusted root key, the key description in the leaf only. The leaf's validity is never
 * checked (devices stamp it arbitrarily); issuing certificates must be valid at `now` on remotely
 * provisioned chains, while factory chains keep working after an issuer expired.
 * basicConstraints, keyUsage and CRL distribution points are not examined.
 *
 * Every chain's cost is bounded before its first signature (docs/security.md): at most ten
 * certificates; issuing keys and signature algorithms within what real chains use (a 3,064-bit
 * RSA exponent made each link a full exponentiation); the root found by key (the top certificate
 * is a root key's own, or signed by one of the same key type) before anything below it; then each
 * link checked once, from the root down. So a chain that does not reach a trusted key costs at
 * most one signature per root key of its type, and one under a trusted key at most one per link.
 *
 * The issuing part of a chain (all but the leaf) is shared by many devices: once its signatures
 * verified, it is remembered by the SHA-256 of its DER, and a registration checks one signature.
 * Failures are remembered too, by the digest of the part that failed (the issuing part, or the
 * whole chain when the leaf's own link failed): the same hostile chain again costs a hash.
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
  /** the chain's top certificate carries the root key itself (else the root was left out) */
  rootIncluded: boolean;
}

/** The most certificates a chain may hold (the token format's bound; real chains have 3 to 5). */
export const MAX_CHAIN_LENGTH = 10;

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

type KeyFamily = 'rsa' | 'ec';

/**
 * The signature algorithms of real attestation chains (ECDSA with SHA-256 or SHA-384, RSA PKCS#1
 * v1.5 with SHA-256) and their SHA-512 siblings: each is one cheap check with a key in profile.
 * RSA-PSS (parameters to parse), SHA-1 and MD5 are not among them.
 */
const SIGNATURE_ALGORITHMS: ReadonlyMap<string, { family: KeyFamily; name: string }> = new Map([
  ['1.2.840.113549.1.1.11', { family: 'rsa', name: 'sha256WithRSAEncryption' }],
  ['1.2.840.113549.1.1.12', { family: 'rsa', name: 'sha384WithRSAEncryption' }],
  ['1.2.840.113549.1.1.13', { family: 'rsa', name: 'sha512WithRSAEncryption' }],
  ['1.2.840.10045.4.3.2', { family: 'ec', name: 'ecdsa-with-SHA256' }],
  ['1.2.840.10045.4.3.3', { family: 'ec', name: 'ecdsa-with-SHA384' }],
  ['1.2.840.10045.4.3.4', { family: 'ec', name: 'ecdsa-with-SHA512' }],
] as const);

const ISSUING_CURVES = new Set(['prime256v1', 'secp384r1']);
const RSA_EXPONENT = 65537n;

function familyOf(key: KeyObject): KeyFamily | null {
  const type = key.asymmetricKeyType;
  return type === 'rsa' || type === 'ec' ? type : null;
}

/**
 * The key of an issuing certificate, when it is one real chains use: EC P-256 or P-384, or RSA
 * of 2048 to 4096 bits with exponent 65537 exactly (the only exponent Google and the OEMs use,
 * and one that keeps a verification cheap); otherwise a description of what it is.
 */
function issuingKey(cert: AttestationCertificate): KeyObject | string {
  let key: KeyObject;
  try {
    key = cert.cert.publicKey;
  } catch {
    return 'a key type this service cannot read';
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'ec') {
    return details.namedCurve && ISSUING_CURVES.has(details.namedCurve)
      ? key
      : `EC on ${details.namedCurve ?? 'an unnamed curve'}`;
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = details.modulusLength ?? 0;
    const e = details.publicExponent ?? 0n;
    if (bits >= 2048 && bits <= 4096 && e === RSA_EXPONENT) return key;
    return `RSA-${bits} with a public exponent of ${e.toString(2).length} bits${e < 1n << 32n ? ` (${e})` : ''}`;
  }
  return key.asymmetricKeyType ?? 'an unknown key type';
}

/**
 * The name of `cert`'s signature algorithm, when it is one of SIGNATURE_ALGORITHMS and of the
 * family of the key that is to verify it; fails otherwise.
 * @param what names the certificate; `by` the key's holder
 */
function algorithmFits(
  cert: AttestationCertificate,
  what: string,
  family: KeyFamily | null,
  by: string,
): void {
  const algorithm = SIGNATURE_ALGORITHMS.get(cert.signatureAlgorithm);
  if (!algorithm)
    fail(
      `${what} is signed with algorithm ${cert.signatureAlgorithm}: attestation chains use ECDSA or RSA PKCS#1 v1.5 with SHA-256, SHA-384 or SHA-512`,
    );
  if (algorithm.family !== family)
    fail(`${what} is signed with ${algorithm.name}, which ${by}'s key cannot have made`);
}

/**
 * Builds a chain verifier over `roots`.
 * @param roots trusted root keys (`defaultAndroidRoots()` unless replaced); at least one
 * @param cacheSize verified issuing chains remembered; default 256
 * @param failureCacheSize failed chains remembered by digest; default 1024
 */
export function createAttestationChainVerifier(
  roots: readonly AndroidRootKey[],
  cacheSize = 256,
  failureCacheSize = 1024,
): AttestationChainVerifier {
  if (roots.length === 0) throw new Error('Android key attestation needs at least one root key');
  const verified = new LruCache<string, AndroidRootKey>(cacheSize);
  const failed = new LruCache<string, { detail: string; aosp: boolean }>(failureCacheSize);
  const rootFamilies = roots.map((r) => familyOf(r.key));

  /**
   * The issuing part of a chain (without its leaf; a lone leaf stands for itself) up to a root
   * key: profile first, then the root by key, then each link from the root down.
   */
  function anchor(
    issuing: readonly AttestationCertificate[],
    shift: number,
    onAosp: () => void,
  ): AndroidRootKey {
    const n = issuing.length;
    const top = issuing[n - 1]!;
    const at = (i: number) => `certificateChain[${i + shift}]`;

    // the top certificate is a root key's own (its key trusted as configured, not profiled), or
    // the AOSP software root's, named as such: both by key, no signature
    let root = roots.find((r) => r.spki.equals(top.spki));
    if (!root && aospSoftwareRoots().some((r) => r.spki.equals(top.spki))) {
      onAosp();
      fail(AOSP);
    }

    // before any signature: names, every key that is to verify a signature, and every
    // signature algorithm against the family of the key that is to verify it
    const keys: KeyObject[] = [];
    for (let i = 0; i < n - 1; i++) {
      if (!issuing[i]!.issuer.equals(issuing[i + 1]!.subject))
        fail(`${at(i)}'s issuer name is not ${at(i + 1)}'s subject name`);
      const key = root && i + 1 === n - 1 ? root.key : issuingKey(issuing[i + 1]!);
      if (typeof key === 'string') fail(outOfProfile(at(i + 1), key));
      algorithmFits(issuing[i]!, at(i), familyOf(key), at(i + 1));
      keys.push(key);
    }

    if (!root) {
      // signed by a root key (the root left out): only the root keys of the family its
      // algorithm names are tried, each once; then the AOSP one of that family, to name it
      const family = SIGNATURE_ALGORITHMS.get(top.signatureAlgorithm)?.family;
      if (family) {
        root = roots.find((r, i) => rootFamilies[i] === family && signs(top, r.key));
        if (
          !root &&
          aospSoftwareRoots().some((r) => familyOf(r.key) === family && signs(top, r.key))
        ) {
          onAosp();
          fail(AOSP);
        }
      }
      if (!root)
        fail(
          'the top certificate of the chain is neither a trusted root key nor signed by one (an unknown root)',
        );
    }

    // one fixed path, from the root down: each link once
    for (let i = n - 2; i >= 0; i--) {
      if (!signs(issuing[i]!, keys[i]!))
        fail(`${at(i)}'s signature does not verify with ${at(i + 1)}'s key`);
    }
    return root;
  }

  /**
   * The key that is to verify the leaf (certificateChain[1]'s: in profile, or a root key's own),
   * once the leaf is signed with an algorithm of its family.
   */
  function leafIssuerKey(certs: readonly AttestationCertificate[]): KeyObject {
    const [leaf, issuer] = [certs[0]!, certs[1]!];
    const trusted = certs.length === 2 ? roots.find((r) => r.spki.equals(issuer.spki)) : undefined;
    const key = trusted ? trusted.key : issuingKey(issuer);
    if (typeof key === 'string') fail(outOfProfile('certificateChain[1]', key));
    algorithmFits(leaf, 'certificateChain[0]', familyOf(key), 'certificateChain[1]');
    return key;
  }

  /** Runs `step`; an android_chain_invalid it throws is remembered under `digest`. */
  function remembering<T>(digest: string, step: (onAosp: () => void) => T): T {
    let aosp = false;
    try {
      return step(() => {
        aosp = true;
      });
    } catch (err) {
      if (err instanceof Rejection && err.reason === 'android_chain_invalid')
        failed.set(digest, { detail: err.detail, aosp });
      throw err;
    }
  }

  return {
    verify(certs, now, onUntrusted) {
      if (certs.length === 0) fail('certificateChain is empty');
      if (certs.length > MAX_CHAIN_LENGTH)
        fail(`certificateChain holds ${certs.length} certificates: at most ${MAX_CHAIN_LENGTH}`);
      for (let i = 1; i < certs.length; i++) {
        if (certs[i]!.extensions.has(KEY_DESCRIPTION_OID)) {
          fail(
            `certificateChain[${i}] carries the key description too: the extension belongs in the leaf only (an ATTEST_KEY chain?)`,
          );
        }
      }
      const lone = certs.length === 1;
      const issuing = lone ? certs : certs.slice(1);
      // a lone leaf is its own issuing part, but its failures name other indexes
      const issuingDigest = digest(issuing, lone ? 'lone' : 'issuing');
      const chainDigest = lone ? issuingDigest : digest(certs, 'chain');
      const known = failed.get(issuingDigest) ?? failed.get(chainDigest);
      if (known) {
        if (known.aosp) onUntrusted?.('aosp-software');
        fail(known.detail);
      }
      const onAosp = () => onUntrusted?.('aosp-software');

      // the leaf's link, before any signature: its issuer's key and its algorithm
      const leafKey = lone ? null : remembering(chainDigest, () => leafIssuerKey(certs));

      let root = verified.get(issuingDigest);
      if (!root) {
        root = remembering(issuingDigest, (aosp) =>
          anchor(issuing, lone ? 0 : 1, () => {
            aosp();
            onAosp();
          }),
        );
        verified.set(issuingDigest, root);
      }
      if (leafKey) {
        remembering(chainDigest, () => {
          // its name after the root (an unknown root is the news, as Google's verifier says)
          if (!certs[0]!.issuer.equals(certs[1]!.subject))
            fail("certificateChain[0]'s issuer name is not certificateChain[1]'s subject name");
          if (!signs(certs[0]!, leafKey))
            fail("certificateChain[0]'s signature does not verify with certificateChain[1]'s key");
        });
      }

      const remote = certs.slice(1).some((c) => c.extensions.has(PROVISIONING_INFO_OID));
      for (let i = 1; i < certs.length; i++) {
        const c = certs[i]!;
        // factory keys cannot be rotated, so an expired factory issuer is tolerated (as Google's
        // verifier does); one not yet valid is not, on either kind of chain
        if (now < c.notBefore || (remote && now > c.notAfter)) {
          fail(
            remote
              ? `certificateChain[${i}] is valid from ${iso(c.notBefore)} to ${iso(c.notAfter)}, not at ${iso(now)} (a remotely provisioned chain: its issuing certificates must be current)`
              : `certificateChain[${i}] is valid only from ${iso(c.notBefore)}, after ${iso(now)} (an issuing certificate not yet valid)`,
          );
        }
      }
      const top = certs[certs.length - 1]!;
      return {
        root,
        provisioning: remote ? 'remote' : 'factory',
        rootIncluded: root.spki.equals(top.spki),
      };
    },
  };
}

const outOfProfile = (what: string, key: string) =>
  `${what}'s key is ${key}: the issuing keys of attestation chains are EC P-256 or P-384, or RSA of 2048 to 4096 bits with exponent 65537`;

const AOSP =
  'the chain ends at the AOSP software attestation root: the key was made by Keystore in software (an emulator, or a device without secure hardware), not by a TEE or StrongBox';

function digest(certs: readonly AttestationCertificate[], tag: string): string {
  const hash = createHash('sha256').update(tag);
  for (const c of certs) hash.update(c.der);
  return hash.digest('hex');
}

function signs(cert: AttestationCertificate, key: KeyObject): boolean {
  try {
    return cert.cert.verify(key);
  } catch {
    return false; // a key OpenSSL cannot use with this certificate
  }
}

function iso(d: Date): string {
  return d.toISOString().replace('.000Z', 'Z');
}
