/**
 * Printing App Attest receipt facts (verify-file, `attest apple receipts show`) and reading a
 * receipt file given alone (`verify-file --receipt FILE`).
 */
import type { ReceiptSummary } from '../core/apple/tokenReceipt.js';
import { readCliFileSync } from './inputFiles.js';
import { decodeBase64 } from '../core/base64.js';
import { usageError } from './errors.js';
import { safeText } from './terminalText.js';

/** A receipt is about 4 KiB; its base64 text with line breaks fits well within this. */
const RECEIPT_FILE_MAX_BYTES = 64 * 1024;

/**
 * The receipt bytes in a file: DER/BER as Apple sends it (first byte 0x30), or its base64 text.
 * @param path the file
 * @throws CliError (exit 2) when the file cannot be read or holds neither
 */
export function readReceiptFile(path: string): Uint8Array {
  const raw = readCliFileSync(path, {
    maxBytes: RECEIPT_FILE_MAX_BYTES,
    what: '--receipt',
    tooLarge: (size) =>
      `${path} is ${size}, more than a receipt (${RECEIPT_FILE_MAX_BYTES / 1024} KiB at most)`,
  });
  if (raw.length === 0) throw usageError(`${path} is empty: give a file holding the receipt`);
  if (raw[0] === 0x30) return new Uint8Array(raw);
  const bytes = decodeBase64(raw.toString('latin1').replace(/\s+/g, ''));
  if (!bytes || bytes.length === 0)
    throw usageError(
      `${path} is neither a receipt (DER or BER, first byte 0x30) nor its base64 text`,
    );
  return bytes;
}

/**
 * The receipt in one line for a terminal (Apple's strings escaped).
 * @param r the receipt's summary
 */
export function receiptLine(r: ReceiptSummary): string {
  const facts = [
    r.type ?? 'type unknown',
    r.appId ? `app ${r.appId}` : null,
    r.environment,
    r.creationTime ? `created ${r.creationTime}` : null,
    r.notBefore ? `refreshable from ${r.notBefore}` : null,
    r.expirationTime ? `expires ${r.expirationTime}` : null,
    `risk metric ${r.riskMetric ?? '-'}`,
  ].filter((f): f is string => f !== null);
  // no receipt is not a bad one: only an app with --require-receipt refuses it (apple_receipt_invalid)
  if (!r.present)
    return 'receipt: none (the attestation carries no receipt; an app that sets --require-receipt refuses it)';
  return safeText(
    `receipt: ${r.valid ? 'valid' : 'INVALID'}${r.type || r.creationTime ? ` (${facts.join(', ')})` : ''}${r.problem ? `: ${r.problem}` : ''}`,
  );
}
