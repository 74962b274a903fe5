import { NAME_OIDS, type AttestationCertificate } from './attestationCertificate.js';

/** KeyMint's KeyOrigin values (hardware/interfaces/security/keymint KeyOrigin.aidl). */
export const KEY_ORIGIN_GENERATED = 0;
export const ORIGINS: Readonly<Record<number, string>> = {
  0: 'GENERATED',
  1: 'DERIVED',
  2: 'IMPORTED',
  3: 'RESERVED',
  4: 'SECURELY_IMPORTED',
};

const HEX_SERIAL = /^[0-9a-f]{1,64}$/i;

/** The serial numbers a certificate is known by: its own, and its subject's serialNumber if hex. */
export function serialsOf(cert: AttestationCertificate): [bigint, string][] {
  const out: [bigint, string][] = [[cert.serial, 'serial']];
  for (const a of cert.subjectAttributes) {
    if (a.oid !== NAME_OIDS.serialNumber || !HEX_SERIAL.test(a.value)) continue;
    const serial = BigInt(`0x${a.value}`);
    if (serial !== cert.serial) out.push([serial, 'subject serialNumber']);
  }
  return out;
}
