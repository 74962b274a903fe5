/**
 * The real App Attest receipts: each attestation in test/fixtures/apple carries one, and the
 * veehaitch captures also hold refreshed `RECEIPT`-type receipts. test/fixtures/apple-receipts
 * has, per capture, what an independent check (python cryptography + asn1crypto, openssl cms)
 * found in its receipt.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAttestationObject } from '../../src/core/apple/verifyAttestation.js';

const APPLE = fileURLToPath(new URL('../fixtures/apple/', import.meta.url));
const RECEIPTS = fileURLToPath(new URL('../fixtures/apple-receipts/', import.meta.url));

interface TimeField {
  parsed: string;
}

/** The independent check's findings for one capture (the fields the tests compare). */
export interface ReceiptCheck {
  id: string;
  verifyAt: string;
  fileAppId: string;
  receiptSha256: string;
  verdict: { validAtVerifyAt: 'yes' | 'no'; authenticAtReceiptCreationTime: 'yes' | 'no' };
  fields: {
    appId: string;
    receiptType: string;
    attestedPublicKey: { sha256: string; equalsX5c0: boolean };
    creationTime: TimeField;
    expirationTime: TimeField | null;
    notBefore: TimeField | null;
    riskMetric: { value: number } | null;
    unknownAttributes: { type: number; utf8: string }[];
  };
  additionalReceiptsInVector?: {
    id: string;
    sameBytesAsAttestationReceipt?: boolean;
    receiptSha256?: string;
    receiptType?: string;
    creationTime?: TimeField;
    notBefore?: TimeField;
    expirationTime?: TimeField;
    riskMetric?: { value: number };
    signatureOk?: boolean;
    chainOkAtOwnCreationTime?: boolean;
  }[];
}

/** A refreshed receipt kept in a capture, with the check's findings. */
export interface RefreshedReceipt {
  id: string;
  bytes: Buffer;
  check: NonNullable<ReceiptCheck['additionalReceiptsInVector']>[number];
}

/** One capture's receipt material. */
export interface ReceiptVector {
  name: string;
  appId: string;
  environment: 'development' | 'production';
  keyId: Buffer;
  attestation: Buffer;
  /** the bytes the capture's device appended to authData for the nonce */
  clientDataHash: Buffer;
  receipt: Buffer;
  leaf: Uint8Array;
  check: ReceiptCheck;
  refreshed: RefreshedReceipt[];
}

/** Every capture with a receipt, in file order. */
export function loadReceiptVectors(): ReceiptVector[] {
  return readdirSync(RECEIPTS)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => {
      const check = JSON.parse(readFileSync(RECEIPTS + name, 'utf8')) as ReceiptCheck;
      const vector = JSON.parse(readFileSync(APPLE + name, 'utf8')) as {
        appId: string;
        environment: 'development' | 'production';
        keyId: string;
        attestation: string;
        clientDataHash: string;
        receipts?: { id: string; receiptBase64: string }[];
      };
      const attestation = Buffer.from(vector.attestation, 'base64');
      const parsed = parseAttestationObject(attestation);
      const refreshed = (vector.receipts ?? []).flatMap((r) => {
        const meta = check.additionalReceiptsInVector?.find((m) => m.id === r.id);
        return meta && !meta.sameBytesAsAttestationReceipt
          ? [{ id: r.id, bytes: Buffer.from(r.receiptBase64, 'base64'), check: meta }]
          : [];
      });
      return {
        name: name.replace(/\.json$/, ''),
        appId: vector.appId,
        environment: vector.environment,
        keyId: Buffer.from(vector.keyId, 'base64'),
        attestation,
        clientDataHash: Buffer.from(vector.clientDataHash, 'base64'),
        receipt: Buffer.from(parsed.receipt!),
        leaf: parsed.x5c[0]!,
        check,
        refreshed,
      };
    });
}

/** `iso` plus `seconds`. */
export const after = (iso: string, seconds: number) =>
  new Date(new Date(iso).getTime() + seconds * 1000);
