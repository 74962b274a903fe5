/**
 * The App Attest certificate chain: `x5c[0]` (leaf, the device key) is signed by `x5c[1]` (an
 * Apple intermediate), which is signed by a configured trust root. The intermediate comes only
 * from `x5c` and the root only from configuration: a root sent inside `x5c` is never trusted.
 *
 * Verified intermediates are cached by the SHA-256 of their DER, so a warm registration checks
 * one signature (the leaf's). Only certificates whose signature verified enter the cache, and
 * validity periods (root, intermediate, leaf) are checked at the given instant on every call.
 *
 * Every cost is bounded before a signature is checked: each certificate's size, its key (EC P-256
 * or P-384, RSA 2048-4096 with e = 65537), and the root, found by name and key identifier (no
 * signature) before the intermediate's signature is checked against it. An intermediate or a leaf
 * whose signature failed is remembered by its bytes, so its replay costs no signature check.
 */
import { createHash, type KeyObject, X509Certificate } from 'node:crypto';
import { Rejection } from '../reasons.js';
import { LruCache } from '../lruCache.js';
import { keyProfileProblem } from './keyProfile.js';

export interface CertificateValidity {
  notBefore: Date;
  notAfter: Date;
}

/** Verifies App Attest `x5c` chains against fixed trust roots. */
export interface CertificateChainVerifier {
  readonly roots: readonly X509Certificate[];
  /**
   * Verifies `x5c` (leaf first) at `now` and returns the leaf.
   * Throws `Rejection('apple_chain_invalid')` naming the first defect.
   */
  verify(x5c: readonly Uint8Array[], now: Date): X509Certificate;
}

export interface CertificateChainOptions {
  /** how many verified intermediates to remember (Apple has very few); default 64 */
  intermediateCacheSize?: number;
  /** called before every signature check (tests count them: each input's cost is bounded) */
  onSignatureCheck?: () => void;
}

// Apple's leaf and intermediate are under 1 KiB each; an RSA-4096 CA certificate is under 2 KiB
const MAX_CERTIFICATE_BYTES = 4096;

interface Anchor {
  cert: X509Certificate;
  der: Buffer;
  publicKey: KeyObject;
  validity: CertificateValidity;
}

interface VerifiedIntermediate {
  cert: X509Certificate;
  publicKey: KeyObject;
  validity: CertificateValidity;
  root: Anchor;
}

/**
 * Builds a chain verifier over `roots`. Validates the roots once, here, not per request.
 * @param roots trust anchors (by default `defaultAppleRoots()`); at least one CA certificate
 * @param options cache size
 */
