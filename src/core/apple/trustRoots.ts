import { X509Certificate } from 'node:crypto';
import { APPLE_APP_ATTESTATION_ROOT_CA_PEM } from './appleRoot.js';

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

/**
 * Parses a PEM file of App Attest trust roots (one or more CA certificates). Runs once at start
 * (`ATTEST_APPLE_ROOT_CA`), so it throws on anything doubtful rather than trusting less or more
 * than the operator meant: no certificate, a block that is not a certificate, an unreadable
 * certificate, or one that is not a CA.
 * @param pem the PEM text
 */
export function parseTrustRoots(pem: string): X509Certificate[] {
  const roots: X509Certificate[] = [];
  for (const match of pem.matchAll(PEM_BLOCK)) {
    const label = match[1];
    if (label !== 'CERTIFICATE')
      throw new Error(`trust roots: a "${label}" PEM block is not a certificate`);
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(match[0]);
    } catch (err) {
      throw new Error(
        `trust roots: certificate ${roots.length + 1} is unreadable (${(err as Error).message})`,
      );
    }
    if (!cert.ca)
      throw new Error(
        `trust roots: "${cert.subject.replace(/\n/g, ', ')}" is not a CA certificate`,
      );
    roots.push(cert);
  }
  if (roots.length === 0) throw new Error('trust roots: no PEM certificate found');
  // a block cut short (BEGIN without its END) would otherwise be skipped without a word
  if ((pem.match(/-----BEGIN /g) ?? []).length !== roots.length)
    throw new Error('trust roots: a PEM block is incomplete');
  return roots;
}

let appleRoots: readonly X509Certificate[] | undefined;

/** The built-in Apple App Attestation Root CA, parsed once. */
export function defaultAppleRoots(): readonly X509Certificate[] {
  appleRoots ??= Object.freeze(parseTrustRoots(APPLE_APP_ATTESTATION_ROOT_CA_PEM));
  return appleRoots;
}

/**
 * The roots a test-mode key trusts: the deployment's roots plus its development CA (`attest dev
 * init`), when there is one.
 * @param roots the live roots
 * @param devRoot the development CA root (DER), or null
 */
export function withDevelopmentRoot(
  roots: readonly X509Certificate[],
  devRoot: Uint8Array | null,
): readonly X509Certificate[] {
  return devRoot ? [...roots, new X509Certificate(devRoot)] : roots;
}
