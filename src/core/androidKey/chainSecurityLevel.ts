/**
 * The security level a chain's Google-signed certificates claim in their subjects, read as
 * Google's verifier reads it (android/keyattestation `KeyAttestationCertPath.securityLevel`, held
 * by its `SecurityLevelConstraint.MATCHES_CERTIFICATE`). A key description is written by the
 * TEE or StrongBox itself; the subjects above it are written by Google (remote provisioning) or
 * at the factory. A compromised TEE can write "StrongBox" into its key descriptions, but not into
 * the certificate Google issued it, which says "TEE".
 *
 * - The issuing certificate just below the root decides how the chain was provisioned: a subject
 *   with a serialNumber attribute is a factory intermediate; "CN=Droid CA2, O=Google LLC" is
 *   Google's remote key provisioning; anything else is unknown (no claim).
 * - Remotely provisioned: the attestation certificate's (certificateChain[1]) organization is
 *   the level: "TEE", "StrongBox", anything else Software.
 * - Factory: only StrongBox chains are marked, by "StrongBox" in the subject of the attestation
 *   certificate or of that intermediate (the rule of Android's compatibility tests); otherwise
 *   no claim.
 */
import type { AndroidSecurityLevel } from './androidKeyTokenDetails.js';
import { NAME_OIDS, type AttestationCertificate } from './attestationCertificate.js';

export type ChainProvisioning = 'factory' | 'remote' | 'unknown';

export interface ChainLevelClaim {
  provisioning: ChainProvisioning;
  /** the level the subjects claim; null: no claim (older and non-StrongBox factory chains) */
  level: AndroidSecurityLevel | null;
}

const attribute = (cert: AttestationCertificate, oid: string) =>
  cert.subjectAttributes.find((a) => a.oid === oid)?.value;

/**
 * What the chain's subjects claim.
 * @param certs the verified chain, leaf first
 * @param rootIncluded whether the top certificate is the root's own (else the root was left out)
 */
export function chainLevelClaim(
  certs: readonly AttestationCertificate[],
  rootIncluded: boolean,
): ChainLevelClaim {
  // the certificates below the root: the leaf, the attestation certificate, ..., the intermediate
  const below = rootIncluded ? certs.slice(0, -1) : certs;
  if (below.length < 2) return { provisioning: 'unknown', level: null };
  const attestation = below[1]!;
  const intermediate = below[below.length - 1]!;
  if (attribute(intermediate, NAME_OIDS.serialNumber) !== undefined) {
    const marked = [attestation, intermediate].some((c) =>
      c.subjectAttributes.some((a) => a.value.toLowerCase().includes('strongbox')),
    );
    return { provisioning: 'factory', level: marked ? 'StrongBox' : null };
  }
  if (
    attribute(intermediate, NAME_OIDS.commonName) === 'Droid CA2' &&
    attribute(intermediate, NAME_OIDS.organization) === 'Google LLC'
  ) {
    const organization = attribute(attestation, NAME_OIDS.organization);
    const level: AndroidSecurityLevel =
      organization === 'TEE'
        ? 'TrustedEnvironment'
        : organization === 'StrongBox'
          ? 'StrongBox'
          : 'Software';
    return { provisioning: 'remote', level };
  }
  return { provisioning: 'unknown', level: null };
}

/**
 * Why the key description's levels do not fit the chain's claim, or null when they do. Both levels
 * must be one (Google's NOT_SOFTWARE constraint compares them), and KeyMint's must match the
 * claim: StrongBox only under a StrongBox claim; TrustedEnvironment under a TEE claim or none.
 * Software levels are left to the security level check, which refuses them.
 */
export function levelClaimProblem(
  attestationLevel: AndroidSecurityLevel,
  keyMintLevel: AndroidSecurityLevel,
  claim: ChainLevelClaim,
): string | null {
  if (attestationLevel === 'Software' || keyMintLevel === 'Software') return null;
  if (attestationLevel !== keyMintLevel)
    return `the key description says attestation ${attestationLevel} but KeyMint ${keyMintLevel}: one secure element makes and attests a key`;
  const claimed = claim.level;
  const fits =
    keyMintLevel === 'StrongBox'
      ? claimed === 'StrongBox'
      : claimed === null || claimed === 'TrustedEnvironment';
  if (fits) return null;
  return `the key description says ${keyMintLevel}, but the ${claim.provisioning === 'remote' ? 'remotely provisioned' : claim.provisioning} chain's certificate subjects say ${claimed ?? 'nothing of StrongBox'}${keyMintLevel === 'StrongBox' ? ' (a TEE claiming StrongBox?)' : ''}`;
}
