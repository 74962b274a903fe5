/**
 * Reading an attestation without verifying it, for `verify-file`: when a check fails, these facts
 * let it try the usual integration mistakes (raw nonce instead of its hash, wrong environment,
 * wrong App ID, a capture verified after its leaf expired) and name the one that fits.
 * Nothing here may decide whether a token is accepted.
 */
import { X509Certificate } from 'node:crypto';
import type { AppleEnvironment } from './appleTokenDetails.js';
import { appAttestKeyId } from './appAttestKeyId.js';
import { environmentFromAaguid } from './appleEnvironment.js';
import type { AttestationAuthenticatorData } from './authenticatorData.js';
import { type CertificateValidity, certificateValidity } from './certificateChain.js';
import { appAttestNonce, readAttestedNonce } from './nonceExtension.js';
import { parseAttestationObject } from './verifyAttestation.js';

export interface AttestationInspection {
  authData: AttestationAuthenticatorData;
  /** certificates as sent, leaf first */
  x5c: Uint8Array[];
  /** the leaf's validity period; `null` when the leaf is unreadable */
  leafValidity: CertificateValidity | null;
  /** the 32-byte nonce in the leaf's extension; `null` when absent or unreadable */
  attestedNonce: Buffer | null;
  /** SHA-256 of the leaf key's point; `null` when the leaf or its key is unreadable */
  leafKeyId: Buffer | null;
  /** from the aaguid; `null` when it names neither environment */
  environment: AppleEnvironment | null;
}

/**
 * The claims of an attestation object, unverified. Throws `Rejection('apple_attestation_malformed')`
 * when the bytes are not an attestation object at all.
 * @param attestation the attestation object bytes
 */
export function inspectAttestation(attestation: Uint8Array): AttestationInspection {
  const parsed = parseAttestationObject(attestation);
  const leafDer = parsed.x5c[0]!;
  let leaf: X509Certificate | null = null;
  try {
    leaf = new X509Certificate(leafDer);
  } catch {
    leaf = null;
  }
  let leafValidity: CertificateValidity | null = null;
  try {
    leafValidity = leaf ? certificateValidity(leaf) : null;
  } catch {
    leafValidity = null;
  }
  return {
    authData: parsed.authData,
    x5c: parsed.x5c,
    leafValidity,
    attestedNonce: readAttestedNonce(leafDer),
    leafKeyId: leaf ? appAttestKeyId(leaf.publicKey) : null,
    environment: environmentFromAaguid(parsed.authData.aaguid),
  };
}

/**
 * Whether the attestation's nonce was made with `clientDataHash`: lets `verify-file` try
 * candidates (SHA-256 of the nonce, the raw nonce, its base64 text) and say which one the device used.
 * @param inspection from `inspectAttestation`
 * @param clientDataHash a candidate
 */
export function attestationMadeWith(
  inspection: AttestationInspection,
  clientDataHash: Uint8Array,
): boolean {
  if (!inspection.attestedNonce) return false;
  return inspection.attestedNonce.equals(appAttestNonce(inspection.authData.bytes, clientDataHash));
}
