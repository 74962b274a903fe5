/**
 * This deployment's own blocklist of issuing certificates (`attest allowlist android-issuers
 * block SERIAL`): a leaked keybox found by an operator (from `attest stats`' issuers, or a report)
 * is refused at once, without waiting for Google's attestation status list to name it.
 */
import { X509Certificate } from 'node:crypto';
import { Rejection } from '../reasons.js';

/** A serial as the blocklist keeps it: lowercase hex without leading zeros; null if not hex. */
export function normalizeSerial(text: string): string | null {
  const clean = text.trim().replace(/:/g, '').toLowerCase();
  if (!/^[0-9a-f]{1,64}$/.test(clean)) return null;
  return BigInt(`0x${clean}`).toString(16);
}

/**
 * Why a chain is refused by the blocklist, or undefined: its issuing certificate (the one above
 * the leaf) has a blocked serial.
 */
export function blockedIssuerProblem(
  chain: readonly Uint8Array[],
  blocked: ReadonlySet<string>,
): string | undefined {
  const der = chain[1];
  if (!der || blocked.size === 0) return undefined;
  const serial = normalizeSerial(new X509Certificate(Buffer.from(der)).serialNumber);
  if (serial === null || !blocked.has(serial)) return undefined;
  return `certificateChain[1] (the issuing certificate) has serial ${serial}, on this deployment's blocklist (attest allowlist android-issuers block)`;
}

/** Throws android_chain_revoked when the chain's issuing certificate is blocked (`blocked` absent: none). */
export async function checkIssuerBlocklist(
  chain: readonly Uint8Array[],
  blocked: (() => ReadonlySet<string> | Promise<ReadonlySet<string>>) | undefined,
): Promise<void> {
  const problem = blocked ? blockedIssuerProblem(chain, await blocked()) : undefined;
  if (problem) throw new Rejection('android_chain_revoked', problem);
}
