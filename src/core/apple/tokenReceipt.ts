/**
 * The receipt an App Attest token carries, checked on its own (verify-file shows it whatever the
 * verdict on the token): the attestation's `attStmt.receipt` against its `x5c[0]`.
 */
import { isBytes, isMap } from '../cbor.js';
import { Rejection } from '../reasons.js';
import { parseEnvelope } from '../envelope.js';
import { parseAttestationObject } from './verifyAttestation.js';
import type { ReceiptVerdict, ReceiptVerifier } from './verifyReceipt.js';

/** A receipt verdict in the form verify-file and `attest apple receipts show` print. */
export interface ReceiptSummary {
  valid: boolean;
  /** false when the attestation carries no receipt at all (nothing was checked, nothing failed) */
  present: boolean;
  type: string | null;
  appId: string | null;
  environment: string | null;
  creationTime: string | null;
  notBefore: string | null;
  expirationTime: string | null;
  riskMetric: number | null;
  /** what failed, or null */
  problem: string | null;
}

/**
 * The summary of a verdict.
 * @param verdict what `ReceiptVerifier.verify` answered
 */
export function summarizeReceipt(verdict: ReceiptVerdict): ReceiptSummary {
  const f = verdict.facts;
  return {
    valid: verdict.valid,
    present: true,
    type: f?.type ?? null,
    appId: f?.appId ?? null,
    environment: f?.environment ?? null,
    creationTime: f?.creationTime.toISOString() ?? null,
    notBefore: f?.notBefore?.toISOString() ?? null,
    expirationTime: f?.expirationTime?.toISOString() ?? null,
    riskMetric: f?.riskMetric ?? null,
    problem: verdict.valid ? null : verdict.problem,
  };
}

/**
 * Checks the receipt inside an App Attest token's attestation, or says why there is none to
 * check (null: not an App Attest token with an attestation).
 * @param token the token bytes
 * @param receipts the receipt verifier
 * @param now the verification instant
 * @param appId the App ID the receipt must name, when the token's attestation was matched to one
 */
export async function checkTokenReceipt(
  token: Uint8Array,
  receipts: ReceiptVerifier,
  now: Date,
  appId: string | undefined,
): Promise<ReceiptSummary | null> {
  let attestation: Uint8Array;
  try {
    const envelope = parseEnvelope(token);
    if (envelope.service !== 'apple' || !isMap(envelope.evidence)) return null;
    const bytes = envelope.evidence.get('attestation');
    if (!isBytes(bytes)) return null;
    attestation = bytes;
  } catch (err) {
    if (err instanceof Rejection) return null;
    throw err;
  }
  let parsed: ReturnType<typeof parseAttestationObject>;
  try {
    parsed = parseAttestationObject(attestation);
  } catch (err) {
    if (err instanceof Rejection) return null;
    throw err;
  }
  if (!parsed.receipt || parsed.receipt.length === 0)
    return { ...EMPTY, present: false, problem: 'the attestation carries no receipt' };
  const verdict = await receipts.verify(
    parsed.receipt,
    { type: 'ATTEST', attestedCertificate: parsed.x5c[0]!, ...(appId ? { appId } : {}) },
    now,
  );
  return summarizeReceipt(verdict);
}

const EMPTY: ReceiptSummary = {
  valid: false,
  present: true,
  type: null,
  appId: null,
  environment: null,
  creationTime: null,
  notBefore: null,
  expirationTime: null,
  riskMetric: null,
  problem: null,
};
