/**
 * Standard-request verdicts for tests, built from Google's documented example
 * (test/fixtures/google/verdicts.json, "standard-request") with this test's request hash,
 * package, signing certificate and time.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TEST_CERT_DIGEST, TEST_PACKAGE } from './googleFactory.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/google/verdicts.json', import.meta.url));

/** Every documented example, by name (a fresh copy on each call). */
export function verdictFixtures(): Record<string, Record<string, unknown>> {
  return JSON.parse(readFileSync(FIXTURES, 'utf8')) as Record<string, Record<string, unknown>>;
}

/** base64url(SHA-256(nonce)) without padding: what the device passes as requestHash. */
export function requestHashOf(nonce: Uint8Array): string {
  return createHash('sha256').update(nonce).digest('base64url');
}

export interface StandardPayloadOptions {
  nonce: Uint8Array;
  now: Date;
  packageName?: string;
  /** edits the payload (a deep copy) in place */
  edit?: (payload: StandardPayload) => void;
}

export interface StandardPayload {
  requestDetails: Record<string, unknown>;
  appIntegrity: Record<string, unknown>;
  deviceIntegrity: Record<string, unknown> & { recentDeviceActivity?: Record<string, unknown> };
  accountDetails?: Record<string, unknown>;
  environmentDetails?: Record<string, unknown> & { appAccessRiskVerdict?: Record<string, unknown> };
}

/**
 * Google's example standard-request verdict, bound to `nonce` and issued at `now`: recognized
 * app, DEVICE integrity, LICENSED, Play Protect NO_ISSUES, LEVEL_2 activity, and the example's
 * detected apps (KNOWN_INSTALLED, KNOWN_CAPTURING, UNKNOWN_INSTALLED, UNKNOWN_OVERLAYS).
 */
export function standardPayload(o: StandardPayloadOptions): StandardPayload {
  const payload = verdictFixtures()['standard-request'] as unknown as StandardPayload;
  const packageName = o.packageName ?? TEST_PACKAGE;
  payload.requestDetails.requestPackageName = packageName;
  payload.requestDetails.requestHash = requestHashOf(o.nonce);
  payload.requestDetails.timestampMillis = String(o.now.getTime());
  payload.appIntegrity.packageName = packageName;
  payload.appIntegrity.certificateSha256Digest = [
    Buffer.from(TEST_CERT_DIGEST).toString('base64url'),
  ];
  o.edit?.(payload);
  return payload;
}
