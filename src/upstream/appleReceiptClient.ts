/**
 * Apple's App Attest data endpoint ("Assessing fraud risk"): POST the latest receipt as base64
 * text, with `Authorization: <JWT>` (ES256, header `kid` the DeviceCheck key ID, `iss` the team
 * ID, `iat` now), and get a fresh receipt back as base64 text. Every answer is a value here; the
 * refresher decides what each one means for the stored receipt.
 */
import { SignJWT } from 'jose';
import type { AppleEnvironment } from '../core/apple/appleTokenDetails.js';
import { decodeBase64 } from '../core/base64.js';
import { readBoundedText } from '../readBoundedBody.js';

/**
 * The most of Apple's answer read: a few times the largest real one. Measured: the receipts of
 * the real captures (test/fixtures/apple-receipts, receiptLength) are 3,677 to 3,977 bytes, so
 * Apple's base64 answer is at most 5,304 characters; 16 KiB is three times that, room for line
 * breaks and a longer signing chain. Anything longer is cut off while it streams, never read
 * whole (a network error: the stored receipt is kept and refreshed again later).
 */
export const MAX_ANSWER_BYTES = 16 * 1024;

/** A DeviceCheck key, opened. */
export interface DeviceCheckCredential {
  teamId: string;
  keyId: string;
  privateKey: import('node:crypto').KeyObject;
}

/** Apple's answer to one refresh. */
export type ReceiptRefreshAnswer =
  | { outcome: 'refreshed'; receipt: Uint8Array }
  /** 304: Apple has nothing newer yet (before the receipt's not-before time) */
  | { outcome: 'not_modified' }
  /** 404: Apple knows no such receipt; it cannot be refreshed again */
  | { outcome: 'not_found' }
  /** 401 / 403: the DeviceCheck key (or the JWT made with it) was refused */
  | { outcome: 'unauthorized'; status: number }
  | { outcome: 'rate_limited'; retryAfterSeconds: number | null }
  | { outcome: 'server_error'; status: number }
  /** 400 and any other status: Apple refused the request itself */
  | { outcome: 'bad_request'; status: number }
  /** no usable answer: timeout, connection refused, a 200 whose body is not base64 */
  | { outcome: 'network_error'; problem: string };

export interface ReceiptClientOptions {
  developmentUrl: string;
  productionUrl: string;
  timeoutMs: number;
  /** the fetch to use (tests); default the global one */
  fetch?: typeof fetch;
}

/** The JWT of one request: ES256, kid, iss, iat (Apple accepts tokens up to an hour old). */
export async function deviceCheckJwt(
  credential: DeviceCheckCredential,
  now: Date,
): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: credential.keyId })
    .setIssuer(credential.teamId)
    .setIssuedAt(Math.floor(now.getTime() / 1000))
    .sign(credential.privateKey);
}

/**
 * Builds the client.
 * @param options the two endpoints (ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT / _PRODUCTION) and the bound on one request
 */
export function createReceiptClient(options: ReceiptClientOptions) {
  const doFetch = options.fetch ?? fetch;
  return {
    /**
     * Trades `receipt` for a fresh one at the endpoint of `environment`.
     * @param request the key's environment, its latest receipt, the team's credential and the instant for the JWT
     */
    async refresh(request: {
      environment: AppleEnvironment;
      receipt: Uint8Array;
      credential: DeviceCheckCredential;
      now: Date;
    }): Promise<ReceiptRefreshAnswer> {
      const url =
        request.environment === 'Development' ? options.developmentUrl : options.productionUrl;
      const jwt = await deviceCheckJwt(request.credential, request.now);
      let response: Response;
      let text = '';
      try {
        response = await doFetch(url, {
          method: 'POST',
          headers: { Authorization: jwt, 'Content-Type': 'text/plain' },
          body: Buffer.from(request.receipt).toString('base64'),
          signal: AbortSignal.timeout(options.timeoutMs),
          redirect: 'error',
        });
        // only a 200's body is used; any other answer's body is left unread
        if (response.status === 200) text = await readBoundedText(response, MAX_ANSWER_BYTES);
        else await response.body?.cancel().catch(() => {});
      } catch (err) {
        return { outcome: 'network_error', problem: describe(err) };
      }
      const status = response.status;
      if (status === 200) {
        const receipt = decodeBase64(text.replace(/\s+/g, ''));
        return receipt && receipt.length > 0
          ? { outcome: 'refreshed', receipt }
          : { outcome: 'network_error', problem: 'a 200 answer whose body is not base64' };
      }
      if (status === 304) return { outcome: 'not_modified' };
      if (status === 404) return { outcome: 'not_found' };
      if (status === 401 || status === 403) return { outcome: 'unauthorized', status };
      if (status === 429) {
        const after = Number(response.headers.get('retry-after'));
        return {
          outcome: 'rate_limited',
          retryAfterSeconds: Number.isFinite(after) && after > 0 ? after : null,
        };
      }
      if (status >= 500) return { outcome: 'server_error', status };
      return { outcome: 'bad_request', status };
    },
  };
}

export type ReceiptClient = ReturnType<typeof createReceiptClient>;

function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return (e?.cause?.code ?? e?.message ?? String(err)).slice(0, 200);
}
