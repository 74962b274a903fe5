import { z } from 'zod';
import { decodeBase64 } from '../core/base64.js';
import { DEVICE_NONCE_BYTES } from '../core/verify.js';

/** Sizes of docs/token-format.md section 2. */
export const EXPECTED_NONCE_BYTES = { min: 16, max: 512 } as const;
export const SESSION_REFERENCE_MAX = 256;

export type VerifyRequest =
  | {
      approach: 'session';
      token: Uint8Array;
      sessionReference: string;
      deviceNonce: Uint8Array | null;
    }
  | { approach: 'sessionless'; token: Uint8Array; expectedNonce: Uint8Array };

// `null` counts as absent: JSON encoders commonly write absent optional fields that way
const optionalText = z.string().nullish();
const body = z.object({
  attestationToken: optionalText,
  sessionReference: optionalText,
  deviceNonce: optionalText,
  expectedNonce: optionalText,
});

/**
 * Validates a verify body per the interface and docs/token-format.md sections 1-2. Any failure is a
 * malformed request (HTTP 400, 268505089); the message says what is wrong, never about a token.
 */
export function parseVerifyRequest(
  json: unknown,
): { ok: true; request: VerifyRequest } | { ok: false; message: string } {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return fail('the body must be a JSON object');
  const parsed = body.safeParse(json);
  if (!parsed.success) {
    const field = String(parsed.error.issues[0]?.path[0] ?? 'body');
    return fail(`${field} must be a string`);
  }
  const { attestationToken, sessionReference, deviceNonce, expectedNonce } = parsed.data;
  if (attestationToken === undefined || attestationToken === null)
    return fail('attestationToken is required');
  const token = decodeBase64(attestationToken);
  if (!token) return fail('attestationToken must be non-empty base64');

  const hasSession = sessionReference !== undefined && sessionReference !== null;
  const hasExpected = expectedNonce !== undefined && expectedNonce !== null;
  if (hasSession === hasExpected)
    return fail('exactly one of sessionReference and expectedNonce must be present');

  if (hasSession) {
    if (sessionReference.length === 0 || sessionReference.length > SESSION_REFERENCE_MAX) {
      return fail(`sessionReference must be 1 to ${SESSION_REFERENCE_MAX} characters`);
    }
    // PostgreSQL text cannot hold NUL: the lookup would fail as a database error (HTTP 500)
    if (sessionReference.includes('\u0000'))
      return fail('sessionReference must not contain NUL characters');
    let device: Uint8Array | null = null;
    if (deviceNonce !== undefined && deviceNonce !== null) {
      device = decodeBase64(deviceNonce);
      if (!device) return fail('deviceNonce must be base64');
      if (device.length < DEVICE_NONCE_BYTES.min || device.length > DEVICE_NONCE_BYTES.max) {
        return fail(
          `deviceNonce must decode to ${DEVICE_NONCE_BYTES.min} to ${DEVICE_NONCE_BYTES.max} bytes`,
        );
      }
    }
    return {
      ok: true,
      request: { approach: 'session', token, sessionReference, deviceNonce: device },
    };
  }

  if (deviceNonce !== undefined && deviceNonce !== null)
    return fail('deviceNonce must be absent with expectedNonce');
  const expected = decodeBase64(expectedNonce!);
  if (!expected) return fail('expectedNonce must be base64');
  if (expected.length < EXPECTED_NONCE_BYTES.min || expected.length > EXPECTED_NONCE_BYTES.max) {
    return fail(
      `expectedNonce must decode to ${EXPECTED_NONCE_BYTES.min} to ${EXPECTED_NONCE_BYTES.max} bytes`,
    );
  }
  return { ok: true, request: { approach: 'sessionless', token, expectedNonce: expected } };
}

function fail(message: string) {
  return { ok: false as const, message };
}
