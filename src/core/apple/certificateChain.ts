/**
 * The App Attest certificate chain: `x5c[0]` (leaf, the device key) is signed by `x5c[1]` (an
 * Apple intermediate), which is signed by a configured trust root. The intermediate comes only
 * from `x5c` and the root only from configuration: a root sent inside `x5c` is never trusted.
 *
 * Verified intermediates are cached by the SHA-256 of their DER, so a warm registration checks
 * one signature (the leaf's). Only certificates whose signature verified enter the cache, and
 * validity periods (root, intermediate, leaf) are checked at the given instant on every call.
 */
import { createHash, type KeyObject, X509Certificate } from 'node:crypto';
import { Rejection } from '../reasons.js';
import { LruCache } from '../lruCache.js';

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
}

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

  function intermediateFor(der: Uint8Array): VerifiedIntermediate {
    const cacheKey = createHash('sha256').update(der).digest('hex');
    const cached = intermediates.get(cacheKey);
    if (cached) return cached;

    const cert = parseCertificate(der, 'intermediate (x5c[1])');
    if (anchors.some((a) => a.der.equals(der))) {
      fail('x5c[1] is a trust root itself; App Attest sends an intermediate there');
    }
    if (!cert.ca)
      fail(
        'x5c[1] is not a CA certificate (missing intermediate, or leaf and intermediate swapped)',
      );
    const root = anchors.find((a) => cert.checkIssued(a.cert) && signedBy(cert, a.publicKey));
    if (!root) fail('the intermediate is not signed by a configured trust root');
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
      const intermediate = intermediateFor(x5c[1]!);

      checkValidity(intermediate.root.validity, now, 'the trust root');
      checkValidity(intermediate.validity, now, 'the intermediate certificate');
      checkValidity(certificateValidity(leaf), now, 'the leaf certificate');

      // checkIssued compares names and key identifiers; the signature check is what binds them
      if (!leaf.checkIssued(intermediate.cert) || !signedBy(leaf, intermediate.publicKey)) {
        fail('the leaf is not signed by the intermediate');
      }
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

function signedBy(cert: X509Certificate, issuerKey: KeyObject): boolean {
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
