/**
 * Google's attestation status list (`{"entries": {"<serial hex>": {"status", "reason"}}}`):
 * parsed once into a map by serial number as an integer, so `0a` and `a` name one certificate.
 */
import type { RevocationEntry, RevocationList } from '../ports.js';
import { REVOCATION_SNAPSHOT, REVOCATION_SNAPSHOT_DATE } from './revocationSnapshot.js';

/** Statuses that reject a chain (check 3). */
export const REJECTING_STATUSES: ReadonlySet<string> = new Set(['REVOKED', 'SUSPENDED']);

const HEX = /^[0-9a-fA-F]{1,128}$/;

/** A status list over `entries` (serial hex -> entry). */
export function revocationListOf(entries: ReadonlyMap<bigint, RevocationEntry>): RevocationList {
  return { lookup: (serial) => entries.get(serial), size: entries.size };
}

/**
 * Reads a status list document. Throws an `Error` naming the first defect: an operator's file or
 * Google's answer that is not the documented shape must not replace a good list.
 * @param document the parsed JSON
 * @returns the list and its entries, for storing
 */
export function parseRevocationDocument(document: unknown): {
  list: RevocationList;
  entries: Map<bigint, RevocationEntry>;
} {
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw new Error('the status list is not a JSON object');
  const raw = (document as { entries?: unknown }).entries;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new Error('the status list has no "entries" object');
  const entries = new Map<bigint, RevocationEntry>();
  for (const [serial, value] of Object.entries(raw)) {
    if (!HEX.test(serial)) throw new Error(`entry "${serial.slice(0, 40)}" is not a hex serial`);
    const v = value as { status?: unknown; reason?: unknown };
    if (typeof v !== 'object' || v === null || typeof v.status !== 'string')
      throw new Error(`entry ${serial} has no "status" text`);
    if (v.reason !== undefined && typeof v.reason !== 'string')
      throw new Error(`entry ${serial} has a "reason" that is not text`);
    entries.set(BigInt(`0x${serial}`), {
      status: v.status,
      ...(typeof v.reason === 'string' ? { reason: v.reason } : {}),
    });
  }
  return { list: revocationListOf(entries), entries };
}

/** The status list document for stored entries (serials as Google writes them). */
export function revocationDocument(entries: ReadonlyMap<bigint, RevocationEntry>): {
  entries: Record<string, RevocationEntry>;
} {
  const out: Record<string, RevocationEntry> = {};
  for (const [serial, entry] of entries) out[serial.toString(16)] = entry;
  return { entries: out };
}

let snapshot: { list: RevocationList; entries: Map<bigint, RevocationEntry> } | undefined;

/** The status list shipped with this build (`REVOCATION_SNAPSHOT_DATE`), parsed once. */
export function shippedRevocations(): {
  list: RevocationList;
  entries: ReadonlyMap<bigint, RevocationEntry>;
  date: string;
} {
  if (!snapshot) {
    const entries = new Map<bigint, RevocationEntry>();
    for (const [serial, value] of Object.entries(REVOCATION_SNAPSHOT)) {
      const [status, reason] = value.split(',');
      entries.set(BigInt(`0x${serial}`), { status: status!, ...(reason ? { reason } : {}) });
    }
    snapshot = { list: revocationListOf(entries), entries };
  }
  return { ...snapshot, date: REVOCATION_SNAPSHOT_DATE };
}
