import { z } from 'zod';

/** `appRecognitionVerdict` values that come with the app's identity (packageName, digests, version). */
const EVALUATED = new Set(['PLAY_RECOGNIZED', 'UNRECOGNIZED_VERSION']);

/**
 * `timestampMillis` is a decimal string in real payloads (a JSON int64); a plain number is
 * accepted too. At most 15 digits keeps it a safe integer.
 */
const timestampMillis = z
  .union([z.string().regex(/^\d{1,15}$/, 'expected a decimal string of milliseconds'), z.number().int().nonnegative()])
  .transform((v) => Number(v))
  .refine((v) => Number.isSafeInteger(v), 'expected a safe integer of milliseconds');

/**
 * The Play Integrity verdict layout of a classic request (Google, "Integrity verdicts"), as far as
 * the checks read it. Unknown members (environmentDetails, recentDeviceActivity...) are dropped,
 * not refused: Google adds fields over time.
 */
export const playIntegrityPayloadSchema = z.object({
  requestDetails: z.object({
    requestPackageName: z.string(),
    nonce: z.string(),
    timestampMillis,
  }),
  appIntegrity: z
    .object({
      appRecognitionVerdict: z.string(),
      packageName: z.string().optional(),
      certificateSha256Digest: z.array(z.string()).optional(),
      versionCode: z.union([z.string(), z.number()]).optional(),
    })
    // Google sends the app's identity with every evaluated verdict; a recognized verdict without
    // it would let the package decision rest on the spoofable requestPackageName alone.
    .refine((a) => !EVALUATED.has(a.appRecognitionVerdict) || (a.packageName !== undefined && a.certificateSha256Digest !== undefined), {
      message: 'an evaluated appRecognitionVerdict must come with packageName and certificateSha256Digest',
    }),
  deviceIntegrity: z.object({
    deviceRecognitionVerdict: z.array(z.string()).optional(),
  }),
  accountDetails: z.object({ appLicensingVerdict: z.string() }).optional(),
});

/** A payload that passed `playIntegrityPayloadSchema` (timestampMillis already a number). */
export type PlayIntegrityPayload = z.output<typeof playIntegrityPayloadSchema>;

/**
 * Parses the JWS payload bytes as a Play Integrity verdict.
 * @param bytes the verified JWS payload
 * @returns the payload, or a short plain-words problem
 */
export function parsePlayIntegrityPayload(bytes: Uint8Array): { ok: true; payload: PlayIntegrityPayload } | { ok: false; problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    return { ok: false, problem: 'the signed payload is not JSON' };
  }
  const parsed = playIntegrityPayloadSchema.safeParse(json);
  if (parsed.success) return { ok: true, payload: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? issue.path.join('.') : 'payload';
  return { ok: false, problem: `not the Play Integrity verdict layout: ${where}: ${issue?.message ?? 'invalid'}` };
}