export function createCertificateChainVerifier(
  roots: readonly X509Certificate[],
  options: CertificateChainOptions = {},
): CertificateChainVerifier {
  if (roots.length === 0) throw new Error('App Attest needs at least one trust root');
  const anchors: Anchor[] = roots.map((cert) => {
    if (!cert.ca) throw new Error(`trust root "${oneLine(cert.subject)}" is not a CA certificate`);
    return { cert, der: cert.raw, publicKey: cert.publicKey, validity: certificateValidity(cert) };
  });
  const intermediates = new LruCache<string, VerifiedIntermediate>(
    options.intermediateCacheSize ?? 64,
  );
  // what failed a signature check, by the SHA-256 of the certificate (and of its issuer for leaves)
  const failures = new LruCache<string, string>(256);
  const countSignature = options.onSignatureCheck ?? (() => {});
  const signedBy = (cert: X509Certificate, issuerKey: KeyObject) => {
    countSignature();
    return verifies(cert, issuerKey);
  };
  const failRemembered = (cacheKey: string, detail: string): never => {
    failures.set(cacheKey, detail);
    return fail(detail);
  };

  function intermediateFor(der: Uint8Array): VerifiedIntermediate {
    const cacheKey = createHash('sha256').update(der).digest('hex');
    const cached = intermediates.get(cacheKey);
    if (cached) return cached;
    const failed = failures.get(cacheKey);
    if (failed !== undefined) fail(failed);

    const cert = parseCertificate(der, 'intermediate (x5c[1])');
    if (anchors.some((a) => a.der.equals(der))) {
      fail('x5c[1] is a trust root itself; App Attest sends an intermediate there');
    }
    if (!cert.ca)
      fail(
        'x5c[1] is not a CA certificate (missing intermediate, or leaf and intermediate swapped)',
      );
    const keyProblem = keyProfileProblem(cert.publicKey);
    if (keyProblem) fail(`the intermediate has ${keyProblem}`);
    // the root by name and key identifier (OpenSSL's issuer check, no signature) before its signature
    const named = anchors.filter((a) => cert.checkIssued(a.cert));
    if (named.length === 0)
      fail(
        'the intermediate is not signed by a configured trust root (none is named as its issuer)',
      );
    const root = named.find((a) => signedBy(cert, a.publicKey));
    if (!root)
      return failRemembered(cacheKey, 'the intermediate is not signed by a configured trust root');
    const verified: VerifiedIntermediate = {
      cert,
      publicKey: cert.publicKey,
      validity: certificateValidity(cert),
      root,
    };
    intermediates.set(cacheKey, verified);
    return verified;
  }

  return {
    roots,
    verify(x5c, now) {
      if (x5c.length < 2)
        fail(`x5c holds ${x5c.length} certificate(s): the intermediate is missing`);
      if (x5c.length > 2)
        fail(
          `x5c holds ${x5c.length} certificates; App Attest sends exactly a leaf and one intermediate`,
        );
      const leaf = parseCertificate(x5c[0]!, 'leaf (x5c[0])');
      const leafKeyProblem = keyProfileProblem(leaf.publicKey);
      if (leafKeyProblem) fail(`the leaf has ${leafKeyProblem}`);
      const intermediate = intermediateFor(x5c[1]!);

      checkValidity(intermediate.root.validity, now, 'the trust root');
      checkValidity(intermediate.validity, now, 'the intermediate certificate');
      checkValidity(certificateValidity(leaf), now, 'the leaf certificate');

      // checkIssued compares names and key identifiers; the signature check is what binds them
      if (!leaf.checkIssued(intermediate.cert)) fail('the leaf is not signed by the intermediate');
      const leafKey = `${createHash('sha256').update(x5c[0]!).digest('hex')}:${intermediate.cert.fingerprint256}`;
      const failed = failures.get(leafKey);
      if (failed !== undefined) fail(failed);
      if (!signedBy(leaf, intermediate.publicKey))
        failRemembered(leafKey, 'the leaf is not signed by the intermediate');
      return leaf;
    },
  };
}

/**
 * A certificate's validity period as dates.
 * @param cert a parsed certificate
 */
export function certificateValidity(cert: X509Certificate): CertificateValidity {
  // Node 20 exposes only the text form ("Mar 18 18:32:53 2020 GMT"), which Date reads
  const notBefore = new Date(cert.validFrom);
  const notAfter = new Date(cert.validTo);
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime())) {
    throw new Rejection('apple_chain_invalid', 'a certificate has an unreadable validity period');
  }
  return { notBefore, notAfter };
}

function checkValidity(validity: CertificateValidity, now: Date, what: string): void {
  if (now.getTime() < validity.notBefore.getTime()) {
    fail(
      `${what} is not valid before ${validity.notBefore.toISOString()} (checked at ${now.toISOString()})`,
    );
  }
  if (now.getTime() > validity.notAfter.getTime()) {
    fail(`${what} expired at ${validity.notAfter.toISOString()} (checked at ${now.toISOString()})`);
  }
}

function parseCertificate(der: Uint8Array, what: string): X509Certificate {
  if (der.length > MAX_CERTIFICATE_BYTES)
    fail(`the ${what} is ${der.length} bytes, more than ${MAX_CERTIFICATE_BYTES}`);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(der);
  } catch {
    return fail(`the ${what} is not a readable X.509 certificate`);
  }
  // Node reads PEM before DER, and OpenSSL's PEM reader skips whatever precedes a BEGIN line; DER
  // reading ignores bytes after the certificate. Either way OpenSSL would verify other bytes than
  // the ones the rest of the checks read (the nonce extension): only an exact DER certificate passes.
  if (!Buffer.from(der.buffer, der.byteOffset, der.byteLength).equals(cert.raw)) {
    fail(`the ${what} is not exactly one DER certificate (PEM text, or bytes around it)`);
  }
  return cert;
}

function verifies(cert: X509Certificate, issuerKey: KeyObject): boolean {
  try {
    return cert.verify(issuerKey);
  } catch {
    return false;
  }
}

function fail(detail: string): never {
  throw new Rejection('apple_chain_invalid', detail);
}

function oneLine(name: string): string {
  return name.replace(/\n/g, ', ');
}
